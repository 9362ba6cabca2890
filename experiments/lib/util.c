/* vmlab guest library: small helpers every reproducer needs. */
#include "vmlab.h"
#include <sys/mman.h>
#include <sys/syscall.h>

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

int vl_pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof set, &set);
}

#define VL_MPOL_BIND 2

void *vl_node_alloc(size_t size, int node)
{
	char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	unsigned long mask[4] = {0};
	mask[node / 64] = 1ul << (node % 64);
	if (vl_numa() && syscall(SYS_mbind, p, size, VL_MPOL_BIND, mask, 256ul, 0ul))
		perror("vl_node_alloc: mbind");
	memset(p, 1, size);
	return p;
}

double vl_on_node(char *p, size_t size, int node)
{
	enum { N = 64 };
	void *pages[N];
	int status[N], hit = 0;
	if (!vl_numa())
		return 1.0;  /* one node: every page is on it */
	for (int i = 0; i < N; i++)
		pages[i] = p + (size / N) * i;
	if (syscall(SYS_move_pages, 0, N, pages, NULL, status, 0))
		return -1;
	for (int i = 0; i < N; i++)
		hit += status[i] == node;
	return (double)hit / N;
}

int vl_slit_row(int node, int *out, int max)
{
	char path[96];
	snprintf(path, sizeof path, "/sys/devices/system/node/node%d/distance", node);
	char *row = vl_slurp(path);
	int n = 0;
	for (char *q = row; q && *q && n < max;) {
		char *e;
		long v = strtol(q, &e, 10);
		if (e == q)
			break;
		out[n++] = (int)v;
		q = e;
	}
	free(row);
	return n;
}

int vl_far_node(int home, int *distance)
{
	int row[256], n = vl_slit_row(home, row, 256), far = home, fard = 10;
	for (int nd = 0; nd < n; nd++)
		if (row[nd] > fard)
			far = nd, fard = row[nd];
	*distance = fard;
	return far;
}

int vl_node_cpus(int node, int *out, int max)
{
	char path[96];
	char *s = vl_slurp(vl_node_file(path, sizeof path, node, "cpulist"));
	int n = 0;
	for (char *q = s; q && *q && n < max;) { /* "a-b,c,..." */
		char *e;
		long a = strtol(q, &e, 10), b = a;
		if (e == q)
			break;
		q = e;
		if (*q == '-')
			b = strtol(q + 1, &q, 10);
		for (long c = a; c <= b && n < max; c++)
			out[n++] = (int)c;
		if (*q != ',')
			break;
		q++;
	}
	free(s);
	return n;
}
