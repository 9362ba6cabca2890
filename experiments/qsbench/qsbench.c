/*
 * qsbench: seed 003 (Rik van Riel's "smoother VM for -ac", 2001, timed with
 * qsbench) with vmlab records. Each of P processes fills its share of a
 * large array with random integers from a fixed seed and quicksorts it; the
 * array is sized above RAM so the sort runs against swap. Same seed, same
 * work: the checksum of the sorted data depends only on the seed and size.
 * Figures: elapsed time (guest clock; the host adds its own view), user and
 * system time, major faults, kswapd CPU time.
 */
#include "vmlab.h"
#include <getopt.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>

static const char *PROG = "qsbench";

/* Plain recursive quicksort on the middle element, recursing into the
 * smaller side (bounded stack); a library sort could change between ISAs. */
static void quicksort(int32_t *a, long lo, long hi)
{
	while (lo < hi) {
		int32_t pivot = a[lo + (hi - lo) / 2];
		long i = lo, j = hi;
		while (i <= j) {
			while (a[i] < pivot)
				i++;
			while (a[j] > pivot)
				j--;
			if (i <= j) {
				int32_t t = a[i];
				a[i] = a[j];
				a[j] = t;
				i++;
				j--;
			}
		}
		if (j - lo < hi - i) {
			quicksort(a, lo, j);
			lo = i;
		} else {
			quicksort(a, i, hi);
			hi = j;
		}
	}
}

static void proc(int id, long n, unsigned long long seed, int pipe_fd)
{
	int32_t *a = mmap(NULL, (size_t)n * sizeof *a, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (a == MAP_FAILED)
		_exit(3);
	unsigned long long s = seed * 0x100000001b3ULL + (unsigned long long)id + 1;
	struct rusage u0, u1;
	getrusage(RUSAGE_SELF, &u0);
	double t0 = vl_now_ms(CLOCK_MONOTONIC);
	for (long i = 0; i < n; i++)
		a[i] = (int32_t)(vl_rand(&s) >> 33);
	double t1 = vl_now_ms(CLOCK_MONOTONIC);
	quicksort(a, 0, n - 1);
	double t2 = vl_now_ms(CLOCK_MONOTONIC);
	/* verify and checksum: position-weighted, so order matters */
	uint64_t sum = 1469598103934665603ULL;
	long unsorted = 0;
	for (long i = 0; i < n; i++) {
		if (i && a[i - 1] > a[i])
			unsorted++;
		sum = (sum ^ (uint64_t)(uint32_t)a[i]) * 1099511628211ULL;
	}
	double t3 = vl_now_ms(CLOCK_MONOTONIC);
	getrusage(RUSAGE_SELF, &u1);
	vl_buf b = vl_record("qsbench_proc");
	vl_kint(&b, "proc", id);
	vl_kint(&b, "elements", n);
	vl_kdbl(&b, "fill_ms", t1 - t0);
	vl_kdbl(&b, "sort_ms", t2 - t1);
	vl_kdbl(&b, "elapsed_ms", t3 - t0);
	vl_kdbl(&b, "user_ms", u1.ru_utime.tv_sec * 1e3 + u1.ru_utime.tv_usec / 1e3 -
				    (u0.ru_utime.tv_sec * 1e3 + u0.ru_utime.tv_usec / 1e3));
	vl_kdbl(&b, "sys_ms", u1.ru_stime.tv_sec * 1e3 + u1.ru_stime.tv_usec / 1e3 -
				   (u0.ru_stime.tv_sec * 1e3 + u0.ru_stime.tv_usec / 1e3));
	vl_kint(&b, "majflt", u1.ru_majflt - u0.ru_majflt);
	vl_kint(&b, "minflt", u1.ru_minflt - u0.ru_minflt);
	char hex[17];
	snprintf(hex, sizeof hex, "%016llx", (unsigned long long)sum);
	vl_kstr(&b, "checksum", hex);
	vl_kint(&b, "unsorted", unsorted);
	vl_emit(&b);
	/* the checksum goes to the parent, which combines all of them */
	if (write(pipe_fd, &sum, sizeof sum) != sizeof sum || unsorted)
		_exit(4);
	_exit(0);
}

int main(int argc, char **argv)
{
	long mib = 16, procs = 1, seed = 0;
	static struct option lo[] = {
		{"mib", 1, 0, 'm'}, {"procs", 1, 0, 'p'}, {"seed", 1, 0, 's'}, {0, 0, 0, 0},
	};
	int o;
	while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (o) {
		case 'm': mib = vl_opt_long(PROG, "mib", optarg); break;
		case 'p': procs = vl_opt_long(PROG, "procs", optarg); break;
		case 's': seed = vl_opt_long(PROG, "seed", optarg); break;
		default: return 2;
		}
	}
	if (!mib || !procs || procs > 256) {
		fprintf(stderr, "%s: mib must be positive, procs 1..256\n", PROG);
		return 2;
	}
	long n = (long)(((size_t)mib << 20) / sizeof(int32_t) / (size_t)procs);
	long tck = sysconf(_SC_CLK_TCK);
	int fds[2];
	if (pipe(fds))
		return 1;
	long long v0[VL_NRECLAIM], v1[VL_NRECLAIM];
	vl_vmstat_many(VL_RECLAIM, v0);
	long long ks0 = vl_kswapd_ticks(NULL, 0);
	/* the host timestamps this record and qsbench_done: its own view of
	 * the elapsed time, beside the guest clock's */
	vl_buf b = vl_record("qsbench_start");
	vl_kint(&b, "mib", mib);
	vl_kint(&b, "procs", procs);
	vl_kint(&b, "seed", seed);
	vl_kint(&b, "elements_per_proc", n);
	vl_emit(&b);
	pid_t sampler = vl_kswapd_sampler(1000);
	pid_t *pp = calloc((size_t)procs, sizeof *pp);
	double t0 = vl_now_ms(CLOCK_MONOTONIC);
	for (long p = 0; p < procs; p++)
		if ((pp[p] = fork()) == 0) {
			close(fds[0]);
			proc((int)p, n, (unsigned long long)seed, fds[1]);
		}
	close(fds[1]);
	int bad = 0;
	for (long p = 0; p < procs; p++) {
		int st;
		if (waitpid(pp[p], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
			bad++;
	}
	double el = vl_now_ms(CLOCK_MONOTONIC) - t0;
	struct rusage ch;
	getrusage(RUSAGE_CHILDREN, &ch); /* the sorters only: the sampler is not reaped yet */
	vl_sampler_stop(sampler);
	/* combine the procs' checksums independently of the order they finished */
	uint64_t sum = 0, x;
	long got = 0;
	while (read(fds[0], &x, sizeof x) == sizeof x)
		sum += x, got++;
	vl_vmstat_many(VL_RECLAIM, v1);
	long long ks1 = vl_kswapd_ticks(NULL, 0);
	char hex[17];
	snprintf(hex, sizeof hex, "%016llx", (unsigned long long)sum);
	double user_s = ch.ru_utime.tv_sec + ch.ru_utime.tv_usec / 1e6, sys_s = ch.ru_stime.tv_sec + ch.ru_stime.tv_usec / 1e6;
	b = vl_record("qsbench_done");
	vl_kdbl(&b, "elapsed_ms", el);
	vl_kdbl(&b, "user_s", user_s);
	vl_kdbl(&b, "sys_s", sys_s);
	vl_kint(&b, "majflt", ch.ru_majflt);
	vl_kdbl(&b, "kswapd_s", (double)(ks1 - ks0) / tck);
	vl_kstr(&b, "checksum", hex);
	vl_kint(&b, "procs_ok", procs - bad);
	vl_reclaim_delta(&b, "vmstat", v0, v1);
	vl_emit(&b);
	vl_metric("qsbench.elapsed_s", el / 1e3, "s");
	vl_metric("qsbench.user_s", user_s, "s");
	vl_metric("qsbench.sys_s", sys_s, "s");
	vl_metric("qsbench.majflt", (double)ch.ru_majflt, "faults");
	vl_metric("qsbench.kswapd_s", (double)(ks1 - ks0) / tck, "s");
	vl_metric("qsbench.pswpout", (double)(v1[5] - v0[5]), "pages");
	vl_metric("qsbench.pswpin", (double)(v1[4] - v0[4]), "pages");

	vl_sanity sc = vl_sanity_begin(PROG);
	vl_sanity_check(&sc, "sorted", !bad && got == procs, (double)(procs - bad), "every process sorted its share");
	vl_sanity_check(&sc, "pswpout", v1[5] - v0[5] > 0, (double)(v1[5] - v0[5]), "> 0: the array was above RAM");
	vl_sanity_check(&sc, "majflt", ch.ru_majflt > 0, (double)ch.ru_majflt, "> 0: the sort faulted pages back in");
	vl_sanity_end(&sc);
	return bad ? 1 : 0;
}
