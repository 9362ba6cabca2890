/* vmlab guest library: small helpers every reproducer needs. */
#include "vmlab.h"

long vl_opt_long(const char *prog, const char *name, const char *s)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (!*s || *end || v < 0) {
		fprintf(stderr, "%s: --%s expects a non-negative integer, got '%s'\n", prog, name, s);
		exit(2);
	}
	return v;
}

void vl_pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof set, &set);
}
