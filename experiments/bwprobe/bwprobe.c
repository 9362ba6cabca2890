/*
 * bwprobe: what one core's memory accesses cost, by the guest's own clock.
 *
 * For the probing CPU's own node and for its farthest node (the guest's
 * SLIT), a buffer bound to that node (mbind), far larger than the caches,
 * is walked in each access pattern the seeds' workloads are made of:
 *   read       sequential 16-byte SSE2 loads (a STREAM-like read; plain
 *              64-bit loads off x86)
 *   write      sequential 16-byte stores (write-allocate: each line is read
 *              for ownership first)
 *   memset     libc memset over the buffer
 *   copy       libc memcpy of half the buffer onto the other half
 *   stride     one 8-byte load per 256 bytes (every 4th line)
 *   chase      a dependent pointer chase over a random cyclic permutation
 *              of the lines (each address is the value the last load
 *              returned): latency, one miss at a time
 *   random     the same lines in the same order, addresses from a
 *              precomputed index array: independent misses that can overlap
 *   stos4k     `rep stosq` over 4 KiB at a time (clear_page_rep's
 *              instruction), and stosb4k `rep stosb` (clear_page_erms's)
 * and, with --node-threads, every CPU of the probing node reads its own part
 * of a local buffer at once (the node's bandwidth, not one core's).
 * Each figure is one "bw" record (GB/s and ns per access) and a metric.
 */
#include "vmlab.h"
#include <getopt.h>
#include <sched.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t xorshift(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static volatile uint64_t sink;

static void do_write(char *b, size_t n)
{
#if defined(__x86_64__)
	__m128i v = _mm_set1_epi64x(0x5a5a5a5a5a5a5a5all);
	for (size_t i = 0; i < n; i += 64) {
		_mm_store_si128((__m128i *)(b + i), v);
		_mm_store_si128((__m128i *)(b + i + 16), v);
		_mm_store_si128((__m128i *)(b + i + 32), v);
		_mm_store_si128((__m128i *)(b + i + 48), v);
	}
#else
	for (size_t i = 0; i < n; i += 8)
		*(volatile uint64_t *)(b + i) = 0x5a5a5a5a5a5a5a5aull;
#endif
}

static void do_stride(const char *b, size_t n)
{
	uint64_t s = 0;
	for (size_t i = 0; i < n; i += 256)
		s += *(const volatile uint64_t *)(b + i);
	sink = s;
}

/* The second word of each line: the first holds the chase's pointer to the
 * next line in this same order, and a load that returns the next address
 * would be a chase again (to the model too, which sees dependence by value). */
static void do_random(const char *b, const uint32_t *idx, long n)
{
	uint64_t s = 0;
	for (long i = 0; i < n; i++)
		s += *(const volatile uint64_t *)(b + (size_t)idx[i] * 64 + 8);
	sink = s;
}

static void do_stos(char *b, size_t n, int bytes)
{
#if defined(__x86_64__)
	for (size_t i = 0; i < n; i += 4096) {
		void *d = b + i;
		unsigned long c = bytes ? 4096 : 512;
		if (bytes)
			__asm__ __volatile__("rep stosb" : "+D"(d), "+c"(c) : "a"(0) : "memory");
		else
			__asm__ __volatile__("rep stosq" : "+D"(d), "+c"(c) : "a"(0) : "memory");
	}
#else
	(void)bytes;
	memset(b, 0, n);
#endif
}

static void emit(const char *test, int node, int distance, int cpu, double bytes, long accesses, double ms)
{
	vl_buf b = vl_record("bw");
	vl_kstr(&b, "test", test);
	vl_kint(&b, "cpu", cpu);
	vl_kint(&b, "node", node);
	vl_kint(&b, "distance", distance);
	vl_kdbl(&b, "bytes", bytes);
	vl_kint(&b, "accesses", accesses);
	vl_kdbl(&b, "guest_ms", ms);
	vl_kdbl(&b, "gbps", ms > 0 ? bytes / (ms * 1e6) : 0);
	vl_kdbl(&b, "ns_per_access", accesses ? ms * 1e6 / accesses : 0);
	vl_emit(&b);
	char name[64];
	snprintf(name, sizeof name, "%s_%s", test, distance == 10 ? "local" : "remote");
	if (!strcmp(test, "chase") || !strcmp(test, "random"))
		vl_metric(strcat(name, "_ns"), ms * 1e6 / accesses, "ns");
	else
		vl_metric(strcat(name, "_gbps"), bytes / (ms * 1e6), "GB/s");
}

#define T0() double t0 = vl_now_ms(CLOCK_MONOTONIC)
#define MS() (vl_now_ms(CLOCK_MONOTONIC) - t0)

static void probe_node(int node, int distance, int cpu, size_t size)
{
	char *buf = vl_node_alloc(size, node);
	if (!buf) {
		perror("bwprobe: mmap");
		exit(1);
	}
	size_t lines = size / 64;
	{ T0(); vl_stream_read(buf, size); emit("read", node, distance, cpu, (double)size, (long)lines * 4, MS()); }
	{ T0(); do_write(buf, size); emit("write", node, distance, cpu, (double)size, (long)lines * 4, MS()); }
	{ T0(); memset(buf, 7, size); emit("memset", node, distance, cpu, (double)size, 0, MS()); }
	{ T0(); memcpy(buf, buf + size / 2, size / 2); emit("copy", node, distance, cpu, (double)size / 2, 0, MS()); }
	{ T0(); do_stride(buf, size); emit("stride", node, distance, cpu, (double)size / 4, (long)(size / 256), MS()); }
	{ T0(); do_stos(buf, size, 0); emit("stos4k", node, distance, cpu, (double)size, 0, MS()); }
	{ T0(); do_stos(buf, size, 1); emit("stosb4k", node, distance, cpu, (double)size, 0, MS()); }
	/* one random cycle through every line: the chase follows it, the random loads read it from an index array */
	uint32_t *order = malloc(lines * sizeof *order);
	for (size_t i = 0; i < lines; i++)
		order[i] = (uint32_t)i;
	for (size_t i = lines - 1; i > 0; i--) { /* Sattolo: one cycle */
		size_t j = xorshift() % i;
		uint32_t t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	for (size_t i = 0; i < lines; i++)
		*(void **)(buf + (size_t)order[i] * 64) = buf + (size_t)order[(i + 1) % lines] * 64;
	long n = (long)lines;
	{
		T0();
		void *end = vl_chase((void **)(buf + (size_t)order[0] * 64), n);
		double ms = MS();
		sink = (uint64_t)(uintptr_t)end;
		emit("chase", node, distance, cpu, (double)n * 64, n, ms);
	}
	{ T0(); do_random(buf, order, n); emit("random", node, distance, cpu, (double)n * 64, n, MS()); }
	free(order);
	munmap(buf, size);
}

/* --node-threads: every CPU of the node reads its own slice of one local
 * buffer at once. They meet at a spinning barrier (a sleeping one would halt
 * the waiters' vCPUs, and a halted vCPU can wake late), and the bandwidth is
 * all their bytes over the span from the first start to the last end, on the
 * guests' clocks (kept within a quantum of each other): CPUs that did not
 * overlap show as such, not as the sum of their rates. */
static void node_threads(int node, int cpu, size_t size)
{
	struct vl_node_read r;
	if (vl_node_read(node, node, cpu, size, &r))
		return;
	vl_buf b = vl_record("bw_node");
	vl_kint(&b, "node", node);
	vl_kint(&b, "cpus", r.cpus);
	vl_kdbl(&b, "bytes", r.bytes);
	vl_kdbl(&b, "guest_ms", r.guest_ms);
	vl_kdbl(&b, "slowest_ms", r.slowest_ms);
	vl_kdbl(&b, "gbps", r.gbps);
	vl_emit(&b);
	vl_metric("node_read_gbps", r.gbps, "GB/s");
}

int main(int argc, char **argv)
{
	long cpu = 0, buf_mib = 16, node_threads_on = 1;
	static struct option lo[] = {
		{"cpu", 1, 0, 'c'}, {"buf-mib", 1, 0, 'b'}, {"node-threads", 1, 0, 'n'}, {0, 0, 0, 0},
	};
	int o;
	while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (o) {
		case 'c': cpu = vl_opt_long("bwprobe", "cpu", optarg); break;
		case 'b': buf_mib = vl_opt_long("bwprobe", "buf-mib", optarg); break;
		case 'n': node_threads_on = vl_opt_long("bwprobe", "node-threads", optarg); break;
		default: return 2;
		}
	}
	if (buf_mib < 1) {
		fprintf(stderr, "bwprobe: --buf-mib must be positive\n");
		return 2;
	}
	if (vl_pin((int)cpu)) {
		perror("bwprobe: sched_setaffinity");
		return 1;
	}
	unsigned gcpu = 0, home = 0;
	syscall(SYS_getcpu, &gcpu, &home, NULL);
	int fard, far = vl_far_node((int)home, &fard);  /* by the guest's own SLIT row */
	size_t size = (size_t)buf_mib << 20;
	probe_node((int)home, 10, (int)gcpu, size);
	if (far != (int)home)
		probe_node(far, fard, (int)gcpu, size);
	if (node_threads_on)
		node_threads((int)home, (int)gcpu, size);
	vl_buf b = vl_record("bwprobe_done");
	vl_kint(&b, "far_node", far);
	vl_emit(&b);
	return 0;
}
