/*
 * vmlab guest /init in C, for guests without busybox (Alpha): the same steps
 * and the same records as the shell /init beside it (images/initramfs/init):
 * mount, apply /vmlab/knobs, set up swap from /vmlab/run.conf (zram or a
 * disk; the swap header is written here, as mkswap would), report the
 * machine, hang hook, snapshots around the experiment, end record, power off.
 *
 * The experiment's command (VMLAB_CMD) is split into argv here with sh's
 * quoting rules for words ('...', "...", \x); there is no shell, so a
 * command that needs one (pipes, ;, &&, redirections) is refused with an
 * `init` record rather than run wrongly.
 *
 * Booted for a snapshot (no /vmlab/run.conf: engine/snapshot.py), it asks
 * for the snapshot once up, and a restored machine goes on from there: it
 * pulls its job from the job disk and unpacks it over / (the shell /init
 * uses busybox's cpio; here a newc reader of our own).
 *
 * Not as PID 1, `init mkswap FILE [KIB]` only writes a swap header, `init
 * argv CMD` prints the words it would run, `init patches LOG` the patch
 * records a kernel log gives and `init unpack ARCHIVE DIR` unpacks a newc
 * archive, so the host's tests can check them (against util-linux's mkswap,
 * Python's shlex, the shell /init's sed and the host's archive writer).
 */
#include "vmlab.h"
#include <stdint.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/klog.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/swap.h>
#include <sys/wait.h>

#define CONF_MAX 64

static char *conf_key[CONF_MAX], *conf_val[CONF_MAX];
static int conf_n;

static void note(const char *step, int ok)
{
	vl_buf b = vl_record("init");
	vl_kstr(&b, "step", step);
	vl_kint(&b, "ok", ok);
	vl_emit(&b);
}

/* Patch sets announce themselves at boot ("vmlab-patch: NAME ..."): one
 * `patch` record each, as the shell /init's dmesg | sed does, so a run
 * proves which patches its kernel really had. */
static void report_patches_in(const char *log)
{
	for (const char *at = log; (at = strstr(at, "vmlab-patch: ")); ) {
		at += strlen("vmlab-patch: ");
		size_t k = strspn(at, "abcdefghijklmnopqrstuvwxyz0123456789.-");
		if (k) {
			char name[128];
			snprintf(name, sizeof name, "%.*s", (int)k, at);
			vl_buf b = vl_record("patch");
			vl_kstr(&b, "name", name);
			vl_emit(&b);
		}
		at += k;
	}
}

static void report_patches(void)
{
	int len = klogctl(10 /* SYSLOG_ACTION_SIZE_BUFFER */, NULL, 0);
	if (len <= 0)
		return;
	char *log = malloc((size_t)len + 1);
	int n = klogctl(3 /* SYSLOG_ACTION_READ_ALL */, log, len);
	log[n > 0 ? n : 0] = 0;
	report_patches_in(log);
	free(log);
}

/* Split `s` into words with sh's quoting rules. Returns the word count, or
 * -1 on an unterminated quote, -2 on an unquoted shell operator. Words are
 * written into `out` (which must be as long as s + 1) and pointed to by
 * argv (at most max - 1 words, NULL-terminated). */
static int split_words(const char *s, char *out, char **argv, int max)
{
	int n = 0;
	char *o = out;
	while (*s) {
		while (*s == ' ' || *s == '\t' || *s == '\n')
			s++;
		if (!*s)
			break;
		if (n >= max - 1)
			return -1;
		argv[n++] = o;
		while (*s && *s != ' ' && *s != '\t' && *s != '\n') {
			if (*s == '\'') {
				const char *e = strchr(s + 1, '\'');
				if (!e)
					return -1;
				memcpy(o, s + 1, (size_t)(e - s - 1));
				o += e - s - 1;
				s = e + 1;
			} else if (*s == '"') {
				for (s++; *s && *s != '"'; s++) {
					if (*s == '\\' && strchr("\"\\$`", s[1]))
						s++;
					*o++ = *s;
				}
				if (*s != '"')
					return -1;
				s++;
			} else if (*s == '\\' && s[1]) {
				*o++ = s[1];
				s += 2;
			} else if (strchr("|&;<>()$`*?", *s)) {
				return -2;
			} else {
				*o++ = *s++;
			}
		}
		*o++ = 0;
	}
	argv[n] = NULL;
	return n;
}

/* /vmlab/run.conf: KEY=value lines, the value quoted for sh by the host */
static void read_conf(void)
{
	char *s = vl_slurp("/vmlab/run.conf");
	if (!s) {
		note("run.conf", 0);
		return;
	}
	for (char *line = strtok(s, "\n"); line && conf_n < CONF_MAX; line = strtok(NULL, "\n")) {
		char *eq = strchr(line, '=');
		if (!eq)
			continue;
		*eq = 0;
		char *buf = malloc(strlen(eq + 1) + 1), *w[2];
		int n = split_words(eq + 1, buf, w, 2);
		conf_key[conf_n] = strdup(line);
		conf_val[conf_n++] = n == 1 ? w[0] : (free(buf), strdup(""));
	}
	free(s);
}

static const char *conf(const char *key)
{
	for (int i = 0; i < conf_n; i++)
		if (!strcmp(conf_key[i], key))
			return conf_val[i];
	return "";
}

static int write_str(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY);
	if (fd < 0)
		return -1;
	size_t len = strlen(val);
	int ok = write(fd, val, len) == (ssize_t)len;
	/* sysctl and sysfs files report a bad value on close or write */
	ok = close(fd) == 0 && ok;
	return ok ? 0 : -1;
}

/* /vmlab/knobs: "parameter file value" per line (experiments/common.toml) */
static void apply_knobs(void)
{
	char *s = vl_slurp("/vmlab/knobs");
	for (char *line = s ? strtok(s, "\n") : NULL; line; line = strtok(NULL, "\n")) {
		char name[128], file[256], value[256], v[260];
		if (sscanf(line, "%127s %255s %255[^\n]", name, file, value) != 3)
			continue;
		snprintf(v, sizeof v, "%s\n", value);
		note(name, write_str(file, v) == 0);
	}
	free(s);
}

/* The v1 swap header mkswap writes: in the first page, at byte 1024,
 * version 1, the last usable page and no bad pages; "SWAPSPACE2" in the
 * page's last 10 bytes. The rest of the page is zero. */
static int write_swap_header(int fd, uint64_t size, long pagesz)
{
	if (size < 10 * (uint64_t)pagesz)
		return -1;
	char *page = calloc(1, (size_t)pagesz);
	uint32_t version = 1, last_page = (uint32_t)(size / (uint64_t)pagesz - 1), nbad = 0;
	memcpy(page + 1024, &version, 4);
	memcpy(page + 1028, &last_page, 4);
	memcpy(page + 1032, &nbad, 4);
	memcpy(page + pagesz - 10, "SWAPSPACE2", 10);
	int ok = pwrite(fd, page, (size_t)pagesz, 0) == pagesz && fsync(fd) == 0;
	free(page);
	return ok ? 0 : -1;
}

/* kib: the swap's size when it is only the start of the device (a
 * restored machine's disk has the snapshot's fixed size); "" for all of it */
static int mkswap(const char *dev, const char *kib)
{
	int fd = open(dev, O_RDWR);
	if (fd < 0)
		return -1;
	uint64_t size = 0;
	struct stat st;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
		size = (uint64_t)st.st_size;
	else if (ioctl(fd, BLKGETSIZE64, &size))
		size = 0;
	if (kib && *kib && strtoull(kib, NULL, 10) * 1024 < size)
		size = strtoull(kib, NULL, 10) * 1024;
	int rc = write_swap_header(fd, size, sysconf(_SC_PAGESIZE));
	close(fd);
	return rc;
}

static void setup_swap(void)
{
	const char *sw = conf("VMLAB_SWAP");
	const char *dev = NULL;
	if (!strncmp(sw, "zram:", 5)) {
		char size[64];
		snprintf(size, sizeof size, "%sM\n", sw + 5);
		if (write_str("/sys/block/zram0/disksize", size) == 0)
			dev = "/dev/zram0";
	} else if (!strncmp(sw, "/dev/", 5)) {
		dev = sw;
	}
	if (dev)
		note("swapon", mkswap(dev, conf("VMLAB_SWAP_KIB")) == 0 && swapon(dev, 0) == 0);
}

/* Run a program to completion with PATH=/bin; its exit status, or 127 */
static int run(char **argv)
{
	pid_t pid = fork();
	if (pid == 0) {
		execvp(argv[0], argv);
		fprintf(stderr, "init: %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	int st = 0;
	while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (pid < 0)
		return 127;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int probe(const char *a, const char *b)
{
	char *argv[] = {"vmlab-probe", (char *)a, (char *)b, NULL};
	return run(argv);
}

static unsigned long hex8(const char *p)
{
	char b[9];
	memcpy(b, p, 8);
	b[8] = 0;
	return strtoul(b, NULL, 16);
}

/* A newc archive (what images/initramfs.py writes) unpacked under root:
 * directories and regular files, a file replaced by unlinking it first (so
 * a running program can be), device nodes skipped (/dev is devtmpfs). */
static int unpack(const char *a, size_t len, const char *root)
{
	size_t off = 0;
	while (off + 110 <= len) {
		if (memcmp(a + off, "070701", 6))
			return -1;
		unsigned long mode = hex8(a + off + 14), fsize = hex8(a + off + 54), nsize = hex8(a + off + 94);
		size_t data = (off + 110 + nsize + 3) & ~(size_t)3;
		if (nsize < 1 || data + fsize > len || a[off + 110 + nsize - 1])
			return -1;
		const char *name = a + off + 110;
		if (!strcmp(name, "TRAILER!!!"))
			return 0;
		char path[512];
		snprintf(path, sizeof path, "%s/%s", root, name);
		if (S_ISDIR(mode)) {
			if (mkdir(path, mode & 07777) && errno != EEXIST)
				return -1;
		} else if (S_ISREG(mode)) {
			unlink(path);
			int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode & 07777);
			if (fd < 0 || write(fd, a + data, fsize) != (ssize_t)fsize || close(fd))
				return -1;
		}
		off = (data + fsize + 3) & ~(size_t)3;
	}
	return -1;
}

static char *read_all(const char *path, size_t *len)
{
	struct stat st;
	int fd = open(path, O_RDONLY);
	char *buf = NULL;
	if (fd >= 0 && fstat(fd, &st) == 0 && (buf = malloc(st.st_size + 1)) &&
	    read(fd, buf, st.st_size) == st.st_size) {
		*len = st.st_size;
	} else {
		free(buf);
		buf = NULL;
	}
	if (fd >= 0)
		close(fd);
	return buf;
}

/* The job of a restored machine: vmlab-probe reads it from the job disk;
 * it is unpacked over / (programs to /bin, run.conf and knobs to /vmlab). */
static int pull_job(const char *dev)
{
	const char *tmp = "/tmp/job.cpio";
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd < 0 || dup2(fd, 1) < 0)
			_exit(127);
		execlp("vmlab-probe", "vmlab-probe", "job", dev, (char *)NULL);
		_exit(127);
	}
	int st = 0;
	while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (pid < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
		return -1;
	size_t len = 0;
	char *blob = read_all(tmp, &len);
	int rc = blob ? unpack(blob, len, "") : -1;
	free(blob);
	unlink(tmp);
	return rc;
}

int main(int argc, char **argv)
{
	if (getpid() != 1) {
		if ((argc == 3 || argc == 4) && !strcmp(argv[1], "mkswap"))
			return mkswap(argv[2], argc == 4 ? argv[3] : "") ? 1 : 0;
		if (argc == 4 && !strcmp(argv[1], "unpack")) { /* a newc ARCHIVE under DIR */
			size_t len = 0;
			char *blob = read_all(argv[2], &len);
			return blob && unpack(blob, len, argv[3]) == 0 ? 0 : 1;
		}
		if (argc == 3 && !strcmp(argv[1], "argv")) { /* the words VMLAB_CMD would run, one per line */
			char *w = malloc(strlen(argv[2]) + 1), *v[256];
			int n = split_words(argv[2], w, v, 256);
			for (int i = 0; i < n; i++)
				printf("%s\n", v[i]);
			return n < 0 ? -n : 0;
		}
		if (argc == 3 && !strcmp(argv[1], "patches")) { /* the patch records a kernel log FILE gives */
			char *log = vl_slurp(argv[2]);
			if (!log)
				return 1;
			report_patches_in(log);
			free(log);
			return 0;
		}
		fprintf(stderr, "usage: init mkswap FILE [KIB] | init argv CMD | init patches LOG | init unpack ARCHIVE DIR "
				"(as PID 1 it is the guest's /init)\n");
		return 2;
	}
	setenv("PATH", "/bin", 1);
	mount("proc", "/proc", "proc", 0, NULL);
	mount("sysfs", "/sys", "sysfs", 0, NULL);
	mount("devtmpfs", "/dev", "devtmpfs", 0, NULL);
	mount("tmpfs", "/tmp", "tmpfs", 0, NULL);
	/* Only emergencies from the kernel on the console, so records keep their lines. */
	write_str("/proc/sys/kernel/printk", "1\n");

	/* No run.conf: booted for a snapshot (engine/snapshot.py); see the shell /init */
	if (access("/vmlab/run.conf", F_OK)) {
		sync();
		probe("seed", "vmlab: one entropy seed for every run restored from this snapshot");
		printf("vmlab: asking for the snapshot\n");
		fflush(stdout);
		if (probe("checkpoint", NULL)) {
			printf("vmlab: no snapshot\n");
			fflush(stdout);
			sync();
			reboot(RB_POWER_OFF);
		}
		note("job", pull_job("/dev/vdc") == 0);
	}
	read_conf();
	/* a perturbed repeat of a restored run: the seed reaches the kernel's entropy here */
	if (*conf("VMLAB_PERTURB"))
		note("perturb", probe("seed", conf("VMLAB_PERTURB")) == 0);
	apply_knobs();
	report_patches();
	setup_swap();

	probe("machine", NULL);
	/* vmlab.hang=1 on the kernel command line: hang here (the host's timeout test) */
	char *cmdline = vl_slurp("/proc/cmdline");
	if (cmdline && strstr(cmdline, "vmlab.hang=1"))
		for (;;)
			pause();
	free(cmdline);
	probe("snapshot", "before");
	if (chdir("/tmp"))
		perror("init: chdir /tmp");

	const char *cmd = conf("VMLAB_CMD");
	char *words = malloc(strlen(cmd) + 1), *cargv[256];
	int n = split_words(cmd, words, cargv, 256);
	int rc;
	if (n > 0) {
		rc = run(cargv);
	} else {
		/* no shell here: say why the command did not run */
		note(n == -2 ? "command_needs_shell" : "command", 0);
		rc = 127;
	}
	char rcs[16];
	snprintf(rcs, sizeof rcs, "%d", rc);
	probe("snapshot", "after");
	probe("end", rcs);
	sync();
	reboot(RB_POWER_OFF);
	for (;;)
		pause();
}
