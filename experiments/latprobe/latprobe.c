/*
 * latprobe: the guest measures the topology through the timing model.
 *
 * For every distance class seen from the probing CPU's node (the guest's own
 * SLIT), the lowest-numbered node at that distance is probed twice:
 *  - a pointer chase: a random cyclic permutation over the cache lines of a
 *    buffer bound to that node (mbind), far larger than the caches, walked
 *    lap after lap inside one timing phase. A cyclic walk over more lines
 *    than an LRU set holds misses every time, so the model's phase time per
 *    load is its memory latency for that hop count.
 *  - a lock ping-pong: two threads, on the probing CPU and on a CPU of that
 *    node, take turns incrementing a shared counter with compare-and-swap;
 *    every increment moves the counter's line between their caches.
 * The guest's own clock is functional (icount); the figures that mean
 * something are the model's phase times, which the host joins by phase id
 * and instance (= the probed node).
 */
#include "vmlab.h"
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>

static unsigned long long rng = 0x9e3779b97f4a7c15ull;  /* vl_rand's state */

static void *chase(void **p, long n)
{
	for (long i = 0; i < n; i += 8) {
		p = *p; p = *p; p = *p; p = *p;
		p = *p; p = *p; p = *p; p = *p;
	}
	return p;
}

/* The same cycle through line numbers (p = a[p], as hash tables, graphs and
 * sort permutations link their entries): each load's address is computed
 * from the last one's value in a register, not loaded as an address. */
static uint64_t index_chase(const uint64_t *a, uint64_t i, long n)
{
	for (long k = 0; k < n; k += 8) {
		i = a[i * 8]; i = a[i * 8]; i = a[i * 8]; i = a[i * 8];
		i = a[i * 8]; i = a[i * 8]; i = a[i * 8]; i = a[i * 8];
	}
	return i;
}

static volatile long *counter;
static long increments;

struct turn { int cpu, side; unsigned long instance; int ran_on, pinned; double rtt_ns; };

static void *player(void *arg)
{
	struct turn *t = arg;
	t->pinned = vl_pin(t->cpu) == 0;
	t->ran_on = sched_getcpu();
	vl_phase_begin(VL_PHASE_LATPROBE_PINGPONG, t->instance);
	double first = 0;
	for (long k = 0; k < increments; k++) {
		long want = 2 * k + t->side;
		for (;;) {
			long e = want;
			if (__atomic_compare_exchange_n(counter, &e, want + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
				break;
#if defined(__x86_64__)
			__builtin_ia32_pause();  /* also lets QEMU's round-robin run the other vCPU */
#endif
		}
		/* the guest's own round trip, timed once both players are in the
		 * loop (thread start and pinning stay out of it) */
		if (k == 1)
			first = vl_now_ms(CLOCK_MONOTONIC);
		if (k == increments - 1 && increments > 2)
			t->rtt_ns = (vl_now_ms(CLOCK_MONOTONIC) - first) * 1e6 / (double)(increments - 2);
	}
	vl_phase_end(VL_PHASE_LATPROBE_PINGPONG, t->instance);
	return NULL;
}

/*
 * What one turn of a kernel spin loop's cpu_relax() costs on this CPU, by
 * the guest's own clock: PAUSE on x86 (the topology's pause_cycles under our
 * QEMU), nothing on Alpha, whose cpu_relax() is a compiler barrier.
 */
static double pause_ns(long turns)
{
	double t0 = vl_now_ms(CLOCK_MONOTONIC);
	for (long i = 0; i < turns; i++) {
#if defined(__x86_64__) || defined(__i386__)
		__asm__ __volatile__("pause" ::: "memory");
#else
		__asm__ __volatile__("" ::: "memory");
#endif
	}
	return (vl_now_ms(CLOCK_MONOTONIC) - t0) * 1e6 / turns;
}

/*
 * Cache-to-cache (as Intel MLC --c2c_latency measures it): a writer CPU
 * modifies every line of a small buffer homed on `home` (each line then sits
 * modified in its cache), and this CPU chases through the lines once, in a
 * random order: each load takes a modified line from the writer's cache.
 */
struct c2c_arg { int cpu; char *buf; uint32_t *order; size_t lines; };

/* each line of buf points at the next in order (the chase's links) */
static void link_lines(char *buf, const uint32_t *order, size_t n)
{
	for (size_t i = 0; i < n; i++)
		*(void **)(buf + (size_t)order[i] * 64) = buf + (size_t)order[(i + 1) % n] * 64;
}

static void *c2c_writer(void *arg)
{
	struct c2c_arg *a = arg;
	vl_pin(a->cpu);
	link_lines(a->buf, a->order, a->lines);  /* every line now modified in this CPU's cache */
	return NULL;
}

static void c2c(int reader, int writer, int rnode, int wnode, int home, int distance, long kib)
{
	size_t size = (size_t)kib << 10, lines = size / 64;
	char *buf = vl_node_alloc(size, home);
	uint32_t *order = malloc(lines * sizeof *order);
	if (!buf || !order || lines < 8)
		return;
	vl_random_cycle(order, lines, &rng);
	struct c2c_arg a = {writer, buf, order, lines};
	pthread_t th;
	pthread_create(&th, NULL, c2c_writer, &a);
	pthread_join(th, NULL);
	long loads = (long)(lines & ~7ul);
	double t0 = vl_now_ms(CLOCK_MONOTONIC);
	void **p = chase((void **)(buf + (size_t)order[0] * 64), loads);
	double t1 = vl_now_ms(CLOCK_MONOTONIC);
	vl_buf b = vl_record("c2c");
	vl_kint(&b, "cpu", reader);
	vl_kint(&b, "writer", writer);
	vl_kint(&b, "node", rnode);
	vl_kint(&b, "writer_node", wnode);
	vl_kint(&b, "home", home);
	vl_kint(&b, "distance", distance);
	vl_kint(&b, "loads", loads);
	vl_kdbl(&b, "ns_per_load", (t1 - t0) * 1e6 / loads);
	vl_kint(&b, "end", (long long)(uintptr_t)p & 1);
	vl_emit(&b);
	free(order);
	munmap(buf, size);
}

static int first_cpu_of(int node, int not_cpu)
{
	int cpus[256], n = vl_numa() ? vl_node_cpus(node, cpus, 256) : 0; /* no NUMA: no partner node */
	for (int i = 0; i < n; i++)
		if (cpus[i] != not_cpu)
			return cpus[i];
	return -1;
}

int main(int argc, char **argv)
{
	long cpu = 0, buf_mib = 16, laps = 2, c2c_kib = 0;
	increments = 2000;
	static struct option lo[] = {
		{"cpu", 1, 0, 'c'}, {"buf-mib", 1, 0, 'b'}, {"laps", 1, 0, 'l'}, {"increments", 1, 0, 'i'},
		{"c2c-kib", 1, 0, 'k'}, {0, 0, 0, 0},
	};
	int o;
	while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (o) {
		case 'c': cpu = vl_opt_long("latprobe", "cpu", optarg); break;
		case 'b': buf_mib = vl_opt_long("latprobe", "buf-mib", optarg); break;
		case 'l': laps = vl_opt_long("latprobe", "laps", optarg); break;
		case 'i': increments = vl_opt_long("latprobe", "increments", optarg); break;
		case 'k': c2c_kib = vl_opt_long("latprobe", "c2c-kib", optarg); break;
		default: return 2;
		}
	}
	if (!buf_mib || !laps) {
		fprintf(stderr, "latprobe: --buf-mib and --laps must be positive\n");
		return 2;
	}
	if (vl_pin((int)cpu)) {
		perror("latprobe: sched_setaffinity");
		return 1;
	}
	unsigned gcpu = 0, home = 0;
	syscall(SYS_getcpu, &gcpu, &home, NULL);
	int nodes = vl_nodes();

	/* distance classes from our node: the guest's own SLIT row */
	char path[96];
	snprintf(path, sizeof path, "/sys/devices/system/node/node%u/distance", home);
	char *row = vl_slurp(path);
	int dist[256], nd = 0;
	for (char *q = row; q && *q && nd < 256;) {
		char *e;
		long v = strtol(q, &e, 10);
		if (e == q)
			break;
		dist[nd++] = (int)v;
		q = e;
	}
	free(row);
	if (nd == 0 && !vl_numa()) {
		/* A kernel without NUMA (Alpha) has no SLIT: its one node is local. */
		dist[0] = 10;
		nd = 1;
	}
	int target[256], nt = 0;
	for (int n = 0; n < nd && n < nodes; n++) {
		int seen = 0;
		for (int k = 0; k < nt; k++)
			seen |= dist[target[k]] == dist[n];
		if (!seen)
			target[nt++] = n;
	}

	if (nt == 0) {
		fprintf(stderr, "latprobe: no distance class to probe from node %u\n", home);
		return 1;
	}
	{
		long turns = 200000;
		vl_buf b = vl_record("pause");
		vl_kint(&b, "cpu", gcpu);
		vl_kint(&b, "turns", turns);
		vl_kdbl(&b, "ns_per_turn", pause_ns(turns));
		vl_emit(&b);
	}
	size_t size = (size_t)buf_mib << 20, lines = size / 64;
	uint32_t *order = malloc(lines * sizeof *order);
	for (int k = 0; k < nt; k++) {
		int node = target[k];
		char *buf = vl_node_alloc(size, node);
		if (!buf) {
			perror("latprobe: mmap");
			return 1;
		}
		vl_random_cycle(order, lines, &rng);
		link_lines(buf, order, lines);
		void **p = (void **)(buf + (size_t)order[0] * 64);
		p = chase(p, (long)lines);  /* warm-up lap: TLB and caches in steady state */
		long loads = laps * (long)(lines & ~7ul);
		double t0 = vl_now_ms(CLOCK_MONOTONIC);
		vl_phase_begin(VL_PHASE_LATPROBE_CHASE, (unsigned long)node);
		p = chase(p, loads);
		vl_phase_end(VL_PHASE_LATPROBE_CHASE, (unsigned long)node);
		double t1 = vl_now_ms(CLOCK_MONOTONIC);
		vl_buf b = vl_record("chase");
		vl_kint(&b, "cpu", gcpu);
		vl_kint(&b, "home", home);
		vl_kint(&b, "node", node);
		vl_kint(&b, "distance", dist[node]);
		vl_kint(&b, "loads", loads);
		vl_kint(&b, "buf_mib", buf_mib);
		vl_kdbl(&b, "on_node", vl_on_node(buf, size, node));
		vl_kdbl(&b, "guest_ms", t1 - t0);
		vl_kint(&b, "end", (long long)(uintptr_t)p & 1);  /* keeps the walk live */
		vl_emit(&b);
		char name[64];
		snprintf(name, sizeof name, "chase_d%d_ns", dist[node]);
		vl_metric(name, (t1 - t0) * 1e6 / loads, "ns");

		/* the same lines in the same order, linked by index (timed on the guest clock only) */
		for (size_t j = 0; j < lines; j++)
			*(uint64_t *)(buf + (size_t)order[j] * 64) = order[(j + 1) % lines];
		uint64_t i = index_chase((const uint64_t *)buf, order[0], (long)lines);  /* warm-up lap */
		t0 = vl_now_ms(CLOCK_MONOTONIC);
		i = index_chase((const uint64_t *)buf, i, loads);
		t1 = vl_now_ms(CLOCK_MONOTONIC);
		b = vl_record("ichase");
		vl_kint(&b, "cpu", gcpu);
		vl_kint(&b, "home", home);
		vl_kint(&b, "node", node);
		vl_kint(&b, "loads", loads);
		vl_kdbl(&b, "guest_ms", t1 - t0);
		vl_kint(&b, "end", (long long)(i & 1));
		vl_emit(&b);
		snprintf(name, sizeof name, "ichase_d%d_ns", dist[node]);
		vl_metric(name, (t1 - t0) * 1e6 / loads, "ns");
		munmap(buf, size);

		/* ping-pong with a CPU of that node (another CPU of ours for the local class) */
		int partner = first_cpu_of(node, (int)gcpu);
		if (partner >= 0 && c2c_kib > 0) {  /* the line homed at the writer, then (if apart) at the reader */
			c2c((int)gcpu, partner, (int)home, node, node, dist[node], c2c_kib);
			if (node != (int)home)
				c2c((int)gcpu, partner, (int)home, node, (int)home, dist[node], c2c_kib);
		}
		if (partner < 0 || increments == 0)
			continue;
		long *line = vl_node_alloc(4096, (int)home);
		counter = line;
		*counter = 0;
		struct turn a = {(int)gcpu, 0, (unsigned long)node, -1, 0, 0}, c = {partner, 1, (unsigned long)node, -1, 0, 0};
		pthread_t th;
		t0 = vl_now_ms(CLOCK_MONOTONIC);
		pthread_create(&th, NULL, player, &c);
		player(&a);
		pthread_join(th, NULL);
		t1 = vl_now_ms(CLOCK_MONOTONIC);
		vl_pin((int)gcpu);
		b = vl_record("pingpong");
		vl_kint(&b, "cpu", gcpu);
		vl_kint(&b, "partner", partner);
		vl_kint(&b, "partner_ran_on", c.ran_on);
		vl_kint(&b, "partner_pinned", c.pinned);
		vl_kint(&b, "home", home);
		vl_kint(&b, "node", node);
		vl_kint(&b, "distance", dist[node]);
		vl_kint(&b, "increments", 2 * increments);
		vl_kint(&b, "final", *counter);
		vl_kdbl(&b, "guest_ms", t1 - t0);
		vl_kdbl(&b, "rtt_ns", a.rtt_ns);
		vl_emit(&b);
		munmap(line, 4096);
	}
	vl_buf b = vl_record("latprobe_done");
	vl_kint(&b, "classes", nt);
	vl_emit(&b);
	return 0;
}
