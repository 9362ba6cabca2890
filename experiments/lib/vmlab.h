/*
 * Guest side of vmlab's record protocol: one "@@VMLAB {json}" line per
 * record on the console, written with a single write() so that a record is
 * never split by another writer.
 *
 * The functions live in libvmlab.a, built once per guest arch from the .c
 * files beside this header (build/SConstruct); every guest program
 * is linked against it. Only what runs inside the figures a program times
 * (the clock, the phase markers, the random numbers) is inline here, so
 * that a measured loop costs what it did as one file.
 *
 *   json.c      the JSON line writer (vl_buf, vl_record, vl_emit)
 *   proc.c      /proc and /sys readers: nodes, meminfo, vmstat counters
 *   records.c   snapshots, metrics, sanity checks, reclaim deltas
 *   kswapd.c    kswapd CPU time, and the sampler process
 *   lockstat.c  /proc/lock_stat (kernels with CONFIG_LOCK_STAT)
 *   util.c      option parsing, CPU pinning
 *
 * Snapshots read what Linux itself reports (/proc/vmstat, per-node meminfo
 * and numastat, kswapd thread times) so every figure is the kernel's own.
 */
#ifndef VMLAB_H
#define VMLAB_H

#define _GNU_SOURCE
/* The libc headers the reproducers use, once here. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sched.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vmlab_facts.h"

/* ---- a growing JSON line (json.c) ---------------------------------------- */
typedef struct {
	char *s;
	size_t len, cap;
	int need_comma; /* a value was written at this nesting level */
} vl_buf;

void vl_raw(vl_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void vl_sep(vl_buf *b);
void vl_str(vl_buf *b, const char *v);
void vl_key(vl_buf *b, const char *k);
void vl_kint(vl_buf *b, const char *k, long long v);
void vl_kdbl(vl_buf *b, const char *k, double v);
void vl_kstr(vl_buf *b, const char *k, const char *v);
void vl_open(vl_buf *b, const char *k, char br); /* k NULL: array element */
void vl_close(vl_buf *b, char br);
vl_buf vl_record(const char *type);  /* a new record: VMLAB_TAG {"type":type */
void vl_emit(vl_buf *b);             /* closes it, writes it in one write(), frees it */

/* ---- clocks and phase markers (inline: they run inside measured code) ----- */
/* Phase markers for the timing model (timing/plugin.c): the model reports
 * modeled time, misses and lock transfers per phase and CPU. On x86 the
 * marker is `xchg %bx,%bx`, a no-op, with rax = 'VML' << 8 | op, rdi = phase
 * id, rsi = instance; the plugin reads the registers there. Elsewhere (and
 * with the model off) it costs nothing and means nothing. Ids:
 * VMLAB_PHASES (vmlab_facts.h). */
enum {
#define X(id, sym, name) VL_PHASE_##sym = id,
	VMLAB_PHASES(X)
#undef X
};

static inline void vl_phase_mark(unsigned op, unsigned long id, unsigned long instance)
{
#if defined(__x86_64__)
	__asm__ volatile("xchg %%bx, %%bx" : : "a"(((unsigned long)VMLAB_PHASE_MAGIC << 8) | op), "D"(id), "S"(instance)
			 : "memory");
#else
	(void)op; (void)id; (void)instance;
#endif
}
static inline void vl_phase_begin(unsigned long id, unsigned long instance) { vl_phase_mark(1, id, instance); }
/* the experiment begins: a booted run's model starts pricing here (timing/plugin.c) */
static inline void vl_price_from_here(void) { vl_phase_mark(VMLAB_OP_PRICE, 0, 0); }
static inline void vl_phase_end(unsigned long id, unsigned long instance) { vl_phase_mark(2, id, instance); }

static inline double vl_now_ms(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* xorshift64*: the same seed gives the same numbers on every ISA */
static inline unsigned long long vl_rand(unsigned long long *s)
{
	unsigned long long x = *s ? *s : 0x9e3779b97f4a7c15ULL;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dULL;
}

/* Sattolo's shuffle: order becomes 0..n-1 arranged as one random cycle (a
 * pointer chase through it visits every element before it repeats) */
static inline void vl_random_cycle(uint32_t *order, size_t n, unsigned long long *s)
{
	for (size_t i = 0; i < n; i++)
		order[i] = (uint32_t)i;
	for (size_t i = n - 1; i > 0; i--) {
		size_t j = vl_rand(s) % i;
		uint32_t t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
}

/* ---- /proc and /sys readers (proc.c) -------------------------------------- */
char *vl_slurp(const char *path); /* the whole file, NUL-ended (caller frees); NULL path or no file: NULL */
/* A kernel without NUMA (Alpha: removed in 5.14) has no
 * /sys/devices/system/node; it is one node, node 0, whose figures are the
 * machine's own, as Linux itself treats it (node_distance() = 10). */
int vl_numa(void);
int vl_nodes(void); /* number of possible NUMA nodes that exist */
/* Path of a node's sysfs file (in p); on a kernel without NUMA the
 * machine-wide file that holds the same figures, or NULL where there is none. */
const char *vl_node_file(char *p, size_t sz, int node, const char *file);
long long vl_node_meminfo(const char *s, const char *field); /* "Node 0 MemFree:   1234 kB" in s; -1: none */
long long vl_meminfo(const char *field);                     /* /proc/meminfo, kB; -1: none */
long long vl_vmstat_get(const char *name);                   /* one /proc/vmstat counter; -1: none */
/* The machine's CPU time from /proc/stat's first line, in clock ticks:
 * t[0..7) = user, nice, system, idle, iowait, irq, softirq (zeros if unread) */
void vl_cpu_ticks(long long t[7]);
/* Busy ticks of t (all but idle and iowait) */
static inline long long vl_busy_ticks(const long long t[7])
{
	return t[0] + t[1] + t[2] + t[5] + t[6];
}
void vl_vmstat_many(const char **names, long long *out);     /* names NULL-ended, out[i] = value or -1 */

/* ---- records every run reports (records.c) -------------------------------- */
/* The snapshot records (vmstat, nodemem, nodestat, kswapd, swap) of a phase. */
void vl_snapshot(const char *phase);
void vl_nodemem(vl_buf *b, int nodes);  /* "nodes": per-node meminfo */
void vl_nodefree(vl_buf *b, int nodes); /* "free_kib": MemFree per node, the cheap sample */

/* What reclaim did, the same counters every reproducer reports per phase
 * (VMLAB_RECLAIM_COUNTERS); NULL-ended. */
extern const char *VL_RECLAIM[];
#define VL_RECLAIM_ONE_(n) +1
#define VL_NRECLAIM (0 VMLAB_RECLAIM_COUNTERS(VL_RECLAIM_ONE_))
/* delta[i] = now - before[i] as JSON members under `k` */
void vl_reclaim_delta(vl_buf *b, const char *k, const long long *before, const long long *now);

/* A key figure under a stable name; the host stores it in `metrics` so
 * runs on different kernels compare by name. */
void vl_metric(const char *name, double value, const char *unit);

/* The reproducer's own verdict: did it run, did it create the pressure it
 * exists for. One record with every check; end returns 1 when all passed. */
typedef struct {
	vl_buf b;
	int ok;
} vl_sanity;
vl_sanity vl_sanity_begin(const char *experiment);
void vl_sanity_check(vl_sanity *s, const char *name, int pass, double value, const char *expect);
int vl_sanity_end(vl_sanity *s);

/* ---- kswapd (kswapd.c) ---------------------------------------------------- */
/* Calls fn(node, ticks, arg) for every kswapd thread; ticks = utime + stime
 * from /proc/PID/stat, in clock ticks. */
void vl_each_kswapd(void (*fn)(int node, long long ticks, void *arg), void *arg);
void vl_kswapd(vl_buf *b); /* "clk_tck" and "kswapd": CPU time per node, in clock ticks */
/* kswapd CPU ticks summed over every node's kswapd; per node into
 * per_node[0..max) when given. */
long long vl_kswapd_ticks(long long *per_node, int max);
/* A child process that reports every kswapd's CPU ticks each interval_ms of
 * guest time ("kswapd_sample" records), so the host sees kswapd's CPU share
 * over the run, not only its total. Ends with its parent (vl_sampler_stop). */
pid_t vl_kswapd_sampler(long interval_ms);
void vl_sampler_stop(pid_t pid);

/* ---- /proc/lock_stat (lockstat.c; kernels with CONFIG_LOCK_STAT) ---------- */
#define VL_LOCK_STAT "/proc/lock_stat"
typedef struct {
	char name[96];
	double v[12]; /* con-bounces contentions wait-min wait-max wait-total wait-avg
	                 acq-bounces acquisitions hold-min hold-max hold-total hold-avg */
} vl_lockclass;
/* The classes in text, most contended first (caller frees). */
vl_lockclass *vl_lockstat_parse(const char *text, int *count);
int vl_lockstat_clear(const char *path); /* zero the statistics; 1 if done */
/* A "lockstat" record with the `top` most contended classes; nothing at all
 * when the kernel has no LOCK_STAT (no such file). Returns the class count. */
int vl_lockstat(const char *phase, const char *path, int top);
/* Classes whose name contains a needle (anon_vma, ptl ...), summed, as JSON
 * members under `k`: the contention a seed is about even when it is not in
 * the top N. */
void vl_lockstat_match(vl_buf *b, const char *k, const char *path, const char **needles);

/* ---- small shared helpers (util.c) ----------------------------------------- */
/* --name's value as a non-negative integer, or a message and exit(2) */
long vl_opt_long(const char *prog, const char *name, const char *s);
int vl_pin(int cpu);  /* 0, or -1 with errno (sched_setaffinity) */
/* size bytes of anonymous memory bound to node (mbind; one node: plain),
 * every page faulted in with memset, outside anyone's timed loop; NULL on
 * failure. */
void *vl_node_alloc(size_t size, int node);
/* The share of 64 pages sampled across p..p+size that are on node
 * (move_pages, query mode); 1 on a machine of one node, -1 if it cannot tell. */
double vl_on_node(char *p, size_t size, int node);
/* The CPUs of node (its sysfs cpulist, "a-b,c"), at most max into out;
 * returns how many. */
int vl_node_cpus(int node, int *out, int max);
/* ---- the memory probes' loops (stream.c) ----------------------------------- */
/* Read n bytes of b (a multiple of 64, 16-byte aligned) with 16-byte loads. */
void vl_stream_read(const char *b, size_t n);
/* n dependent loads: p = *p. */
void *vl_chase(void **p, long n);
/* Every CPU of node `from` (cpu alone if it has none) reads its share of
 * size bytes bound to `node`, at once: pinned threads, warmed, released
 * together, timed on the guest's clock; span = first start to last end, so
 * CPUs that did not overlap show as such. The caller is pinned back to cpu.
 * -1 if the buffer could not be had. */
struct vl_node_read {
	int cpus;
	double bytes, guest_ms, slowest_ms, gbps, on_node;
};
int vl_node_read(int from, int node, int cpu, size_t size, struct vl_node_read *out);

/* The node's SLIT row as the guest reads it (its sysfs distance file), at
 * most max entries into out; returns how many (0: no such file). */
int vl_slit_row(int node, int *out, int max);
/* The node farthest from `home` by the guest's own SLIT row (the lowest
 * numbered of the farthest); *distance its SLIT value. home itself (10) if
 * there is no other node. */
int vl_far_node(int home, int *distance);

#endif
