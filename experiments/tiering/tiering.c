/*
 * tiering: a working set larger than the top (DRAM) tier, a hot part and a
 * cold part whose roles swap mid-run, timed on the guest clock interval by
 * interval, with where the hot pages live and what the kernel's tiering did.
 *
 * The set is one anonymous mapping of --set-mib. The hot part is a window of
 * --hot-mib at its start; at interval --swap-at the window moves to the
 * set's other end (a part that was cold until then), so promotion has work
 * to do twice. Every --cold-every-th access goes to the cold rest instead.
 *
 * Placement at the start: the first touch interleaves the whole set (chunk
 * c in pass c % PASSES, each pass from both ends of the set inwards), and
 * the kernel puts what does not fit on the DRAM
 * node on the next node of its fallback list (the CXL node), as it does for
 * any program that outgrows DRAM. Binding the hot part to the CXL node
 * (mbind) would fix its share off DRAM by hand but leave a policy the
 * kernel honours afterwards (MPOL_BIND stops NUMA-balancing migration of
 * the VMA) unless it is undone; the fill keeps the default policy
 * throughout. Interleaving the touch spreads the overflow evenly, so both
 * windows start with the same share off DRAM and a machine with tiering
 * off is neither helped nor hurt by where the window moves.
 *
 * Each access is a dependent load (its address needs the previous load's
 * value): one miss at a time, so accesses per second are the inverse of the
 * mean access time (DRAM against CXL shows directly) and a guest second
 * costs the timing model few instructions.
 *
 * Per interval ("tiering_interval"): accesses, guest ms, accesses per
 * second; the share of sampled pages of the hot window, the other window
 * and the cold rest on DRAM (a node with CPUs), off it, and not resident
 * (move_pages, query mode); deltas of the kernel's tiering counters in
 * /proc/vmstat (a counter the kernel lacks is listed as absent, not 0);
 * every node's free memory.
 */
#include "vmlab.h"
#include <getopt.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#define PROG "tiering"
#define PASSES 16          /* first-touch interleave (see above) */
#define CHUNK_PAGES 64     /* 256 KiB chunks of 4 KiB pages */
#define BATCH 1024         /* accesses between two reads of the clock */
#define MAXN 64

/* The kernel's tiering counters, as /proc/vmstat names them (6.1 and 6.12
 * have them all; an older or newer kernel may lack some). */
static const char *COUNTERS[] = {
	"pgpromote_success", "pgpromote_candidate", "pgdemote_kswapd", "pgdemote_direct",
	"numa_hint_faults", "numa_hint_faults_local", "numa_pages_migrated", "numa_pte_updates",
	"pgmigrate_success", "pswpout", NULL,
};
#define NCOUNTERS (sizeof COUNTERS / sizeof *COUNTERS - 1)

static int nodes, dram[MAXN]; /* dram[n]: node n has CPUs */

struct where {
	int dram, slow, absent, sampled;
};

/* Where n pages spread evenly over [p, p + size) live. */
static struct where locate(char *p, size_t size, int n, void **pages, int *status)
{
	struct where w = {0, 0, 0, n};
	long pg = sysconf(_SC_PAGESIZE);
	size_t step = size / (size_t)n / (size_t)pg * (size_t)pg;
	for (int i = 0; i < n; i++)
		pages[i] = p + (size_t)i * step;
	if (syscall(SYS_move_pages, 0, n, pages, NULL, status, 0) != 0) {
		if (nodes > 1) {
			w.sampled = 0; /* cannot tell */
			return w;
		}
		for (int i = 0; i < n; i++)
			status[i] = 0; /* no NUMA: one node, DRAM */
	}
	for (int i = 0; i < n; i++) {
		int s = status[i];
		if (s < 0 || s >= nodes)
			w.absent++;
		else if (dram[s])
			w.dram++;
		else
			w.slow++;
	}
	return w;
}

static void put_where(vl_buf *b, const char *k, struct where w)
{
	vl_open(b, k, '{');
	vl_kint(b, "dram", w.dram);
	vl_kint(b, "slow", w.slow);
	vl_kint(b, "absent", w.absent);
	vl_kint(b, "sampled", w.sampled);
	vl_close(b, '}');
}

/* Counter deltas under k; a counter absent at either end is null there and
 * listed under absent_k. */
static void put_counters(vl_buf *b, const char *k, const char *absent_k, const long long *a, const long long *z)
{
	vl_open(b, k, '{');
	for (size_t i = 0; i < NCOUNTERS; i++) {
		if (a[i] < 0 || z[i] < 0) {
			vl_key(b, COUNTERS[i]);
			vl_raw(b, "null");
		} else {
			vl_kint(b, COUNTERS[i], z[i] - a[i]);
		}
	}
	vl_close(b, '}');
	vl_open(b, absent_k, '[');
	for (size_t i = 0; i < NCOUNTERS; i++)
		if (a[i] < 0 || z[i] < 0)
			vl_str(b, COUNTERS[i]);
	vl_close(b, ']');
}

static void put_file(vl_buf *b, const char *k, const char *path)
{
	char *s = vl_slurp(path);
	size_t n = s ? strlen(s) : 0;
	while (n && (s[n - 1] == '\n' || s[n - 1] == ' '))
		s[--n] = 0;
	if (s)
		vl_kstr(b, k, s);
	else {
		vl_key(b, k);
		vl_raw(b, "null"); /* no such file on this kernel */
	}
	free(s);
}

/* The memory tiers the kernel formed, each as its node list ("memory_tier4": "0,1") */
static void put_tiers(vl_buf *b)
{
	DIR *d = opendir("/sys/devices/virtual/memory_tiering");
	struct dirent *e;
	vl_open(b, "tiers", '{');
	while (d && (e = readdir(d))) {
		if (strncmp(e->d_name, "memory_tier", 11) || !isdigit((unsigned char)e->d_name[11]))
			continue;
		char path[320];
		snprintf(path, sizeof path, "/sys/devices/virtual/memory_tiering/%s/nodelist", e->d_name);
		put_file(b, e->d_name, path);
	}
	vl_close(b, '}');
	if (d)
		closedir(d);
}

/* n dependent accesses: each line's address needs the previous load's value.
 * Every cold_every-th goes to the cold range instead of the hot one. */
static uint64_t walk(const char *base, uint64_t hot0, uint64_t hot_lines, uint64_t cold0, uint64_t cold_lines,
		     long cold_every, long *k, long n, uint64_t x)
{
	for (long i = 0; i < n; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		uint64_t r = x >> 32, line;
		if (cold_every && ++*k >= cold_every) {
			*k = 0;
			line = cold0 + ((r * cold_lines) >> 32);
		} else {
			line = hot0 + ((r * hot_lines) >> 32);
		}
		x += *(const volatile uint64_t *)(base + line * 64);
	}
	return x;
}

int main(int argc, char **argv)
{
	long set_mib = 0, hot_mib = 0, intervals = 0, interval_ms = 0, swap_at = 0, cold_every = 0, cpu = 0;
	long sample = 1024;
	static struct option lo[] = {
		{"set-mib", 1, 0, 's'}, {"hot-mib", 1, 0, 'h'}, {"intervals", 1, 0, 'n'},
		{"interval-ms", 1, 0, 'i'}, {"swap-at", 1, 0, 'w'}, {"cold-every", 1, 0, 'c'},
		{"cpu", 1, 0, 'p'}, {"sample-pages", 1, 0, 'm'}, {0, 0, 0, 0},
	};
	int o;
	while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (o) {
		case 's': set_mib = vl_opt_long(PROG, "set-mib", optarg); break;
		case 'h': hot_mib = vl_opt_long(PROG, "hot-mib", optarg); break;
		case 'n': intervals = vl_opt_long(PROG, "intervals", optarg); break;
		case 'i': interval_ms = vl_opt_long(PROG, "interval-ms", optarg); break;
		case 'w': swap_at = vl_opt_long(PROG, "swap-at", optarg); break;
		case 'c': cold_every = vl_opt_long(PROG, "cold-every", optarg); break;
		case 'p': cpu = vl_opt_long(PROG, "cpu", optarg); break;
		case 'm': sample = vl_opt_long(PROG, "sample-pages", optarg); break;
		default: return 2;
		}
	}
	/* the manifest checks these; a direct call gets one line too */
	if (!set_mib || !hot_mib || 2 * hot_mib > set_mib || !intervals || !interval_ms || !sample) {
		fprintf(stderr, PROG ": expected set-mib >= 2 x hot-mib > 0 and positive intervals, interval-ms, "
				"sample-pages\n");
		return 2;
	}
	if (vl_pin((int)cpu))
		perror(PROG ": sched_setaffinity");
	nodes = vl_nodes();
	if (nodes > MAXN)
		nodes = MAXN;
	for (int n = 0; n < nodes; n++) {
		int c[1];
		dram[n] = !vl_numa() || vl_node_cpus(n, c, 1) > 0;
	}
	long pg = sysconf(_SC_PAGESIZE);
	size_t size = (size_t)set_mib << 20, hot = (size_t)hot_mib << 20;
	void **pages = calloc((size_t)sample, sizeof *pages);
	int *status = calloc((size_t)sample, sizeof *status);
	char *set = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (set == MAP_FAILED || !pages || !status) {
		vl_buf e = vl_record("error");
		vl_kstr(&e, "what", "mmap of the working set failed");
		vl_kint(&e, "set_mib", set_mib);
		vl_emit(&e);
		return 1;
	}
	/* windows: A at the start, B at the end; the cold rest of each phase is the set less its window */
	char *win[2] = {set, set + size - hot};

	long long fv0[NCOUNTERS + 1], fv1[NCOUNTERS + 1];
	vl_vmstat_many(COUNTERS, fv0);
	double f0 = vl_now_ms(CLOCK_MONOTONIC);
	size_t chunk = (size_t)CHUNK_PAGES * (size_t)pg, nchunks = (size + chunk - 1) / chunk;
	for (size_t pass = 0; pass < PASSES && pass < nchunks; pass++) {
		/* this pass's chunks from both ends inwards: wherever DRAM runs
		 * out within the pass, the two windows have had the same share */
		size_t m = (nchunks - pass + PASSES - 1) / PASSES;
		for (size_t j = 0; j < m; j++) {
			size_t c = pass + (j % 2 ? m - 1 - j / 2 : j / 2) * PASSES;
			memset(set + c * chunk, 0, c * chunk + chunk <= size ? chunk : size - c * chunk);
		}
	}
	double fill_ms = vl_now_ms(CLOCK_MONOTONIC) - f0;
	vl_vmstat_many(COUNTERS, fv1);

	vl_buf b = vl_record("tiering_start");
	vl_kint(&b, "set_mib", set_mib);
	vl_kint(&b, "hot_mib", hot_mib);
	vl_kint(&b, "intervals", intervals);
	vl_kint(&b, "interval_ms", interval_ms);
	vl_kint(&b, "swap_at", swap_at);
	vl_kint(&b, "cold_every", cold_every);
	vl_kint(&b, "cpu", cpu);
	vl_kint(&b, "ran_on_cpu", sched_getcpu());
	vl_kdbl(&b, "fill_ms", fill_ms);
	put_counters(&b, "fill_vmstat", "fill_absent", fv0, fv1); /* what the kernel did while the set was touched */
	vl_open(&b, "dram_nodes", '[');
	for (int n = 0; n < nodes; n++)
		if (dram[n]) {
			vl_sep(&b);
			vl_raw(&b, "%d", n);
		}
	vl_close(&b, ']');
	/* what the kernel had: the knobs as /init left them, its tiers */
	put_file(&b, "numa_balancing", "/proc/sys/kernel/numa_balancing");
	put_file(&b, "demotion_enabled", "/sys/kernel/mm/numa/demotion_enabled");
	put_file(&b, "promote_rate_limit_mbps", "/proc/sys/kernel/numa_balancing_promote_rate_limit_MBps");
	put_tiers(&b);
	put_where(&b, "window_a", locate(win[0], hot, (int)sample, pages, status));
	put_where(&b, "window_b", locate(win[1], hot, (int)sample, pages, status));
	struct where start_set = locate(set, size, (int)sample, pages, status);
	put_where(&b, "set", start_set);
	vl_nodefree(&b, nodes);
	vl_emit(&b);

	uint64_t lines = size / 64, hot_lines = hot / 64, x = 0x2545f4914f6cdd1dULL;
	long k = 0;
	long long c0[NCOUNTERS + 1], c1[NCOUNTERS + 1];
	double total_acc = 0, total_ms = 0, phase_acc[2] = {0, 0}, phase_ms[2] = {0, 0};
	vl_vmstat_many(COUNTERS, c0);
	double t0 = vl_now_ms(CLOCK_MONOTONIC);
	for (long i = 0; i < intervals; i++) {
		int ph = i >= swap_at;
		uint64_t hot0 = ph ? lines - hot_lines : 0, cold0 = ph ? 0 : hot_lines;
		double s = vl_now_ms(CLOCK_MONOTONIC), now = s;
		long long acc = 0;
		do {
			x = walk(set, hot0, hot_lines, cold0, lines - hot_lines, cold_every, &k, BATCH, x);
			acc += BATCH;
			now = vl_now_ms(CLOCK_MONOTONIC);
		} while (now - s < (double)interval_ms);
		double ms = now - s;
		vl_vmstat_many(COUNTERS, c1);
		total_acc += (double)acc, total_ms += ms, phase_acc[ph] += (double)acc, phase_ms[ph] += ms;

		b = vl_record("tiering_interval");
		vl_kint(&b, "interval", i);
		vl_kint(&b, "phase", ph);
		vl_kdbl(&b, "t_ms", s - t0);
		vl_kdbl(&b, "ms", ms);
		vl_kint(&b, "accesses", acc);
		vl_kdbl(&b, "accesses_per_s", (double)acc / ms * 1e3);
		vl_kdbl(&b, "ns_per_access", ms * 1e6 / (double)acc);
		/* hot: this interval's window; other: the other window; cold: the rest */
		put_where(&b, "hot", locate(win[ph], hot, (int)sample, pages, status));
		put_where(&b, "other", locate(win[!ph], hot, (int)sample, pages, status));
		put_where(&b, "cold", size > 2 * hot ? locate(set + hot, size - 2 * hot, (int)sample, pages, status)
						    : (struct where){0, 0, 0, 0});
		put_counters(&b, "vmstat", "absent", c0, c1);
		vl_nodefree(&b, nodes);
		vl_emit(&b);
		/* one read a boundary: what the kernel did while this record was
		 * made counts in the next interval, not in none */
		memcpy(c0, c1, sizeof c0);
	}
	(void)x;

	b = vl_record("tiering_done");
	vl_kdbl(&b, "accesses", total_acc);
	vl_kdbl(&b, "ms", total_ms);
	vl_kdbl(&b, "accesses_per_s", total_ms > 0 ? total_acc / total_ms * 1e3 : 0);
	for (int ph = 0; ph < 2; ph++) {
		char key[32];
		snprintf(key, sizeof key, "phase%d_accesses_per_s", ph);
		if (phase_ms[ph] > 0)
			vl_kdbl(&b, key, phase_acc[ph] / phase_ms[ph] * 1e3);
	}
	vl_emit(&b);

	int slow_nodes = 0;
	for (int n = 0; n < nodes; n++)
		slow_nodes += !dram[n];
	vl_sanity sc = vl_sanity_begin(PROG);
	vl_sanity_check(&sc, "accesses", total_acc > 0, total_acc, "> 0: every interval timed accesses");
	vl_sanity_check(&sc, "set_beyond_dram", !slow_nodes || start_set.slow > 0, start_set.slow,
			slow_nodes ? "> 0 sampled pages of the set off DRAM after the fill: the set outgrew DRAM"
				   : "no node without CPUs: nothing to overflow to");
	vl_sanity_end(&sc);
	return 0;
}
