/*
 * tierprobe: the guest's view of its memory tiers, and what one node's
 * memory costs from a CPU, by the guest's own clock.
 *
 * 1. The guest's NUMA view (a `numactl -H` equivalent): each node's CPUs,
 *    memory and SLIT row; the memory tiers the kernel formed
 *    (/sys/devices/virtual/memory_tiering/memory_tier*: each tier's nodes),
 *    whether demotion is on, and each node's HMAT figures as Linux parsed
 *    them (best initiator's read latency and bandwidth).
 * 2. A target node (--node; -1: the node without CPUs nearest the probing
 *    CPU by the SLIT, else its farthest node), probed from --cpu:
 *      chase  a dependent pointer chase over a random cycle of the buffer's
 *             lines (one miss at a time: the load-to-use latency)
 *      read   one core's sequential 16-byte loads (its bandwidth)
 *    and, with --node-threads, every CPU of the probing CPU's node reading
 *    its own part of a buffer on the target node at once (the target's
 *    bandwidth as that socket sees it: the node's, or its link's).
 *    The same chase and read on the probing CPU's own node, for reference.
 */
#include "vmlab.h"
#include <dirent.h>
#include <getopt.h>
#include <sched.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>

static unsigned long long rng = 0x2545f4914f6cdd1dull;
static volatile uint64_t sink;

/* "a-b,c" -> a bit per listed number below 64 */
static unsigned long long parse_list(const char *s)
{
	unsigned long long m = 0;
	while (s && *s) {
		char *e;
		long a = strtol(s, &e, 10), b = a;
		if (e == s)
			break;
		if (*e == '-')
			b = strtol(e + 1, &e, 10);
		for (long i = a; i <= b && i < 64; i++)
			if (i >= 0)
				m |= 1ull << i;
		s = *e == ',' ? e + 1 : e;
	}
	return m;
}

static void chomp(char *s)
{
	size_t n = s ? strlen(s) : 0;
	while (n && (s[n - 1] == '\n' || s[n - 1] == ' '))
		s[--n] = 0;
}

#define TIER_DIR "/sys/devices/virtual/memory_tiering"

/* The tiers (each one's id and node mask), fastest first as the kernel
 * numbers them (a lower id is a faster tier); returns how many. */
static int read_tiers(int *ids, unsigned long long *nodes, int max)
{
	DIR *d = opendir(TIER_DIR);
	int n = 0;
	struct dirent *e;
	while (d && (e = readdir(d)) && n < max) {
		int id;
		if (sscanf(e->d_name, "memory_tier%d", &id) != 1)
			continue;
		char path[320];
		snprintf(path, sizeof path, TIER_DIR "/%s/nodelist", e->d_name);
		char *s = vl_slurp(path);
		ids[n] = id;
		nodes[n++] = parse_list(s);
		free(s);
	}
	if (d)
		closedir(d);
	for (int i = 1; i < n; i++) /* by id */
		for (int j = i; j > 0 && ids[j] < ids[j - 1]; j--) {
			int t = ids[j];
			ids[j] = ids[j - 1], ids[j - 1] = t;
			unsigned long long m = nodes[j];
			nodes[j] = nodes[j - 1], nodes[j - 1] = m;
		}
	return n;
}

static void numa_view(int nodes)
{
	char p[128];
	int ids[64];
	unsigned long long tn[64];
	int nt = read_tiers(ids, tn, 64);
	vl_buf b = vl_record("numa_view");
	char *s = vl_slurp("/sys/kernel/mm/numa/demotion_enabled");
	chomp(s);
	vl_kstr(&b, "demotion_enabled", s ? s : "");
	free(s);
	vl_kint(&b, "tiers_sysfs", access(TIER_DIR, R_OK) == 0);
	vl_open(&b, "tiers", '[');
	for (int t = 0; t < nt; t++) {
		vl_open(&b, NULL, '{');
		vl_kint(&b, "tier", ids[t]);
		vl_open(&b, "nodes", '[');
		for (int n = 0; n < 64; n++)
			if (tn[t] >> n & 1) {
				vl_sep(&b);
				vl_raw(&b, "%d", n);
			}
		vl_close(&b, ']');
		vl_close(&b, '}');
	}
	vl_close(&b, ']');
	vl_open(&b, "nodes", '[');
	for (int n = 0; n < nodes; n++) {
		vl_open(&b, NULL, '{');
		vl_kint(&b, "node", n);
		s = vl_slurp(vl_node_file(p, sizeof p, n, "cpulist"));
		chomp(s);
		vl_kstr(&b, "cpus", s ? s : "");
		free(s);
		s = vl_slurp(vl_node_file(p, sizeof p, n, "meminfo"));
		vl_kint(&b, "mem_total_kib", s ? vl_node_meminfo(s, "MemTotal") : -1);
		vl_kint(&b, "mem_free_kib", s ? vl_node_meminfo(s, "MemFree") : -1);
		free(s);
		int tier = -1;
		for (int t = 0; t < nt; t++)
			if (tn[t] >> n & 1)
				tier = ids[t];
		vl_kint(&b, "tier", tier);
		s = vl_slurp(vl_node_file(p, sizeof p, n, "access0/initiators/read_latency"));
		vl_kint(&b, "hmat_read_latency_ns", s ? atoll(s) : -1);
		free(s);
		s = vl_slurp(vl_node_file(p, sizeof p, n, "access0/initiators/read_bandwidth"));
		vl_kint(&b, "hmat_read_bandwidth_mbps", s ? atoll(s) : -1);
		free(s);
		int row[64], k = vl_slit_row(n, row, 64);
		vl_open(&b, "distances", '[');
		for (int i = 0; i < k; i++) {
			vl_sep(&b);
			vl_raw(&b, "%d", row[i]);
		}
		vl_close(&b, ']');
		vl_close(&b, '}');
		char name[64];
		snprintf(name, sizeof name, "node%d_tier", n);
		vl_metric(name, tier, "tier");
	}
	vl_close(&b, ']');
	vl_emit(&b);
	vl_metric("memory_tiers", nt, "tiers");
}

static int write_str(const char *path, const char *v)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	int ok = fputs(v, f) >= 0;
	return fclose(f) == 0 && ok ? 0 : -1;
}

/* --dax-kmem: Linux 6.1's way to a lower tier. Soft-reserved memory (the
 * kernel's memmap=SIZE%START-1+0xefffffff turns RAM into it) becomes a
 * device-dax instance (dax_hmem); moved to the kmem driver it is onlined as
 * System RAM on its node, which kmem places in a DAX memory tier. */
static void dax_to_kmem(void)
{
	DIR *d = opendir("/sys/bus/dax/devices");
	struct dirent *e;
	int found = 0, bound = 0;
	while (d && (e = readdir(d))) {
		if (strncmp(e->d_name, "dax", 3))
			continue;
		found++;
		write_str("/sys/bus/dax/drivers/device_dax/unbind", e->d_name);
		if (write_str("/sys/bus/dax/drivers/kmem/new_id", e->d_name) == 0)
			bound++;
	}
	if (d)
		closedir(d);
	vl_buf b = vl_record("dax_kmem");
	vl_kint(&b, "devices", found);
	vl_kint(&b, "bound", bound);
	vl_kint(&b, "bus", access("/sys/bus/dax", R_OK) == 0);
	vl_emit(&b);
}

static void emit(const char *test, const char *where, int node, int distance, int cpu, double bytes, long accesses,
		 double ms, double on_node)
{
	vl_buf b = vl_record("tier_bw");
	vl_kstr(&b, "test", test);
	vl_kstr(&b, "where", where);
	vl_kint(&b, "cpu", cpu);
	vl_kint(&b, "node", node);
	vl_kint(&b, "distance", distance);
	vl_kdbl(&b, "bytes", bytes);
	vl_kint(&b, "accesses", accesses);
	vl_kdbl(&b, "guest_ms", ms);
	vl_kdbl(&b, "gbps", ms > 0 ? bytes / (ms * 1e6) : 0);
	vl_kdbl(&b, "ns_per_access", accesses ? ms * 1e6 / accesses : 0);
	vl_kdbl(&b, "on_node", on_node);
	vl_emit(&b);
	char name[64];
	if (!strcmp(test, "chase"))
		snprintf(name, sizeof name, "%s_chase_ns", where), vl_metric(name, ms * 1e6 / accesses, "ns");
	else
		snprintf(name, sizeof name, "%s_read_gbps", where), vl_metric(name, bytes / (ms * 1e6), "GB/s");
}

#define T0() double t0 = vl_now_ms(CLOCK_MONOTONIC)
#define MS() (vl_now_ms(CLOCK_MONOTONIC) - t0)

static void probe_node(const char *where, int node, int distance, int cpu, size_t size, long laps)
{
	char *buf = vl_node_alloc(size, node);
	if (!buf) {
		perror("tierprobe: mmap");
		exit(1);
	}
	double on = vl_on_node(buf, size, node);
	vl_stream_read(buf, size); /* warm: TLB */
	{ T0(); vl_stream_read(buf, size); emit("read", where, node, distance, cpu, (double)size, (long)(size / 16), MS(), on); }
	size_t lines = size / 64;
	uint32_t *order = malloc(lines * sizeof *order);
	vl_random_cycle(order, lines, &rng);
	for (size_t i = 0; i < lines; i++)
		*(void **)(buf + (size_t)order[i] * 64) = buf + (size_t)order[(i + 1) % lines] * 64;
	free(order);
	void **p = vl_chase((void **)buf, (long)lines); /* warm-up lap */
	long n = laps * (long)lines;
	T0();
	p = vl_chase(p, n);
	double ms = MS();
	sink = (uint64_t)(uintptr_t)p;
	emit("chase", where, node, distance, cpu, (double)n * 64, n, ms, on);
	munmap(buf, size);
}

/* Every CPU of a node reads its own slice of one buffer on the target node
 * at once, meeting at a spinning barrier; the bandwidth is all their bytes
 * over the span from the first start to the last end on the guest clocks
 * (bwprobe's node_threads, aimed at another node). */
static void node_threads(int from, int node, int cpu, size_t size)
{
	struct vl_node_read r;
	if (vl_node_read(from, node, cpu, size, &r)) {
		perror("tierprobe: mmap");
		exit(1);
	}
	vl_buf b = vl_record("tier_bw_node");
	vl_kint(&b, "from_node", from);
	vl_kint(&b, "node", node);
	vl_kint(&b, "cpus", r.cpus);
	vl_kdbl(&b, "bytes", r.bytes);
	vl_kdbl(&b, "guest_ms", r.guest_ms);
	vl_kdbl(&b, "slowest_ms", r.slowest_ms);
	vl_kdbl(&b, "gbps", r.gbps);
	vl_kdbl(&b, "on_node", r.on_node);
	vl_emit(&b);
	vl_metric("target_node_read_gbps", r.gbps, "GB/s");
}

int main(int argc, char **argv)
{
	long cpu = 0, buf_mib = 16, laps = 1, threads_on = 1, local = 1, dax_kmem = 0;
	long node = -1;
	static struct option lo[] = {
		{"cpu", 1, 0, 'c'}, {"node", 1, 0, 'N'}, {"buf-mib", 1, 0, 'b'}, {"laps", 1, 0, 'l'},
		{"node-threads", 1, 0, 'n'}, {"local", 1, 0, 'L'}, {"dax-kmem", 1, 0, 'D'}, {0, 0, 0, 0},
	};
	int o;
	while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (o) {
		case 'c': cpu = vl_opt_long("tierprobe", "cpu", optarg); break;
		case 'N': node = strcmp(optarg, "-1") ? vl_opt_long("tierprobe", "node", optarg) : -1; break;
		case 'b': buf_mib = vl_opt_long("tierprobe", "buf-mib", optarg); break;
		case 'l': laps = vl_opt_long("tierprobe", "laps", optarg); break;
		case 'n': threads_on = vl_opt_long("tierprobe", "node-threads", optarg); break;
		case 'L': local = vl_opt_long("tierprobe", "local", optarg); break;
		case 'D': dax_kmem = vl_opt_long("tierprobe", "dax-kmem", optarg); break;
		default: return 2;
		}
	}
	if (buf_mib < 1 || laps < 1) {
		fprintf(stderr, "tierprobe: --buf-mib and --laps must be positive\n");
		return 2;
	}
	if (vl_pin((int)cpu)) {
		perror("tierprobe: sched_setaffinity");
		return 1;
	}
	unsigned gcpu = 0, home = 0;
	syscall(SYS_getcpu, &gcpu, &home, NULL);
	if (dax_kmem)
		dax_to_kmem(); /* first: a node it onlines is a node from now on */
	int nodes = vl_nodes();
	numa_view(nodes);
	int row[64], nd = vl_slit_row((int)home, row, 64);
	if (node < 0) { /* the nearest node without CPUs, else the farthest */
		int best = -1;
		for (int n = 0; n < nd && n < nodes; n++) {
			int c[1];
			if (n != (int)home && vl_node_cpus(n, c, 1) == 0 && (best < 0 || row[n] < row[best]))
				best = n;
		}
		int fard;
		node = best >= 0 ? best : vl_far_node((int)home, &fard);
	}
	if (node >= nodes || node >= nd) {
		fprintf(stderr, "tierprobe: --node %ld: the guest has nodes 0..%d\n", node, nodes - 1);
		return 2;
	}
	vl_buf b = vl_record("tier_target");
	vl_kint(&b, "cpu", gcpu);
	vl_kint(&b, "home", home);
	vl_kint(&b, "node", node);
	vl_kint(&b, "distance", row[node]);
	vl_emit(&b);
	vl_metric("target_node", (double)node, "node");
	vl_metric("target_distance", (double)row[node], "SLIT");
	size_t size = (size_t)buf_mib << 20;
	if (local && node != (long)home)
		probe_node("local", (int)home, 10, (int)gcpu, size, laps);
	probe_node("target", (int)node, row[node], (int)gcpu, size, laps);
	if (threads_on)
		node_threads((int)home, (int)node, (int)gcpu, size);
	b = vl_record("tierprobe_done");
	vl_kint(&b, "node", node);
	vl_emit(&b);
	return 0;
}
