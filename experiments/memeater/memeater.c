/*
 * memeater: seed 004's vmbug4.c ("memeater") with vmlab records.
 * Allocate N chunks, then for C cycles memset every chunk, timing each
 * memset on the guest clock, as the GS1280 report did with N x 1 GB. After
 * each chunk it also reports where the chunk's pages live (move_pages in
 * query mode on a sample of pages) and every node's MemFree, so a run shows
 * memory filling node after node and when swapping starts.
 */
#include "vmlab.h"
#include <getopt.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#define MPOL_DEFAULT_ 0
#define MPOL_INTERLEAVE_ 3

/* Write mib MiB to dir/cache with the task's policy interleaved over every
 * node (the UBC's file pages on every RAD, not only the writer's), flush
 * it so the pages are clean cache, then report where memory stands. */
static int fill_cache(const char *dir, long mib, int nodes)
{
	char path[512];
	snprintf(path, sizeof path, "%s/cache", dir);
	unsigned long mask[4] = {0};
	for (int n = 0; n < nodes && n < 256; n++)
		mask[n / 64] |= 1ul << (n % 64);
#ifdef SYS_set_mempolicy
	if (vl_numa() && syscall(SYS_set_mempolicy, MPOL_INTERLEAVE_, mask, 256ul))
		perror("memeater: set_mempolicy");
#endif
	double t0 = vl_now_ms(CLOCK_MONOTONIC);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	char *blk = malloc(1 << 20);
	if (fd < 0 || !blk) {
		perror("memeater: cache file");
		return -1;
	}
	memset(blk, 0x5a, 1 << 20);
	for (long i = 0; i < mib; i++)
		if (write(fd, blk, 1 << 20) != 1 << 20) {
			perror("memeater: write of the cache file");
			return -1;
		}
	fsync(fd);
	close(fd);
	free(blk);
#ifdef SYS_set_mempolicy
	if (vl_numa())
		syscall(SYS_set_mempolicy, MPOL_DEFAULT_, NULL, 0ul);
#endif
	vl_buf b = vl_record("memeater_cache");
	vl_kint(&b, "cache_mib", mib);
	vl_kdbl(&b, "write_ms", vl_now_ms(CLOCK_MONOTONIC) - t0);
	vl_kint(&b, "file_kib", vl_meminfo("Cached"));
	vl_nodefree(&b, nodes);
	vl_emit(&b);
	return 0;
}

int main(int argc, char **argv)
{
	long chunk_mib = 16, chunks = 4, cycles = 2, cpu = -1, sample = 16, cache_mib = 0;
	const char *dir = "/data";
	static struct option lo[] = {
		{"chunk-mib", 1, 0, 'm'}, {"chunks", 1, 0, 'n'}, {"cycles", 1, 0, 'c'},
		{"cpu", 1, 0, 'p'}, {"sample-pages", 1, 0, 's'}, {"cache-mib", 1, 0, 'f'},
		{"dir", 1, 0, 'd'}, {0, 0, 0, 0},
	};
	int o;
	while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (o) {
		case 'm': chunk_mib = vl_opt_long("memeater", "chunk-mib", optarg); break;
		case 'n': chunks = vl_opt_long("memeater", "chunks", optarg); break;
		case 'c': cycles = vl_opt_long("memeater", "cycles", optarg); break;
		case 'p': cpu = atol(optarg); break;
		case 's': sample = vl_opt_long("memeater", "sample-pages", optarg); break;
		case 'f': cache_mib = vl_opt_long("memeater", "cache-mib", optarg); break;
		case 'd': dir = optarg; break;
		default: return 2;
		}
	}
	if (!chunk_mib || !chunks || !sample) {
		fprintf(stderr, "memeater: chunk-mib, chunks and sample-pages must be positive\n");
		return 2;
	}
	if (cpu >= 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		if (sched_setaffinity(0, sizeof set, &set))
			perror("memeater: sched_setaffinity");
	}
	int nodes = vl_nodes();
	if (cache_mib > 0 && fill_cache(dir, cache_mib, nodes))
		return 1;
	size_t size = (size_t)chunk_mib << 20;
	long pagesz = sysconf(_SC_PAGESIZE);
	char **buf = calloc((size_t)chunks, sizeof *buf);
	void **pages = calloc((size_t)sample, sizeof *pages);
	int *status = calloc((size_t)sample, sizeof *status);
	int *count = calloc((size_t)nodes + 1, sizeof *count);

	vl_buf b = vl_record("memeater_start");
	vl_kint(&b, "chunk_mib", chunk_mib);
	vl_kint(&b, "chunks", chunks);
	vl_kint(&b, "cycles", cycles);
	vl_kint(&b, "cpu", cpu);
	vl_kint(&b, "ran_on_cpu", sched_getcpu());
	vl_emit(&b);

	for (long i = 0; i < chunks; i++) {
		buf[i] = malloc(size);
		if (!buf[i]) {
			b = vl_record("error");
			vl_kstr(&b, "what", "malloc failed");
			vl_kint(&b, "chunk", i);
			vl_emit(&b);
			return 1;
		}
	}
	double t_start = vl_now_ms(CLOCK_MONOTONIC);
	long long rc0[VL_NRECLAIM], rc1[VL_NRECLAIM];
	for (long c = 0; c < cycles; c++) {
		double c0 = vl_now_ms(CLOCK_MONOTONIC);
		vl_vmstat_many(VL_RECLAIM, rc0);
		for (long i = 0; i < chunks; i++) {
			struct rusage r0, r1;
			getrusage(RUSAGE_SELF, &r0);
			double w0 = vl_now_ms(CLOCK_MONOTONIC), p0 = vl_now_ms(CLOCK_PROCESS_CPUTIME_ID);
			/* Zero fill memory to allocate pages (the seed's own comment).
			 * The timing model prices each chunk as one phase. */
			vl_phase_begin(VL_PHASE_MEMEATER_CHUNK, ((unsigned long)c << 32) | (unsigned long)i);
			memset(buf[i], 0, size);
			vl_phase_end(VL_PHASE_MEMEATER_CHUNK, ((unsigned long)c << 32) | (unsigned long)i);
			double w1 = vl_now_ms(CLOCK_MONOTONIC), p1 = vl_now_ms(CLOCK_PROCESS_CPUTIME_ID);
			getrusage(RUSAGE_SELF, &r1);

			for (long k = 0; k < sample; k++)
				pages[k] = buf[i] + ((size_t)k * (size / (size_t)sample)) / (size_t)pagesz * (size_t)pagesz;
			memset(count, 0, ((size_t)nodes + 1) * sizeof *count);
			long rc = syscall(SYS_move_pages, 0, sample, pages, NULL, status, 0);
			if (rc < 0 && errno == ENOSYS && nodes == 1) {
				/* no NUMA in this kernel (Alpha): one node, so a
				 * resident page is on node 0; mincore tells which are */
				rc = 0;
				for (long k = 0; k < sample; k++) {
					unsigned char in = 0;
					/* mincore wants a page-aligned address; malloc's is not */
					void *pg = (void *)((unsigned long)pages[k] & ~((unsigned long)pagesz - 1));
					status[k] = mincore(pg, (size_t)pagesz, &in) == 0 && (in & 1) ? 0 : -ENOENT;
				}
			}
			for (long k = 0; k < sample; k++) {
				int s = rc == 0 ? status[k] : -1;
				count[s >= 0 && s < nodes ? s : nodes]++;
			}

			b = vl_record("chunk");
			vl_kint(&b, "cycle", c);
			vl_kint(&b, "chunk", i);
			vl_kdbl(&b, "wall_ms", w1 - w0);
			vl_kdbl(&b, "cpu_ms", p1 - p0);
			vl_kdbl(&b, "t_ms", w1 - t_start);
			vl_kint(&b, "minflt", r1.ru_minflt - r0.ru_minflt);
			vl_kint(&b, "majflt", r1.ru_majflt - r0.ru_majflt);
			vl_kint(&b, "cpu_now", sched_getcpu());
			/* placement: sampled pages per node; "absent" = not resident (swapped) */
			vl_open(&b, "placement", '{');
			for (int n = 0; n < nodes; n++) {
				if (count[n]) {
					char k[16];
					snprintf(k, sizeof k, "%d", n);
					vl_kint(&b, k, count[n]);
				}
			}
			vl_close(&b, '}');
			vl_kint(&b, "absent", count[nodes]);
			vl_kint(&b, "sampled", sample);
			vl_nodefree(&b, nodes);
			vl_kint(&b, "swap_used_kib", vl_meminfo("SwapTotal") - vl_meminfo("SwapFree"));
			vl_emit(&b);
		}
		/* each cycle's time and what reclaim did in it: the seed's swap
		 * growing cycle after cycle */
		vl_vmstat_many(VL_RECLAIM, rc1);
		b = vl_record("memeater_cycle");
		vl_kint(&b, "cycle", c);
		vl_kdbl(&b, "wall_ms", vl_now_ms(CLOCK_MONOTONIC) - c0);
		vl_kint(&b, "swap_used_kib", vl_meminfo("SwapTotal") - vl_meminfo("SwapFree"));
		vl_reclaim_delta(&b, "vmstat", rc0, rc1);
		vl_emit(&b);
	}
	/* Memory as it stands with every chunk still mapped: the "after"
	 * snapshot comes once memeater has exited and its memory is free. */
	vl_snapshot("peak");
	b = vl_record("memeater_done");
	vl_kdbl(&b, "total_ms", vl_now_ms(CLOCK_MONOTONIC) - t_start);
	vl_emit(&b);
	return 0;
}
