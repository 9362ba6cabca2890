/* vmlab guest library: the memory probes' loops (bwprobe, tierprobe): one
 * core's read of a buffer, a dependent chase, and every CPU of one node
 * reading a buffer on a node at once. */
#include "vmlab.h"
#include <pthread.h>
#include <sys/mman.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

static volatile uint64_t sink;

void vl_stream_read(const char *b, size_t n)
{
#if defined(__x86_64__)
	__m128i s0 = _mm_setzero_si128(), s1 = s0, s2 = s0, s3 = s0;
	for (size_t i = 0; i < n; i += 64) {
		s0 = _mm_add_epi64(s0, _mm_load_si128((const __m128i *)(b + i)));
		s1 = _mm_add_epi64(s1, _mm_load_si128((const __m128i *)(b + i + 16)));
		s2 = _mm_add_epi64(s2, _mm_load_si128((const __m128i *)(b + i + 32)));
		s3 = _mm_add_epi64(s3, _mm_load_si128((const __m128i *)(b + i + 48)));
	}
	s0 = _mm_add_epi64(_mm_add_epi64(s0, s1), _mm_add_epi64(s2, s3));
	sink = (uint64_t)_mm_cvtsi128_si64(s0);
#else
	uint64_t s = 0;
	for (size_t i = 0; i < n; i += 64)
		for (int k = 0; k < 8; k++)
			s += ((const uint64_t *)(b + i))[k];
	sink = s;
#endif
}

void *vl_chase(void **p, long n)
{
	for (long i = 0; i < n; i++)
		p = *p;
	return p;
}

/* One reader of vl_node_read: warm (TLB, every vCPU in the loop), wait for
 * all, then the timed read on the guest's clock. */
struct slice { char *b; size_t n; int cpu; double t0, t1; };
static volatile int arrived, nthreads;

static void *reader(void *arg)
{
	struct slice *s = arg;
	vl_pin(s->cpu);
	vl_stream_read(s->b, s->n);
	__atomic_add_fetch(&arrived, 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&arrived, __ATOMIC_SEQ_CST) < nthreads) {
#if defined(__x86_64__)
		__builtin_ia32_pause();
#endif
	}
	s->t0 = vl_now_ms(CLOCK_MONOTONIC);
	vl_stream_read(s->b, s->n);
	s->t1 = vl_now_ms(CLOCK_MONOTONIC);
	return NULL;
}

int vl_node_read(int from, int node, int cpu, size_t size, struct vl_node_read *out)
{
	int cpus[256], nc = vl_node_cpus(from, cpus, 256);
	if (nc == 0)
		cpus[nc++] = cpu;
	char *buf = vl_node_alloc(size, node);
	if (!buf)
		return -1;
	struct slice sl[256];
	pthread_t th[256];
	size_t per = (size / (size_t)nc) & ~(size_t)4095;
	arrived = 0;
	nthreads = nc;
	for (int i = 0; i < nc; i++) {
		sl[i] = (struct slice){buf + (size_t)i * per, per, cpus[i], 0, 0};
		pthread_create(&th[i], NULL, reader, &sl[i]);
	}
	double first = 0, last = 0, worst = 0;
	for (int i = 0; i < nc; i++) {
		pthread_join(th[i], NULL);
		if (i == 0 || sl[i].t0 < first)
			first = sl[i].t0;
		if (sl[i].t1 > last)
			last = sl[i].t1;
		if (sl[i].t1 - sl[i].t0 > worst)
			worst = sl[i].t1 - sl[i].t0;
	}
	*out = (struct vl_node_read){nc, (double)per * nc, last - first, worst,
				     (double)per * nc / ((last - first) * 1e6), vl_on_node(buf, size, node)};
	munmap(buf, size);
	vl_pin(cpu);
	return 0;
}
