/*
 * forkstorm: seed 002 (Larry Woodman, 2009: AIM7 on a large SMP spends its
 * time in _spin_lock under page_referenced) with vmlab records. An AIM7-like
 * load: on every CPU a worker owns an anonymous region and keeps several
 * children alive; each child reads a window of a region every process of the
 * storm inherited from forkstorm itself (one anon_vma family, as AIM7's tasks
 * under one driver, so reclaim's reference checks walk long anon_vma chains
 * under one root lock), writes a window of its worker's region (copy on
 * write), touches private memory of its own and exits. The regions together
 * exceed RAM, so all this happens while reclaim swaps. Figures: jobs per
 * minute, system vs user time, lock contention (anon_vma, page-table locks)
 * on LOCK_STAT kernels.
 */
#include "vmlab.h"
#include <getopt.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/times.h>
#include <sys/wait.h>

static const char *PROG = "forkstorm";

/* What every child does, and where */
struct job {
	char *region;		/* its worker's region */
	size_t size;
	char *family;		/* the driver's region, inherited by every process; or NULL */
	size_t family_size;
	size_t touch_bytes, write_bytes, priv_bytes;
};

static size_t window(size_t size, size_t bytes, unsigned long long *seed)
{
	return size > bytes ? (size_t)(vl_rand(seed) % (size - bytes)) : 0;
}

static void child(const struct job *j, unsigned long long seed)
{
	long pg = sysconf(_SC_PAGESIZE);
	volatile unsigned long sum = 0;
	/* read a random window (0: all) of the family region if there is one,
	 * else of the worker's. Reading all of it made every child a long run
	 * of swap-ins: a short storm then completed little more than the
	 * children alive at its start, and fork and exit (the anon_vma writers
	 * the seed's reclaim contended with) were rare. fork maps both regions
	 * whole either way. */
	char *rd = j->family ? j->family : j->region;
	size_t rsize = j->family ? j->family_size : j->size;
	size_t touch = !j->touch_bytes || j->touch_bytes > rsize ? rsize : j->touch_bytes;
	size_t from = window(rsize, touch, &seed);
	for (size_t off = 0; off < touch; off += (size_t)pg)
		sum += (unsigned char)rd[from + off];
	/* copy on write over a random window of the worker's region */
	size_t start = window(j->size, j->write_bytes, &seed);
	for (size_t off = 0; off < j->write_bytes && start + off < j->size; off += (size_t)pg)
		j->region[start + off] = (char)(sum + off);
	if (j->priv_bytes) {
		char *p = malloc(j->priv_bytes);
		if (p)
			memset(p, 1, j->priv_bytes);
	}
	_exit(0);
}

/* Shared by the driver and the workers: the storm starts once every worker
 * has its region, so a slow first touch under swap does not eat the storm. */
struct shared {
	volatile int ready;
	volatile double until_ms;
	volatile long long jobs[];
};

static void worker(int id, int cpu, int kids, struct job j, struct shared *sh)
{
	if (cpu >= 0)
		vl_pin(cpu);
	j.region = mmap(NULL, j.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (j.region == MAP_FAILED)
		_exit(3);
	memset(j.region, id + 1, j.size);
	__sync_fetch_and_add(&sh->ready, 1);
	while (sh->until_ms == 0) {
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	double until_ms = sh->until_ms;
	volatile long long *jobs = sh->jobs;
	unsigned long long seed = (unsigned long long)id * 1000003 + 1;
	int running = 0;
	while (vl_now_ms(CLOCK_MONOTONIC) < until_ms || running) {
		while (running < kids && vl_now_ms(CLOCK_MONOTONIC) < until_ms) {
			unsigned long long s = vl_rand(&seed);
			pid_t p = fork();
			if (p == 0)
				child(&j, s);
			if (p < 0)
				break;
			running++;
		}
		int st;
		if (wait(&st) < 0)
			break;
		running--;
		if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
			jobs[id]++;
	}
	_exit(0);
}

int main(int argc, char **argv)
{
	long workers = 0, region_mib = 16, family_mib = 0, kids = 4, touch_kib = 0, write_kib = 256, priv_kib = 256, duration_ms = 5000,
	     tick_ms = 1000;
	static struct option lo[] = {
		{"workers", 1, 0, 'w'}, {"region-mib", 1, 0, 'm'}, {"family-mib", 1, 0, 'f'},
		{"children", 1, 0, 'c'},
		{"touch-kib", 1, 0, 'T'}, {"write-kib", 1, 0, 'W'}, {"private-kib", 1, 0, 'p'}, {"duration-ms", 1, 0, 'd'},
		{"tick-ms", 1, 0, 't'}, {0, 0, 0, 0},
	};
	int o;
	while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (o) {
		case 'w': workers = vl_opt_long(PROG, "workers", optarg); break;
		case 'm': region_mib = vl_opt_long(PROG, "region-mib", optarg); break;
		case 'f': family_mib = vl_opt_long(PROG, "family-mib", optarg); break;
		case 'c': kids = vl_opt_long(PROG, "children", optarg); break;
		case 'T': touch_kib = vl_opt_long(PROG, "touch-kib", optarg); break;
		case 'W': write_kib = vl_opt_long(PROG, "write-kib", optarg); break;
		case 'p': priv_kib = vl_opt_long(PROG, "private-kib", optarg); break;
		case 'd': duration_ms = vl_opt_long(PROG, "duration-ms", optarg); break;
		case 't': tick_ms = vl_opt_long(PROG, "tick-ms", optarg); break;
		default: return 2;
		}
	}
	int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (!workers)
		workers = ncpu;
	if (!region_mib || !kids || !duration_ms || !tick_ms || workers > 1024) {
		fprintf(stderr, "%s: region-mib, children, duration-ms, tick-ms must be positive, workers <= 1024\n", PROG);
		return 2;
	}
	long tck = sysconf(_SC_CLK_TCK);
	vl_buf b = vl_record("forkstorm_start");
	vl_kint(&b, "workers", workers);
	vl_kint(&b, "region_mib", region_mib);
	vl_kint(&b, "family_mib", family_mib);
	vl_kint(&b, "children", kids);
	vl_kint(&b, "touch_kib", touch_kib);
	vl_kint(&b, "write_kib", write_kib);
	vl_kint(&b, "private_kib", priv_kib);
	vl_kint(&b, "duration_ms", duration_ms);
	vl_kint(&b, "cpus", ncpu);
	vl_emit(&b);

	struct shared *sh = mmap(NULL, sizeof *sh + sizeof(long long) * (size_t)workers, PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 1;
	volatile long long *jobs = sh->jobs;
	long long v0[VL_NRECLAIM], v1[VL_NRECLAIM], c0[7], c1[7];
	pid_t *wp = calloc((size_t)workers, sizeof *wp);
	int *wstatus = calloc((size_t)workers, sizeof *wstatus);
	double tp = vl_now_ms(CLOCK_MONOTONIC);
	struct job j = {.size = (size_t)region_mib << 20, .family_size = (size_t)family_mib << 20,
			.touch_bytes = (size_t)touch_kib << 10, .write_bytes = (size_t)write_kib << 10,
			.priv_bytes = (size_t)priv_kib << 10};
	/* AIM7's tasks all descend from one driver: a region mapped here, before
	 * the workers fork, makes every process of the storm one anon_vma family
	 * (one root lock; reclaim's walk of one of its pages visits every
	 * process mapping it), as the seed's 2.6.32 kept one anon_vma list. */
	if (family_mib) {
		j.family = mmap(NULL, j.family_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (j.family == MAP_FAILED)
			return 1;
		memset(j.family, 0x5a, j.family_size);
	}
	for (long w = 0; w < workers; w++) {
		wp[w] = fork();
		if (wp[w] == 0)
			worker((int)w, (int)(w % ncpu), (int)kids, j, sh);
	}
	while (sh->ready < workers) {
		struct timespec ts = {0, 10000000};
		nanosleep(&ts, NULL);
	}
	b = vl_record("forkstorm_ready");
	vl_kdbl(&b, "populate_ms", vl_now_ms(CLOCK_MONOTONIC) - tp);
	vl_emit(&b);
	/* the storm: everything below is measured from here */
	vl_lockstat_clear(VL_LOCK_STAT);
	vl_vmstat_many(VL_RECLAIM, v0);
	vl_cpu_ticks(c0);
	long long ks0 = vl_kswapd_ticks(NULL, 0);
	struct tms tm0, tm1;
	times(&tm0);
	pid_t sampler = vl_kswapd_sampler(500);
	double t0 = vl_now_ms(CLOCK_MONOTONIC);
	sh->until_ms = t0 + duration_ms;
	/* progress: jobs and reclaim every tick, until the workers are done */
	long live = workers, seq = 0;
	double next_tick = t0 + tick_ms;
	while (live > 0) {
		/* poll often, so the storm's end is seen within 20 ms */
		struct timespec ts = {0, 20000000};
		nanosleep(&ts, NULL);
		for (long w = 0; w < workers; w++)
			if (wp[w] > 0 && waitpid(wp[w], &wstatus[w], WNOHANG) == wp[w])
				wp[w] = 0, live--;
		if (live > 0 && vl_now_ms(CLOCK_MONOTONIC) < next_tick)
			continue;
		next_tick += tick_ms;
		long long j = 0, v[VL_NRECLAIM];
		for (long w = 0; w < workers; w++)
			j += jobs[w];
		vl_vmstat_many(VL_RECLAIM, v);
		b = vl_record("forkstorm_tick");
		vl_kint(&b, "seq", seq++);
		vl_kdbl(&b, "t_ms", vl_now_ms(CLOCK_MONOTONIC) - t0);
		vl_kint(&b, "jobs", j);
		vl_kint(&b, "live_workers", live);
		vl_reclaim_delta(&b, "vmstat", v0, v);
		vl_kdbl(&b, "kswapd_s", (double)(vl_kswapd_ticks(NULL, 0) - ks0) / tck);
		vl_emit(&b);
	}
	double el = vl_now_ms(CLOCK_MONOTONIC) - t0;
	vl_sampler_stop(sampler);
	times(&tm1);
	vl_cpu_ticks(c1);
	vl_vmstat_many(VL_RECLAIM, v1);
	long long ks1 = vl_kswapd_ticks(NULL, 0);
	long long total = 0, idle_workers = 0, killed = 0;
	for (long w = 0; w < workers; w++) {
		total += jobs[w];
		idle_workers += jobs[w] == 0;
		killed += !WIFEXITED(wstatus[w]) || WEXITSTATUS(wstatus[w]);
	}
	long long user = (c1[0] - c0[0]) + (c1[1] - c0[1]), sys = (c1[2] - c0[2]) + (c1[5] - c0[5]) + (c1[6] - c0[6]);
	long long all = user + sys + (c1[3] - c0[3]) + (c1[4] - c0[4]);
	double jpm = el > 0 ? total / (el / 60e3) : 0;

	b = vl_record("forkstorm_done");
	vl_kint(&b, "jobs", total);
	vl_kdbl(&b, "elapsed_ms", el);
	vl_kdbl(&b, "jobs_per_min", jpm);
	vl_kdbl(&b, "user_s", (double)user / tck);
	vl_kdbl(&b, "sys_s", (double)sys / tck);
	vl_kdbl(&b, "idle_s", (double)((c1[3] - c0[3]) + (c1[4] - c0[4])) / tck);
	vl_kdbl(&b, "children_user_s", (double)(tm1.tms_cutime - tm0.tms_cutime) / tck);
	vl_kdbl(&b, "children_sys_s", (double)(tm1.tms_cstime - tm0.tms_cstime) / tck);
	vl_kdbl(&b, "kswapd_s", (double)(ks1 - ks0) / tck);
	vl_open(&b, "per_worker", '[');
	for (long w = 0; w < workers; w++) {
		vl_sep(&b);
		vl_raw(&b, "%lld", jobs[w]);
	}
	vl_close(&b, ']');
	/* exit code, or minus the signal that ended it (the OOM killer's SIGKILL: -9) */
	vl_open(&b, "worker_status", '[');
	for (long w = 0; w < workers; w++) {
		vl_sep(&b);
		vl_raw(&b, "%d", WIFEXITED(wstatus[w]) ? WEXITSTATUS(wstatus[w]) : -WTERMSIG(wstatus[w]));
	}
	vl_close(&b, ']');
	vl_reclaim_delta(&b, "vmstat", v0, v1);
	static const char *locks[] = {"anon_vma", "ptl", "lru_lock", "mmap_lock", NULL};
	vl_lockstat_match(&b, "locks", VL_LOCK_STAT, locks);
	vl_emit(&b);
	vl_lockstat("run", VL_LOCK_STAT, 10);

	vl_metric("forkstorm.jobs_per_min", jpm, "jobs/min");
	vl_metric("forkstorm.elapsed_s", el / 1e3, "s");
	vl_metric("forkstorm.sys_share", all ? (double)sys / all : 0, "ratio");
	vl_metric("forkstorm.user_share", all ? (double)user / all : 0, "ratio");
	vl_metric("forkstorm.sys_per_user", user ? (double)sys / user : 0, "ratio");
	vl_metric("forkstorm.kswapd_s", (double)(ks1 - ks0) / tck, "s");

	long long swpout = v1[5] - v0[5], scan = (v1[0] - v0[0]) + (v1[1] - v0[1]);
	vl_sanity sc = vl_sanity_begin(PROG);
	vl_sanity_check(&sc, "jobs", total > 0 && !idle_workers, (double)total, "> 0, every worker completed jobs");
	vl_sanity_check(&sc, "workers_survived", !killed, (double)killed,
			"0 workers killed or failed (the OOM killer means the storm was sized past RAM + swap)");
	vl_sanity_check(&sc, "pgscan", scan > 0, (double)scan, "> 0: reclaim ran during the storm");
	vl_sanity_check(&sc, "pswpout", swpout > 0, (double)swpout, "> 0: the working set was above RAM and swapped");
	vl_sanity_end(&sc);
	return total > 0 ? 0 : 1;
}
