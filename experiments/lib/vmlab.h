/*
 * Guest side of vmlab's record protocol: one "@@VMLAB {json}" line per
 * record on the console, written with a single write() so that a record is
 * never split by another writer. Header-only so each reproducer is one
 * static binary with no build system of its own.
 *
 * Snapshots read what Linux itself reports (/proc/vmstat, per-node meminfo
 * and numastat, kswapd thread times) so every figure is the kernel's own.
 */
#ifndef VMLAB_H
#define VMLAB_H

#define _GNU_SOURCE
/* Each program uses only some of these helpers. */
#pragma GCC diagnostic ignored "-Wunused-function"
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sched.h>
#include <unistd.h>

/* ---- a growing JSON line ------------------------------------------------ */
typedef struct {
	char *s;
	size_t len, cap;
	int need_comma; /* a value was written at this nesting level */
} vl_buf;

static void vl_raw(vl_buf *b, const char *fmt, ...)
{
	va_list ap;
	for (;;) {
		size_t room = b->cap - b->len;
		va_start(ap, fmt);
		int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? room : 0, fmt, ap);
		va_end(ap);
		if (n < 0)
			return;
		if (b->s && (size_t)n < room) {
			b->len += (size_t)n;
			return;
		}
		b->cap = (b->cap + (size_t)n + 1) * 2;
		b->s = realloc(b->s, b->cap);
		if (!b->s)
			abort();
	}
}

static void vl_sep(vl_buf *b)
{
	if (b->need_comma)
		vl_raw(b, ",");
	b->need_comma = 1;
}

static void vl_str(vl_buf *b, const char *v)
{
	vl_raw(b, "\"");
	for (; *v; v++) {
		unsigned char c = (unsigned char)*v;
		if (c == '"' || c == '\\')
			vl_raw(b, "\\%c", c);
		else if (c < 0x20 || c >= 0x7f)
			vl_raw(b, "\\u%04x", c);
		else
			vl_raw(b, "%c", c);
	}
	vl_raw(b, "\"");
}

static void vl_key(vl_buf *b, const char *k)
{
	vl_sep(b);
	vl_str(b, k);
	vl_raw(b, ":");
}

static void vl_kint(vl_buf *b, const char *k, long long v) { vl_key(b, k); vl_raw(b, "%lld", v); }
static void vl_kdbl(vl_buf *b, const char *k, double v) { vl_key(b, k); vl_raw(b, "%.3f", v); }
static void vl_kstr(vl_buf *b, const char *k, const char *v) { vl_key(b, k); vl_str(b, v); }
static void vl_open(vl_buf *b, const char *k, char br) /* k NULL: array element */
{
	if (k)
		vl_key(b, k);
	else
		vl_sep(b);
	vl_raw(b, "%c", br);
	b->need_comma = 0;
}
static void vl_close(vl_buf *b, char br) { vl_raw(b, "%c", br); b->need_comma = 1; }

static vl_buf vl_record(const char *type)
{
	vl_buf b = {0};
	vl_raw(&b, "@@VMLAB {");
	vl_kstr(&b, "type", type);
	return b;
}

static void vl_emit(vl_buf *b)
{
	vl_raw(b, "}\n");
	size_t off = 0;
	while (off < b->len) {
		ssize_t n = write(1, b->s + off, b->len - off);
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			break;
		}
		off += (size_t)n;
	}
	free(b->s);
	b->s = NULL;
}

/* ---- clocks -------------------------------------------------------------- */
/* Phase markers for the timing model (timing/plugin.c): the model reports
 * modeled time, misses and lock transfers per phase and CPU. On x86 the
 * marker is `xchg %bx,%bx`, a no-op, with rax = 'VML' << 8 | op, rdi = phase
 * id, rsi = instance; the plugin reads the registers there. Elsewhere (and
 * with the model off) it costs nothing and means nothing. Ids: timing.PHASES. */
enum { VL_PHASE_MEMEATER_CHUNK = 1, VL_PHASE_LATPROBE_CHASE = 2, VL_PHASE_LATPROBE_PINGPONG = 3 };
static inline void vl_phase_mark(unsigned op, unsigned long id, unsigned long instance)
{
#if defined(__x86_64__)
	__asm__ volatile("xchg %%bx, %%bx" : : "a"((0x564d4cul << 8) | op), "D"(id), "S"(instance) : "memory");
#else
	(void)op; (void)id; (void)instance;
#endif
}
static inline void vl_phase_begin(unsigned long id, unsigned long instance) { vl_phase_mark(1, id, instance); }
static inline void vl_phase_end(unsigned long id, unsigned long instance) { vl_phase_mark(2, id, instance); }

static double vl_now_ms(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---- /proc and /sys readers ---------------------------------------------- */
static char *vl_slurp(const char *path) /* NULL path: NULL */
{
	int fd = path ? open(path, O_RDONLY) : -1;
	if (fd < 0)
		return NULL;
	size_t cap = 8192, len = 0;
	char *s = malloc(cap);
	for (;;) {
		if (len + 4096 > cap)
			s = realloc(s, cap *= 2);
		ssize_t n = read(fd, s + len, cap - len - 1);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	s[len] = 0;
	return s;
}

/* A kernel without NUMA (Alpha: removed in 5.14) has no
 * /sys/devices/system/node; it is one node, node 0, whose figures are the
 * machine's own, as Linux itself treats it (node_distance() = 10). */
static int vl_numa(void)
{
	return access("/sys/devices/system/node/node0", F_OK) == 0;
}

static int vl_nodes(void) /* number of possible NUMA nodes that exist */
{
	int n = 0;
	char p[96];
	if (!vl_numa())
		return 1;
	for (;;) {
		snprintf(p, sizeof p, "/sys/devices/system/node/node%d", n);
		if (access(p, F_OK))
			return n;
		n++;
	}
}

/* Path of a node's sysfs file; on a kernel without NUMA the machine-wide
 * file that holds the same figures, or NULL where there is none. */
static const char *vl_node_file(char *p, size_t sz, int node, const char *file)
{
	if (!vl_numa()) {
		if (!strcmp(file, "meminfo"))
			return "/proc/meminfo";
		if (!strcmp(file, "vmstat"))
			return "/proc/vmstat";
		if (!strcmp(file, "cpulist"))
			return "/sys/devices/system/cpu/online";
		return NULL;
	}
	snprintf(p, sz, "/sys/devices/system/node/node%d/%s", node, file);
	return p;
}

/* "key value" lines (vmstat, numastat) as JSON members; `only` (NULL-ended)
 * keeps just the named keys */
static void vl_kv_fields(vl_buf *b, const char *path, const char **only)
{
	char *s = vl_slurp(path);
	for (char *line = s ? strtok(s, "\n") : NULL; line; line = strtok(NULL, "\n")) {
		char name[128];
		long long v;
		if (sscanf(line, "%127s %lld", name, &v) != 2)
			continue;
		const char **f = only;
		while (f && *f && strcmp(*f, name))
			f++;
		if (!only || *f)
			vl_kint(b, name, v);
	}
	free(s);
}

static void vl_kv_file(vl_buf *b, const char *k, const char *path)
{
	vl_open(b, k, '{');
	vl_kv_fields(b, path, NULL);
	vl_close(b, '}');
}

/* per-node meminfo: "Node 0 MemFree:   1234 kB" */
static long long vl_node_meminfo(const char *s, const char *field)
{
	const char *p = s;
	size_t fl = strlen(field);
	while ((p = strstr(p, field))) {
		if ((p == s || p[-1] == ' ' || p[-1] == '\n') && p[fl] == ':')
			return atoll(p + fl + 1);
		p += fl;
	}
	return -1;
}

static long long vl_meminfo(const char *field)
{
	char *s = vl_slurp("/proc/meminfo");
	long long v = s ? vl_node_meminfo(s, field) : -1;
	free(s);
	return v;
}

static const char *VL_NODE_FIELDS[] = {
	"MemTotal", "MemFree", "MemUsed", "FilePages", "AnonPages", "AnonHugePages",
	"Active(anon)", "Inactive(anon)", "Active(file)", "Inactive(file)", "Slab", NULL,
};

static void vl_nodemem(vl_buf *b, int nodes)
{
	char p[96];
	vl_open(b, "nodes", '[');
	for (int n = 0; n < nodes; n++) {
		char *s = vl_slurp(vl_node_file(p, sizeof p, n, "meminfo"));
		vl_open(b, NULL, '{');
		vl_kint(b, "node", n);
		for (const char **f = VL_NODE_FIELDS; *f; f++) {
			long long v = s ? vl_node_meminfo(s, *f) : -1;
			/* /proc/meminfo (no NUMA) lacks the node file's MemUsed: same definition */
			if (v < 0 && s && !strcmp(*f, "MemUsed"))
				v = vl_node_meminfo(s, "MemTotal") - vl_node_meminfo(s, "MemFree");
			vl_kint(b, *f, v);
		}
		vl_close(b, '}');
		free(s);
	}
	vl_close(b, ']');
}

/* MemFree per node, kB: the cheap sample taken after every chunk */
static void vl_nodefree(vl_buf *b, int nodes)
{
	char p[96];
	vl_open(b, "free_kib", '[');
	for (int n = 0; n < nodes; n++) {
		char *s = vl_slurp(vl_node_file(p, sizeof p, n, "meminfo"));
		vl_sep(b);
		vl_raw(b, "%lld", s ? vl_node_meminfo(s, "MemFree") : -1LL);
		free(s);
	}
	vl_close(b, ']');
}

/* Calls fn(node, ticks, arg) for every kswapd thread; ticks = utime + stime
 * from /proc/PID/stat, in clock ticks. */
static void vl_each_kswapd(void (*fn)(int node, long long ticks, void *arg), void *arg)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		char p[300];
		snprintf(p, sizeof p, "/proc/%s/stat", e->d_name);
		char *s = vl_slurp(p);
		if (!s)
			continue;
		char *lp = strchr(s, '('), *rp = strrchr(s, ')');
		int node;
		if (lp && rp && sscanf(lp, "(kswapd%d)", &node) == 1) {
			/* fields after ")": state(3) ... utime(14) stime(15) */
			unsigned long long ut = 0, st = 0;
			char *f = rp + 2;
			for (int i = 3; i < 14 && f; i++)
				f = strchr(f, ' '), f = f ? f + 1 : NULL;
			if (f && sscanf(f, "%llu %llu", &ut, &st) == 2)
				fn(node, (long long)(ut + st), arg);
		}
		free(s);
	}
	if (d)
		closedir(d);
}

static void vl_kswapd_emit(int node, long long ticks, void *arg)
{
	char k[16];
	snprintf(k, sizeof k, "%d", node);
	vl_kint((vl_buf *)arg, k, ticks);
}

/* kswapd CPU time per node, in clock ticks */
static void vl_kswapd(vl_buf *b)
{
	vl_kint(b, "clk_tck", sysconf(_SC_CLK_TCK));
	vl_open(b, "kswapd", '{');
	vl_each_kswapd(vl_kswapd_emit, b);
	vl_close(b, '}');
}

static const char *VL_NODE_VMSTAT[] = {
	"nr_vmscan_write", "nr_vmscan_immediate_reclaim", "workingset_refault_anon",
	"workingset_refault_file", "nr_anon_pages", "nr_file_pages", "nr_swapcached", NULL,
};

static void vl_snapshot(const char *phase)
{
	int nodes = vl_nodes();
	char p[96];
	vl_buf b = vl_record("vmstat");
	vl_kstr(&b, "phase", phase);
	vl_kdbl(&b, "t_ms", vl_now_ms(CLOCK_MONOTONIC));
	vl_kv_file(&b, "counters", "/proc/vmstat");
	vl_emit(&b);

	b = vl_record("nodemem");
	vl_kstr(&b, "phase", phase);
	vl_nodemem(&b, nodes);
	vl_emit(&b);

	/* Per-node counters: numastat, plus the node's reclaim counters (pages
	 * it wrote out, i.e. swapped, for anonymous memory; refaults);
	 * /proc/vmstat's pgscan and pgsteal are machine-wide. */
	b = vl_record("nodestat");
	vl_kstr(&b, "phase", phase);
	vl_open(&b, "nodes", '[');
	for (int n = 0; n < nodes; n++) {
		vl_open(&b, NULL, '{');
		vl_kv_fields(&b, vl_node_file(p, sizeof p, n, "numastat"), NULL);
		vl_kv_fields(&b, vl_node_file(p, sizeof p, n, "vmstat"), VL_NODE_VMSTAT);
		vl_close(&b, '}');
	}
	vl_close(&b, ']');
	vl_emit(&b);

	b = vl_record("kswapd");
	vl_kstr(&b, "phase", phase);
	vl_kswapd(&b);
	vl_emit(&b);

	b = vl_record("swap");
	vl_kstr(&b, "phase", phase);
	long long tot = vl_meminfo("SwapTotal"), fr = vl_meminfo("SwapFree");
	vl_kint(&b, "total_kib", tot);
	vl_kint(&b, "used_kib", tot >= 0 && fr >= 0 ? tot - fr : -1);
	vl_emit(&b);
}

/* ---- single counters, metrics, sanity ------------------------------------ */
/* One /proc/vmstat counter; -1 when the kernel does not have it. */
static long long vl_vmstat_get(const char *name)
{
	char *s = vl_slurp("/proc/vmstat");
	long long v = -1;
	size_t nl = strlen(name);
	for (char *p = s; p && *p;) {
		if (!strncmp(p, name, nl) && p[nl] == ' ') {
			v = atoll(p + nl + 1);
			break;
		}
		p = strchr(p, '\n');
		p = p ? p + 1 : NULL;
	}
	free(s);
	return v;
}

/* Several counters at once: names NULL-ended, out[i] = value or -1. */
static void vl_vmstat_many(const char **names, long long *out)
{
	char *s = vl_slurp("/proc/vmstat");
	for (int i = 0; names[i]; i++)
		out[i] = -1;
	for (char *line = s ? strtok(s, "\n") : NULL; line; line = strtok(NULL, "\n")) {
		char name[128];
		long long v;
		if (sscanf(line, "%127s %lld", name, &v) != 2)
			continue;
		for (int i = 0; names[i]; i++)
			if (!strcmp(names[i], name))
				out[i] = v;
	}
	free(s);
}

/* What reclaim did, the same counters every reproducer reports per phase. */
static const char *VL_RECLAIM[] = {
	"pgscan_kswapd", "pgscan_direct", "pgsteal_kswapd", "pgsteal_direct", "pswpin", "pswpout",
	"pgmajfault", "pgfault", "pgpgin", "pgpgout", "allocstall_normal", "allocstall_dma32", "oom_kill", NULL,
};
#define VL_NRECLAIM (sizeof VL_RECLAIM / sizeof *VL_RECLAIM - 1)

/* delta[i] = now - before[i] as JSON members under `k` */
static void vl_reclaim_delta(vl_buf *b, const char *k, const long long *before, const long long *now)
{
	vl_open(b, k, '{');
	for (size_t i = 0; i < VL_NRECLAIM; i++)
		if (before[i] >= 0 && now[i] >= 0)
			vl_kint(b, VL_RECLAIM[i], now[i] - before[i]);
	vl_close(b, '}');
}

/* kswapd CPU ticks (utime + stime), summed over every node's kswapd; per
 * node into per_node[0..max) when given. */
struct vl_kswapd_sum { long long sum, *per_node; int max; };

static void vl_kswapd_add(int node, long long ticks, void *arg)
{
	struct vl_kswapd_sum *t = arg;
	t->sum += ticks;
	if (t->per_node && node >= 0 && node < t->max)
		t->per_node[node] = ticks;
}

static long long vl_kswapd_ticks(long long *per_node, int max)
{
	struct vl_kswapd_sum t = {0, per_node, max};
	if (per_node)
		memset(per_node, 0, sizeof *per_node * (size_t)max);
	vl_each_kswapd(vl_kswapd_add, &t);
	return t.sum;
}

/* A key figure under a stable name; the host stores it in `metrics` so
 * runs on different kernels compare by name. */
static void vl_metric(const char *name, double value, const char *unit)
{
	vl_buf b = vl_record("metric");
	vl_kstr(&b, "name", name);
	vl_kdbl(&b, "value", value);
	vl_kstr(&b, "unit", unit);
	vl_emit(&b);
}

/* The reproducer's own verdict: did it run, did it create the pressure it
 * exists for. One record with every check; returns 1 when all passed. */
typedef struct {
	vl_buf b;
	int ok;
} vl_sanity;

static vl_sanity vl_sanity_begin(const char *experiment)
{
	vl_sanity s = {vl_record("sanity"), 1};
	vl_kstr(&s.b, "experiment", experiment);
	vl_open(&s.b, "checks", '[');
	return s;
}

static void vl_sanity_check(vl_sanity *s, const char *name, int pass, double value, const char *expect)
{
	vl_open(&s->b, NULL, '{');
	vl_kstr(&s->b, "name", name);
	vl_kint(&s->b, "ok", pass != 0);
	vl_kdbl(&s->b, "value", value);
	vl_kstr(&s->b, "expect", expect);
	vl_close(&s->b, '}');
	if (!pass)
		s->ok = 0;
}

static int vl_sanity_end(vl_sanity *s)
{
	vl_close(&s->b, ']');
	vl_kint(&s->b, "ok", s->ok);
	vl_emit(&s->b);
	return s->ok;
}

/* ---- kswapd sampler ------------------------------------------------------ */
/* A child process that reports every kswapd's CPU ticks each interval_ms of
 * guest time ("kswapd_sample" records), so the host sees kswapd's CPU share
 * over the run, not only its total. Ends with its parent (vl_sampler_stop). */
#include <signal.h>
#include <sys/wait.h>
static pid_t vl_kswapd_sampler(long interval_ms)
{
	pid_t parent = getpid(), pid = fork();
	if (pid != 0)
		return pid;
	int nodes = vl_nodes();
	long long *per = calloc((size_t)nodes + 1, sizeof *per);
	double t0 = vl_now_ms(CLOCK_MONOTONIC);
	for (long seq = 0; getppid() == parent; seq++) {
		vl_kswapd_ticks(per, nodes);
		vl_buf b = vl_record("kswapd_sample");
		vl_kint(&b, "seq", seq);
		vl_kdbl(&b, "t_ms", vl_now_ms(CLOCK_MONOTONIC) - t0);
		vl_kint(&b, "clk_tck", sysconf(_SC_CLK_TCK));
		vl_open(&b, "ticks", '[');
		for (int n = 0; n < nodes; n++) {
			vl_sep(&b);
			vl_raw(&b, "%lld", per[n]);
		}
		vl_close(&b, ']');
		vl_emit(&b);
		struct timespec ts = {interval_ms / 1000, (interval_ms % 1000) * 1000000L};
		while (nanosleep(&ts, &ts) && errno == EINTR)
			;
	}
	_exit(0);
}

static void vl_sampler_stop(pid_t pid)
{
	if (pid > 0) {
		kill(pid, SIGTERM);
		waitpid(pid, NULL, 0);
	}
}

/* ---- /proc/lock_stat (kernels with CONFIG_LOCK_STAT) ---------------------- */
typedef struct {
	char name[96];
	double v[12]; /* con-bounces contentions wait-min wait-max wait-total wait-avg
	                 acq-bounces acquisitions hold-min hold-max hold-total hold-avg */
} vl_lockclass;

static int vl_lockclass_cmp(const void *a, const void *b)
{
	double x = ((const vl_lockclass *)a)->v[1], y = ((const vl_lockclass *)b)->v[1];
	return x < y ? 1 : x > y ? -1 : strcmp(((const vl_lockclass *)a)->name, ((const vl_lockclass *)b)->name);
}

/* Class lines are "name: 12 numbers"; the lines of call sites under each
 * class carry no such run of numbers. Returns the classes found (caller frees). */
static vl_lockclass *vl_lockstat_parse(const char *text, int *count)
{
	int n = 0, cap = 64;
	vl_lockclass *out = malloc(sizeof *out * (size_t)cap);
	char *s = strdup(text ? text : "");
	for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n")) {
		char *colon = strrchr(line, ':');
		if (!colon)
			continue;
		vl_lockclass c;
		int got = sscanf(colon + 1, "%lf %lf %lf %lf %lf %lf %lf %lf %lf %lf %lf %lf", &c.v[0], &c.v[1],
				 &c.v[2], &c.v[3], &c.v[4], &c.v[5], &c.v[6], &c.v[7], &c.v[8], &c.v[9], &c.v[10],
				 &c.v[11]);
		if (got != 12)
			continue;
		char *st = line;
		while (*st == ' ' || *st == '\t')
			st++;
		size_t len = (size_t)(colon - st);
		if (!len)
			continue;
		if (len >= sizeof c.name)
			len = sizeof c.name - 1;
		memcpy(c.name, st, len);
		c.name[len] = 0;
		if (n == cap)
			out = realloc(out, sizeof *out * (size_t)(cap *= 2));
		out[n++] = c;
	}
	free(s);
	qsort(out, (size_t)n, sizeof *out, vl_lockclass_cmp);
	*count = n;
	return out;
}

/* Zero the statistics so a report covers the experiment only. */
static int vl_lockstat_clear(const char *path)
{
	int fd = open(path, O_WRONLY);
	if (fd < 0)
		return 0;
	int ok = write(fd, "0\n", 2) == 2;
	close(fd);
	return ok;
}

/* A "lockstat" record with the `top` most contended classes; nothing at all
 * when the kernel has no LOCK_STAT (no such file). */
static int vl_lockstat(const char *phase, const char *path, int top)
{
	char *text = vl_slurp(path);
	if (!text)
		return 0;
	int n;
	vl_lockclass *c = vl_lockstat_parse(text, &n);
	free(text);
	vl_buf b = vl_record("lockstat");
	vl_kstr(&b, "phase", phase);
	vl_kint(&b, "classes", n);
	vl_open(&b, "top", '[');
	for (int i = 0; i < n && i < top; i++) {
		vl_open(&b, NULL, '{');
		vl_kstr(&b, "class", c[i].name);
		vl_kint(&b, "con_bounces", (long long)c[i].v[0]);
		vl_kint(&b, "contentions", (long long)c[i].v[1]);
		vl_kdbl(&b, "wait_max_us", c[i].v[3]);
		vl_kdbl(&b, "wait_total_us", c[i].v[4]);
		vl_kint(&b, "acquisitions", (long long)c[i].v[7]);
		vl_kdbl(&b, "hold_total_us", c[i].v[10]);
		vl_close(&b, '}');
	}
	vl_close(&b, ']');
	vl_emit(&b);
	free(c);
	return n;
}

/* Classes whose name contains `needle` (anon_vma, ptl ...), summed: the
 * contention a seed is about even when it is not in the top N. */
static void vl_lockstat_match(vl_buf *b, const char *k, const char *path, const char **needles)
{
	char *text = vl_slurp(path);
	if (!text)
		return;
	int n;
	vl_lockclass *c = vl_lockstat_parse(text, &n);
	free(text);
	vl_open(b, k, '{');
	for (const char **nd = needles; *nd; nd++) {
		double con = 0, wait = 0;
		for (int i = 0; i < n; i++)
			if (strstr(c[i].name, *nd))
				con += c[i].v[1], wait += c[i].v[4];
		vl_open(b, *nd, '{');
		vl_kint(b, "contentions", (long long)con);
		vl_kdbl(b, "wait_total_us", wait);
		vl_close(b, '}');
	}
	vl_close(b, '}');
	free(c);
}

#define VL_LOCK_STAT "/proc/lock_stat"

/* ---- small shared helpers ---------------------------------------------- */
/* xorshift64*: the same seed gives the same numbers on every ISA */
static unsigned long long vl_rand(unsigned long long *s)
{
	unsigned long long x = *s ? *s : 0x9e3779b97f4a7c15ULL;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dULL;
}

static long vl_opt_long(const char *prog, const char *name, const char *s)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (!*s || *end || v < 0) {
		fprintf(stderr, "%s: --%s expects a non-negative integer, got '%s'\n", prog, name, s);
		exit(2);
	}
	return v;
}

static void vl_pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof set, &set);
}

#endif
