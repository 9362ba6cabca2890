/*
 * profprobe: two functions of known relative cost for the profile on the
 * guest clock (timing/plugin_prof.c). light() runs a dependent chain of
 * `iters` additions, heavy() the same chain three times over; both are
 * called in turn `rounds` times on one CPU, so the profile must show
 * heavy with about three times light's instructions and time, each under
 * its own name (their text is in the program's symbol table, kept beside
 * the initramfs by the build).
 */
#define _GNU_SOURCE
#include "vmlab.h"
#include <getopt.h>
#include <sched.h>

/* noinline and a volatile sink: the compiler keeps each function and each
 * chain; the empty asm hides x from the optimiser (one add per step, any ISA) */
static volatile unsigned long sink;

static inline unsigned long chain_step(unsigned long x)
{
	__asm__ volatile("" : "+r"(x));
	return x + 1;
}

__attribute__((noinline)) static unsigned long light(unsigned long x, long iters)
{
	for (long i = 0; i < iters; i++)
		x = chain_step(x);
	return x;
}

__attribute__((noinline)) static unsigned long heavy(unsigned long x, long iters)
{
	for (long i = 0; i < 3 * iters; i++)
		x = chain_step(x);
	return x;
}

int main(int argc, char **argv)
{
	long iters = 500000, rounds = 100;
	int cpu = 0;
	static const struct option opts[] = {{"cpu", 1, 0, 'c'}, {"iters", 1, 0, 'i'}, {"rounds", 1, 0, 'r'}, {0, 0, 0, 0}};
	for (int o; (o = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
		if (o == 'c')
			cpu = atoi(optarg);
		else if (o == 'i')
			iters = atol(optarg);
		else if (o == 'r')
			rounds = atol(optarg);
		else
			return 2;
	}
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof set, &set);
	double t0 = vl_now_ms(CLOCK_MONOTONIC);
	unsigned long x = 0;
	for (long r = 0; r < rounds; r++) {
		x = light(x, iters);
		x = heavy(x, iters);
	}
	sink = x;
	vl_buf b = vl_record("profprobe");
	vl_kint(&b, "cpu", cpu);
	vl_kint(&b, "iters", iters);
	vl_kint(&b, "rounds", rounds);
	vl_kint(&b, "sum", (long long)x);
	vl_kdbl(&b, "elapsed_ms", vl_now_ms(CLOCK_MONOTONIC) - t0);
	vl_emit(&b);
	return x == (unsigned long)(4 * iters * rounds) ? 0 : 1;
}
