/*
 * tlbprobe: what address translation costs, by the guest's own clock.
 *
 * reach   A dependent chase that touches one line in every 4 KiB of a
 *         working set, in a random cyclic order, over working sets from
 *         --min-mib to --max-mib (doubling), once on 4 KiB pages
 *         (MADV_NOHUGEPAGE) and once on 2 MiB pages (MADV_HUGEPAGE on a
 *         2 MiB-aligned buffer). Both touch the same lines in the same order,
 *         so the caches see the same thing; what differs is how many pages
 *         the TLBs must cover. The line within each 4 KiB moves with the
 *         page number, so the lines spread evenly over the cache sets. Records "tlb":
 *         ns per load, and the share of the buffer the kernel really backed
 *         with huge pages (AnonHugePages of /proc/self/smaps).
 * ptnode  Random independent 8-byte updates (GUPS-like) over --gups-mib on
 *         4 KiB pages, data bound to the probing CPU's node (mbind, the
 *         VMA's policy), page tables on a chosen node: Linux allocates
 *         user page-table pages under the task's memory policy
 *         (pte_alloc_one -> alloc_pages -> the task policy), so a
 *         set_mempolicy(MPOL_BIND, node) before the first touch puts them
 *         there while mbind keeps the data local. Run with the page tables
 *         on the local node, then on the farthest; records "ptnode".
 */
#include "vmlab.h"
#include <getopt.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#define HUGE (2ul << 20)
#define MPOL_BIND_ 2 /* <numaif.h>'s MPOL_BIND, without libnuma */

static unsigned long long rng = 0x9e3779b97f4a7c15ull;  /* vl_rand's state */

static volatile uint64_t sink;

/* size bytes, 2 MiB-aligned, huge pages asked for or refused; not touched */
static char *map_buf(size_t size, int huge)
{
	char *p = mmap(NULL, size + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	char *a = (char *)(((uintptr_t)p + HUGE - 1) & ~(HUGE - 1));
	/* the slack before and after the aligned part goes back at once */
	if (a > p)
		munmap(p, (size_t)(a - p));
	if (p + size + HUGE > a + size)
		munmap(a + size, (size_t)(p + size + HUGE - (a + size)));
	if (madvise(a, size, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE))
		perror("tlbprobe: madvise");
	return a;
}

/* kB of the mapping that starts at a backed by huge pages (/proc/self/smaps) */
static long huge_kib(const char *a)
{
	char *s = vl_slurp("/proc/self/smaps");
	char want[32];
	snprintf(want, sizeof want, "%lx-", (unsigned long)(uintptr_t)a);
	long kib = -1;
	/* the mapping was made with HUGE of slack before a: find the entry that contains a */
	for (char *q = s; q && *q;) {
		unsigned long lo, hi;
		if (sscanf(q, "%lx-%lx", &lo, &hi) == 2 && lo <= (uintptr_t)a && (uintptr_t)a < hi) {
			char *h = strstr(q, "AnonHugePages:");
			if (h)
				kib = strtol(h + 14, NULL, 10);
			break;
		}
		q = strchr(q, '\n');
		q = q ? q + 1 : NULL;
	}
	free(s);
	return kib;
}

static void *chase(void **p, long n)
{
	for (long i = 0; i < n; i++)
		p = *p;
	return p;
}

static void reach(int cpu, long mib, int huge, long loads)
{
	size_t size = (size_t)mib << 20, pages = size >> 12;
	char *buf = map_buf(size, huge);
	if (!buf) {
		perror("tlbprobe: mmap");
		exit(1);
	}
	memset(buf, 1, size); /* first touch: faults (and huge pages) outside the timed loop */
	uint32_t *order = malloc(pages * sizeof *order);
	vl_random_cycle(order, pages, &rng);
	/* the line within the page: bits 6-11 of the address from the page number's bits 4-9, so with
	 * bits 12-15 (the page's own) the lines cover a 1 MiB 16-way L2's 1024 sets evenly on contiguous
	 * (huge) pages too, instead of crowding 64 of them */
#define SLOT(pg) (buf + ((size_t)(pg) << 12) + ((((size_t)(pg) >> 4) & 63) * 64))
	for (size_t i = 0; i < pages; i++)
		*(void **)SLOT(order[i]) = SLOT(order[(i + 1) % pages]);
	void **p = (void **)SLOT(order[0]);
	p = chase(p, (long)pages); /* one lap warms caches and TLBs */
	double t0 = vl_now_ms(CLOCK_MONOTONIC);
	p = chase(p, loads);
	double ms = vl_now_ms(CLOCK_MONOTONIC) - t0;
	sink = (uint64_t)(uintptr_t)p;
	long hk = huge_kib(buf);
	vl_buf b = vl_record("tlb");
	vl_kstr(&b, "pages", huge ? "2m" : "4k");
	vl_kint(&b, "ws_mib", mib);
	vl_kint(&b, "cpu", cpu);
	vl_kint(&b, "loads", loads);
	vl_kdbl(&b, "ns_per_load", ms * 1e6 / (double)loads);
	vl_kdbl(&b, "huge_share", hk < 0 ? -1.0 : (double)hk * 1024.0 / (double)size);
	vl_emit(&b);
	char name[64];
	snprintf(name, sizeof name, "tlb_%s_%ldmib_ns", huge ? "2m" : "4k", mib);
	vl_metric(name, ms * 1e6 / (double)loads, "ns");
	free(order);
	munmap(buf, size);
}

static void set_policy(int mode, int node)
{
	unsigned long mask[4] = {0};
	if (node >= 0)
		mask[node / 64] = 1ul << (node % 64);
	if (vl_numa() && syscall(SYS_set_mempolicy, mode, node >= 0 ? mask : NULL, node >= 0 ? 256ul : 0ul))
		perror("tlbprobe: set_mempolicy");
}

static void ptnode(int cpu, int data_node, int pt_node, int distance, long mib, long updates)
{
	size_t size = (size_t)mib << 20, words = size / 8;
	char *buf = map_buf(size, 0);
	if (!buf) {
		perror("tlbprobe: mmap");
		exit(1);
	}
	unsigned long mask[4] = {0};
	mask[data_node / 64] = 1ul << (data_node % 64);
	if (vl_numa() && syscall(SYS_mbind, buf, size, MPOL_BIND_, mask, 256ul, 0ul))
		perror("tlbprobe: mbind");
	set_policy(MPOL_BIND_, pt_node); /* the page tables the first touch allocates */
	memset(buf, 1, size);
	set_policy(0, -1); /* MPOL_DEFAULT again */
	uint64_t *a = (uint64_t *)buf, x;
	unsigned long long st = 0x2545f4914f6cdd1dull;
	for (long i = 0; i < updates / 4; i++) { /* warm-up */
		x = vl_rand(&st);
		a[x % words] ^= x;
	}
	double t0 = vl_now_ms(CLOCK_MONOTONIC);
	for (long i = 0; i < updates; i++) {
		x = vl_rand(&st);
		a[x % words] ^= x;
	}
	double ms = vl_now_ms(CLOCK_MONOTONIC) - t0;
	vl_buf b = vl_record("ptnode");
	vl_kint(&b, "cpu", cpu);
	vl_kint(&b, "data_node", data_node);
	vl_kint(&b, "pt_node", pt_node);
	vl_kint(&b, "distance", distance);
	vl_kint(&b, "ws_mib", mib);
	vl_kint(&b, "updates", updates);
	vl_kdbl(&b, "ns_per_update", ms * 1e6 / (double)updates);
	vl_emit(&b);
	vl_metric(pt_node == data_node ? "ptnode_local_ns" : "ptnode_remote_ns", ms * 1e6 / (double)updates, "ns");
	munmap(buf, size);
}

int main(int argc, char **argv)
{
	long cpu = 0, min_mib = 1, max_mib = 64, loads = 100000, gups_mib = 64, updates = 200000;
	static struct option lo[] = {
		{"cpu", 1, 0, 'c'}, {"min-mib", 1, 0, 'a'}, {"max-mib", 1, 0, 'b'}, {"loads", 1, 0, 'l'},
		{"gups-mib", 1, 0, 'g'}, {"updates", 1, 0, 'u'}, {0, 0, 0, 0},
	};
	int o;
	while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (o) {
		case 'c': cpu = vl_opt_long("tlbprobe", "cpu", optarg); break;
		case 'a': min_mib = vl_opt_long("tlbprobe", "min-mib", optarg); break;
		case 'b': max_mib = vl_opt_long("tlbprobe", "max-mib", optarg); break;
		case 'l': loads = vl_opt_long("tlbprobe", "loads", optarg); break;
		case 'g': gups_mib = vl_opt_long("tlbprobe", "gups-mib", optarg); break;
		case 'u': updates = vl_opt_long("tlbprobe", "updates", optarg); break;
		default: return 2;
		}
	}
	if (min_mib < 1 || max_mib < min_mib || loads < 1 || gups_mib < 0 || updates < 1) {
		fprintf(stderr, "tlbprobe: need 1 <= --min-mib <= --max-mib, --loads and --updates >= 1\n");
		return 2;
	}
	if (vl_pin((int)cpu)) {
		perror("tlbprobe: sched_setaffinity");
		return 1;
	}
	/* huge pages only where asked for (MADV_HUGEPAGE), whatever the boot set */
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "w");
	if (f) {
		fputs("madvise", f);
		fclose(f);
	}
	unsigned gcpu = 0, home = 0;
	syscall(SYS_getcpu, &gcpu, &home, NULL);
	for (int huge = 0; huge <= 1; huge++)
		for (long mib = min_mib; mib <= max_mib; mib *= 2)
			reach((int)gcpu, mib, huge, loads);
	if (gups_mib) {
		int fard, far = vl_far_node((int)home, &fard);
		ptnode((int)gcpu, (int)home, (int)home, 10, gups_mib, updates);
		if (far != (int)home)
			ptnode((int)gcpu, (int)home, far, fard, gups_mib, updates);
	}
	vl_buf b = vl_record("tlbprobe_done");
	vl_kint(&b, "home", home);
	vl_emit(&b);
	return 0;
}
