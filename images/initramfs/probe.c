/*
 * vmlab-probe: what the guest's /init reports around an experiment.
 *   vmlab-probe machine         the machine Linux sees (nodes, CPUs, SLIT, HMAT, sysctls)
 *   vmlab-probe snapshot PHASE  vmstat, per-node memory and counters, kswapd, swap
 *   vmlab-probe end RC          the experiment's exit status; the host stops waiting
 * and, for a machine restored from a snapshot (pipeline/ decides; engine/snapshot.py):
 *   vmlab-probe checkpoint      ask the host for the snapshot, here and now (vmlab-ctl)
 *   vmlab-probe job DEV         write the job the host put on disk DEV to stdout
 *   vmlab-probe seed WORD       mix WORD into the kernel's entropy and reseed
 */
#include "vmlab.h"
#include <linux/random.h>
#include <sys/ioctl.h>
#include <sys/utsname.h>

static void trim(char *s)
{
	size_t n = strlen(s);
	while (n && (s[n - 1] == '\n' || s[n - 1] == ' '))
		s[--n] = 0;
}

static void file_str(vl_buf *b, const char *k, const char *path) /* NULL path: "" */
{
	char *s = vl_slurp(path);
	if (s)
		trim(s);
	vl_kstr(b, k, s ? s : "");
	free(s);
}

static void machine(void)
{
	int nodes = vl_nodes();
	char p[128];
	struct utsname u;
	vl_buf b = vl_record("machine");
	uname(&u);
	vl_kstr(&b, "release", u.release);
	vl_kstr(&b, "arch", u.machine);
	file_str(&b, "version", "/proc/version");
	file_str(&b, "cmdline", "/proc/cmdline");
	file_str(&b, "cpus_online", "/sys/devices/system/cpu/online");
	file_str(&b, "uptime", "/proc/uptime");
	file_str(&b, "zone_reclaim_mode", "/proc/sys/vm/zone_reclaim_mode");
	file_str(&b, "numa_balancing", "/proc/sys/kernel/numa_balancing");
	file_str(&b, "thp", "/sys/kernel/mm/transparent_hugepage/enabled");
	file_str(&b, "watermark_boost_factor", "/proc/sys/vm/watermark_boost_factor");
	file_str(&b, "min_free_kbytes", "/proc/sys/vm/min_free_kbytes");
	file_str(&b, "swaps", "/proc/swaps");
	/* 1 when the kernel has LOCK_STAT (the lockstat flavor) */
	vl_kint(&b, "lock_stat", access("/proc/lock_stat", R_OK) == 0);
	vl_kint(&b, "mem_total_kib", vl_meminfo("MemTotal"));
	vl_kint(&b, "swap_total_kib", vl_meminfo("SwapTotal"));
	vl_kint(&b, "numa", vl_numa());
	vl_open(&b, "nodes", '[');
	for (int n = 0; n < nodes; n++) {
		vl_open(&b, NULL, '{');
		vl_kint(&b, "node", n);
		file_str(&b, "cpus", vl_node_file(p, sizeof p, n, "cpulist"));
		char *s = vl_slurp(vl_node_file(p, sizeof p, n, "meminfo"));
		vl_kint(&b, "mem_total_kib", s ? vl_node_meminfo(s, "MemTotal") : -1);
		free(s);
		/* HMAT, as the kernel parsed it: best initiator's latency (ns) and bandwidth (MB/s) */
		s = vl_slurp(vl_node_file(p, sizeof p, n, "access0/initiators/read_latency"));
		vl_kint(&b, "hmat_read_latency_ns", s ? atoll(s) : -1);
		free(s);
		s = vl_slurp(vl_node_file(p, sizeof p, n, "access0/initiators/read_bandwidth"));
		vl_kint(&b, "hmat_read_bandwidth_mbps", s ? atoll(s) : -1);
		free(s);
		vl_close(&b, '}');
	}
	vl_close(&b, ']');
	vl_open(&b, "distances", '[');
	for (int n = 0; n < nodes; n++) {
		/* without NUMA, the one node's distance to itself: LOCAL_DISTANCE */
		char *s = vl_numa() ? vl_slurp(vl_node_file(p, sizeof p, n, "distance")) : strdup("10");
		vl_open(&b, NULL, '[');
		for (char *t = s ? strtok(s, " \n") : NULL; t; t = strtok(NULL, " \n")) {
			vl_sep(&b);
			vl_raw(&b, "%s", t);
		}
		vl_close(&b, ']');
		free(s);
	}
	vl_close(&b, ']');
	vl_emit(&b);
}

/* The snapshot request: one byte to the vmlab-ctl port (series patch 0006).
 * QEMU stops the machine after this instruction and saves it; a restored
 * machine goes on from here. The status read back says whether QEMU
 * refused (2: modelled disk requests outstanding). */
#define VMLAB_CTL_PORT 0x5a0
static int checkpoint(void)
{
	/* /dev/port (CONFIG_DEVPORT): the same on every arch, and no ioperm
	 * (CONFIG_X86_IOPL_IOPERM) needed in the guest kernel */
	unsigned char st = 0;
	int fd = open("/dev/port", O_RDWR);
	char c = 'S';
	if (fd < 0 || pwrite(fd, &c, 1, VMLAB_CTL_PORT) != 1 || pread(fd, &st, 1, VMLAB_CTL_PORT) != 1) {
		perror("vmlab-probe: /dev/port");
		return 1;
	}
	close(fd);
	if (st != 1) {
		fprintf(stderr, "vmlab-probe: the host refused the snapshot (status %d)\n", st);
		return 1;
	}
	return 0;
}

/* The job disk: a 4096-byte header "VMLABJOB 1 LENGTH\n", then LENGTH
 * bytes (a newc cpio). Read with O_DIRECT: the kernel read this disk's
 * first blocks when it probed it before the snapshot, and its page cache
 * still holds those (zero) blocks. */
#define JOB_BLOCK 4096
static int job(const char *dev)
{
	int fd = open(dev, O_RDONLY | O_DIRECT);
	unsigned char *buf;
	long long len, done = 0;
	if (fd < 0) {
		perror(dev);
		return 1;
	}
	if (posix_memalign((void **)&buf, JOB_BLOCK, 1 << 20) || pread(fd, buf, JOB_BLOCK, 0) != JOB_BLOCK) {
		fprintf(stderr, "vmlab-probe: %s: cannot read the job header\n", dev);
		return 1;
	}
	buf[JOB_BLOCK - 1] = 0;
	if (sscanf((char *)buf, "VMLABJOB 1 %lld", &len) != 1 || len < 0) {
		fprintf(stderr, "vmlab-probe: %s: no job header\n", dev);
		return 1;
	}
	while (done < len) {
		long long want = len - done > (1 << 20) ? (1 << 20) : (len - done + JOB_BLOCK - 1) / JOB_BLOCK * JOB_BLOCK;
		ssize_t got = pread(fd, buf, want, JOB_BLOCK + done);
		if (got <= 0) {
			fprintf(stderr, "vmlab-probe: %s: job truncated at %lld of %lld bytes\n", dev, done, len);
			return 1;
		}
		if (got > len - done)
			got = len - done;
		if (fwrite(buf, 1, got, stdout) != (size_t)got)
			return 1;
		done += got;
	}
	close(fd);
	return fflush(stdout) != 0;
}

/* A perturbed repeat after restore: the word goes into the input pool
 * (credited, so the reseed takes it) and the CRNG reseeds now, so every
 * later random choice (ASLR, hash seeds of new objects, the scheduler's
 * and reclaim's random picks) differs from its siblings'. */
static int seed(const char *word)
{
	struct {
		struct rand_pool_info info;
		char buf[256];
	} e;
	size_t n = strlen(word) < sizeof e.buf ? strlen(word) : sizeof e.buf;
	int fd = open("/dev/urandom", O_RDWR);
	memcpy(e.buf, word, n);
	e.info.buf_size = n;
	e.info.entropy_count = 8 * n;
	if (fd < 0 || ioctl(fd, RNDADDENTROPY, &e.info) || ioctl(fd, RNDRESEEDCRNG)) {
		perror("vmlab-probe: seed");
		return 1;
	}
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "checkpoint"))
		return checkpoint();
	if (argc >= 3 && !strcmp(argv[1], "job"))
		return job(argv[2]);
	if (argc >= 3 && !strcmp(argv[1], "seed"))
		return seed(argv[2]);
	if (argc >= 2 && !strcmp(argv[1], "machine")) {
		machine();
		return 0;
	}
	if (argc >= 3 && !strcmp(argv[1], "snapshot")) {
		if (!strcmp(argv[2], "before"))
			vl_price_from_here();
		vl_snapshot(argv[2]);
		return 0;
	}
	if (argc >= 3 && !strcmp(argv[1], "end")) {
		vl_buf b = vl_record("end");
		vl_kint(&b, "rc", atoi(argv[2]));
		vl_kdbl(&b, "t_ms", vl_now_ms(CLOCK_MONOTONIC));
		vl_emit(&b);
		return 0;
	}
	fprintf(stderr, "usage: vmlab-probe machine | snapshot PHASE | end RC | checkpoint | job DEV | seed WORD\n");
	return 2;
}
