/*
 * mlockchurn: seed 000 ("Google's mm problems", Linux 2.4.9), with vmlab
 * records. The program of the seed: map and mlock S anonymous slots, then
 * for each of K file chunks munlock and munmap one slot, mmap the chunk over
 * it (MAP_FIXED) and mlock it in 1 MiB steps, timing each mlock. The chunks
 * are files on the guest's data disk, written first like the seed's dd loop,
 * so once free memory is gone every mlock must recycle page cache while
 * most of memory is locked. Figures: time per mlock, kswapd CPU share over
 * the run (sampled), pages scanned vs reclaimed.
 */
#include "vmlab.h"
#include <errno.h>
#include <getopt.h>
#include <sys/mman.h>
#include <sys/resource.h>

static const char *PROG = "mlockchurn";

static double tv_ms(struct timeval t)
{
	return t.tv_sec * 1e3 + t.tv_usec / 1e3;
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void fail(const char *what, long chunk)
{
	vl_buf b = vl_record("error");
	vl_kstr(&b, "what", what);
	vl_kstr(&b, "errno", strerror(errno));
	vl_kint(&b, "chunk", chunk);
	vl_emit(&b);
	exit(1);
}

/* The seed's `dd if=/dev/zero of=/test/chunk$i`: real file pages on disk. */
static double write_chunk(const char *path, size_t bytes)
{
	static char block[1 << 20];
	double t0 = vl_now_ms(CLOCK_MONOTONIC);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return -1;
	for (size_t off = 0; off < bytes; off += sizeof block) {
		size_t n = bytes - off < sizeof block ? bytes - off : sizeof block;
		if (write(fd, block, n) != (ssize_t)n) {
			close(fd);
			return -1;
		}
	}
	close(fd);
	return vl_now_ms(CLOCK_MONOTONIC) - t0;
}

int main(int argc, char **argv)
{
	long slots = 2, slot_mib = 16, chunks = 4, step_kib = 1024, sample_ms = 500, sleep_ms = 0;
	const char *dir = "/data";
	static struct option lo[] = {
		{"slots", 1, 0, 's'}, {"slot-mib", 1, 0, 'm'}, {"chunks", 1, 0, 'k'},
		{"step-kib", 1, 0, 't'}, {"dir", 1, 0, 'd'}, {"sample-ms", 1, 0, 'i'}, {"sleep-ms", 1, 0, 'z'},
		{0, 0, 0, 0},
	};
	int o;
	while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (o) {
		case 's': slots = vl_opt_long(PROG, "slots", optarg); break;
		case 'm': slot_mib = vl_opt_long(PROG, "slot-mib", optarg); break;
		case 'k': chunks = vl_opt_long(PROG, "chunks", optarg); break;
		case 't': step_kib = vl_opt_long(PROG, "step-kib", optarg); break;
		case 'd': dir = optarg; break;
		case 'i': sample_ms = vl_opt_long(PROG, "sample-ms", optarg); break;
		case 'z': sleep_ms = vl_opt_long(PROG, "sleep-ms", optarg); break;
		default: return 2;
		}
	}
	if (!slots || !slot_mib || !chunks || !step_kib || !sample_ms) {
		fprintf(stderr, "%s: slots, slot-mib, chunks, step-kib and sample-ms must be positive\n", PROG);
		return 2;
	}
	size_t size = (size_t)slot_mib << 20, step = (size_t)step_kib << 10;
	long steps = (long)((size + step - 1) / step);
	int nodes = vl_nodes();
	long tck = sysconf(_SC_CLK_TCK);
	char path[512];

	vl_buf b = vl_record("mlockchurn_start");
	vl_kint(&b, "slots", slots);
	vl_kint(&b, "slot_mib", slot_mib);
	vl_kint(&b, "chunks", chunks);
	vl_kint(&b, "step_kib", step_kib);
	vl_kstr(&b, "dir", dir);
	vl_emit(&b);

	/* The chunk files, then sync: the seed's data was on disk before the run. */
	double t_files = vl_now_ms(CLOCK_MONOTONIC);
	for (long j = 0; j < chunks; j++) {
		snprintf(path, sizeof path, "%s/chunk%ld", dir, j);
		if (write_chunk(path, size) < 0)
			fail("writing chunk file", j);
	}
	sync();
	double files_ms = vl_now_ms(CLOCK_MONOTONIC) - t_files;
	vl_metric("mlockchurn.files_write_s", files_ms / 1e3, "s");

	/* The slots: anonymous, read-only and locked, as in the seed. */
	char **addr = calloc((size_t)slots, sizeof *addr);
	for (long i = 0; i < slots; i++) {
		addr[i] = mmap(NULL, size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (addr[i] == MAP_FAILED)
			fail("mmap of a slot", -1);
		if (mlock(addr[i], size))
			fail("mlock of a slot", -1);
	}

	static const char *R[] = {"pgscan_kswapd", "pgscan_direct", "pgsteal_kswapd", "pgsteal_direct", NULL};
	long long r0[4], r1[4], rc0[VL_NRECLAIM], rc1[VL_NRECLAIM];
	vl_vmstat_many(VL_RECLAIM, rc0);
	vl_lockstat_clear(VL_LOCK_STAT);
	long long ks_start = vl_kswapd_ticks(NULL, 0);
	pid_t sampler = vl_kswapd_sampler(sample_ms);
	double *t_step = malloc(sizeof *t_step * (size_t)steps);
	double t_start = vl_now_ms(CLOCK_MONOTONIC), sum_mlock = 0, max_step_all = 0, sum_cpu = 0, sum_busy = 0;
	long done = 0, failed = 0;
	for (long j = 0; j < chunks; j++) {
		long i = j % slots;
		struct rusage u0, u1;
		long long m0[7], m1[7];
		vl_vmstat_many(R, r0);
		vl_cpu_ticks(m0);
		long long ks0 = vl_kswapd_ticks(NULL, 0);
		getrusage(RUSAGE_SELF, &u0);
		double w0 = vl_now_ms(CLOCK_MONOTONIC);
		if (munlock(addr[i], size) || munmap(addr[i], size))
			fail("munlock/munmap of a slot", j);
		snprintf(path, sizeof path, "%s/chunk%ld", dir, j);
		int fd = open(path, O_RDONLY);
		if (fd < 0)
			fail("open of a chunk file", j);
		char *p = mmap(addr[i], size, PROT_READ, MAP_FIXED | MAP_PRIVATE, fd, 0);
		if (p == MAP_FAILED || p != addr[i])
			fail("mmap MAP_FIXED of a chunk file", j);
		/* mlock in steps: each step faults the chunk's pages in from the
		 * disk, recycling memory that other slots no longer lock */
		double lock0 = vl_now_ms(CLOCK_MONOTONIC);
		long s;
		for (s = 0; s < steps; s++) {
			size_t off = (size_t)s * step, n = size - off < step ? size - off : step;
			double a = vl_now_ms(CLOCK_MONOTONIC);
			if (mlock(p + off, n)) {
				failed++;
				break;
			}
			t_step[s] = vl_now_ms(CLOCK_MONOTONIC) - a;
		}
		double lock_ms = vl_now_ms(CLOCK_MONOTONIC) - lock0;
		close(fd);
		getrusage(RUSAGE_SELF, &u1);
		vl_cpu_ticks(m1);
		vl_vmstat_many(R, r1);
		long long ks1 = vl_kswapd_ticks(NULL, 0);
		double w1 = vl_now_ms(CLOCK_MONOTONIC);
		qsort(t_step, (size_t)s, sizeof *t_step, cmp_dbl);
		double max_step = s ? t_step[s - 1] : 0;
		if (max_step > max_step_all)
			max_step_all = max_step;
		sum_mlock += lock_ms;

		b = vl_record("mlock_chunk");
		vl_kint(&b, "chunk", j);
		vl_kint(&b, "slot", i);
		vl_kint(&b, "steps", s);
		vl_kint(&b, "ok", s == steps);
		vl_kdbl(&b, "mlock_ms", lock_ms);
		vl_kdbl(&b, "step_median_ms", s ? t_step[s / 2] : 0);
		vl_kdbl(&b, "step_max_ms", max_step);
		vl_kdbl(&b, "wall_ms", w1 - w0);
		vl_kdbl(&b, "t_ms", w1 - t_start);
		vl_kint(&b, "majflt", u1.ru_majflt - u0.ru_majflt);
		vl_kint(&b, "minflt", u1.ru_minflt - u0.ru_minflt);
		vl_kdbl(&b, "kswapd_s", (double)(ks1 - ks0) / tck);
		/* the seed's "95 % more cpu than it should": the program's own CPU
		 * time and the whole machine's (kswapd and all) per chunk */
		double cpu_ms = tv_ms(u1.ru_utime) + tv_ms(u1.ru_stime) - tv_ms(u0.ru_utime) - tv_ms(u0.ru_stime);
		double busy_ms = 1e3 * (double)(vl_busy_ticks(m1) - vl_busy_ticks(m0)) / tck;
		vl_kdbl(&b, "cpu_ms", cpu_ms);
		vl_kdbl(&b, "busy_ms", busy_ms);
		sum_cpu += cpu_ms;
		sum_busy += busy_ms;
		for (int k = 0; R[k]; k++)
			vl_kint(&b, R[k], r1[k] >= 0 && r0[k] >= 0 ? r1[k] - r0[k] : -1);
		vl_nodefree(&b, nodes);
		vl_emit(&b);
		if (s != steps)
			break;
		done++;
	}
	double elapsed_ms = vl_now_ms(CLOCK_MONOTONIC) - t_start;
	long long ks_total = vl_kswapd_ticks(NULL, 0) - ks_start;
	vl_sampler_stop(sampler);
	vl_vmstat_many(VL_RECLAIM, rc1);
	vl_lockstat("run", VL_LOCK_STAT, 10);
	/* Memory as it stands with every slot still locked */
	vl_snapshot("peak");
	/* The seed: "kswapd usage stays at 100% when the program sleeps". Sleep
	 * with everything still locked and measure kswapd, nothing allocating. */
	if (sleep_ms > 0) {
		long long *p0 = calloc((size_t)nodes, sizeof *p0), *p1 = calloc((size_t)nodes, sizeof *p1);
		vl_kswapd_ticks(p0, nodes);
		double s0 = vl_now_ms(CLOCK_MONOTONIC);
		struct timespec ts = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};
		while (nanosleep(&ts, &ts) && errno == EINTR)
			;
		double slept_s = (vl_now_ms(CLOCK_MONOTONIC) - s0) / 1e3;
		vl_kswapd_ticks(p1, nodes);
		long long all = 0, top = 0;
		for (int n = 0; n < nodes; n++) {
			all += p1[n] - p0[n];
			top = p1[n] - p0[n] > top ? p1[n] - p0[n] : top;
		}
		vl_metric("mlockchurn.sleep_s", slept_s, "s");
		vl_metric("mlockchurn.kswapd_sleeping_busiest", top / (double)tck / slept_s, "CPU");
		vl_metric("mlockchurn.kswapd_sleeping_all", all / (double)tck / slept_s, "CPU");
		free(p0);
		free(p1);
	}

	double mib_locked = (double)done * slot_mib;
	long long scan = (rc1[0] - rc0[0]) + (rc1[1] - rc0[1]), steal = (rc1[2] - rc0[2]) + (rc1[3] - rc0[3]);
	double share = elapsed_ms > 0 ? ks_total / (double)tck / (elapsed_ms / 1e3) : 0;
	b = vl_record("mlockchurn_done");
	vl_kint(&b, "chunks_done", done);
	vl_kint(&b, "mlock_failures", failed);
	vl_kdbl(&b, "elapsed_ms", elapsed_ms);
	vl_kdbl(&b, "mlock_ms_total", sum_mlock);
	vl_kdbl(&b, "kswapd_s", (double)ks_total / tck);
	vl_kdbl(&b, "kswapd_share", share);
	vl_reclaim_delta(&b, "vmstat", rc0, rc1);
	vl_emit(&b);

	vl_metric("mlockchurn.elapsed_s", elapsed_ms / 1e3, "s");
	vl_metric("mlockchurn.mlock_s_per_chunk", done ? sum_mlock / 1e3 / done : 0, "s");
	vl_metric("mlockchurn.mlock_ms_per_mib", mib_locked > 0 ? sum_mlock / mib_locked : 0, "ms/MiB");
	vl_metric("mlockchurn.mlock_step_max_ms", max_step_all, "ms");
	vl_metric("mlockchurn.kswapd_cpu_share", share, "CPU");
	vl_metric("mlockchurn.cpu_s", sum_cpu / 1e3, "s");
	vl_metric("mlockchurn.machine_busy_s", sum_busy / 1e3, "CPU-s");
	vl_metric("mlockchurn.pgscan", (double)scan, "pages");
	vl_metric("mlockchurn.pgsteal", (double)steal, "pages");
	vl_metric("mlockchurn.reclaim_efficiency", scan > 0 ? (double)steal / scan : 0, "ratio");

	/* It ran (every chunk locked) and it recycled memory (reclaim scanned,
	 * chunks were read back from the disk). */
	long long majflt = rc1[6] - rc0[6];
	vl_sanity sc = vl_sanity_begin(PROG);
	vl_sanity_check(&sc, "chunks_locked", done == chunks, (double)done, "every chunk mmapped and mlocked");
	vl_sanity_check(&sc, "mlock_failures", failed == 0, (double)failed, "0");
	vl_sanity_check(&sc, "pgscan", scan > 0, (double)scan, "> 0: memory was recycled by reclaim");
	vl_sanity_check(&sc, "pgmajfault", majflt > 0, (double)majflt, "> 0: chunks were read from the disk");
	vl_sanity_end(&sc);
	return done == chunks ? 0 : 1;
}
