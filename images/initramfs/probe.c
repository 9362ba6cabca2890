/*
 * vmlab-probe: what the guest's /init reports around an experiment.
 *   vmlab-probe machine         the machine Linux sees (nodes, CPUs, SLIT, HMAT, sysctls)
 *   vmlab-probe snapshot PHASE  vmstat, per-node memory and counters, kswapd, swap
 *   vmlab-probe end RC          the experiment's exit status; the host stops waiting
 */
#include "vmlab.h"
#include <sys/utsname.h>

static void trim(char *s)
{
	size_t n = strlen(s);
	while (n && (s[n - 1] == '\n' || s[n - 1] == ' '))
		s[--n] = 0;
}

static void file_str(vl_buf *b, const char *k, const char *path) /* NULL path: "" */
{
	char *s = vl_slurp(path);
	if (s)
		trim(s);
	vl_kstr(b, k, s ? s : "");
	free(s);
}

static void machine(void)
{
	int nodes = vl_nodes();
	char p[128];
	struct utsname u;
	vl_buf b = vl_record("machine");
	uname(&u);
	vl_kstr(&b, "release", u.release);
	vl_kstr(&b, "arch", u.machine);
	file_str(&b, "version", "/proc/version");
	file_str(&b, "cmdline", "/proc/cmdline");
	file_str(&b, "cpus_online", "/sys/devices/system/cpu/online");
	file_str(&b, "uptime", "/proc/uptime");
	file_str(&b, "zone_reclaim_mode", "/proc/sys/vm/zone_reclaim_mode");
	file_str(&b, "numa_balancing", "/proc/sys/kernel/numa_balancing");
	file_str(&b, "thp", "/sys/kernel/mm/transparent_hugepage/enabled");
	file_str(&b, "watermark_boost_factor", "/proc/sys/vm/watermark_boost_factor");
	file_str(&b, "min_free_kbytes", "/proc/sys/vm/min_free_kbytes");
	file_str(&b, "swaps", "/proc/swaps");
	/* 1 when the kernel has LOCK_STAT (the lockstat flavor) */
	vl_kint(&b, "lock_stat", access("/proc/lock_stat", R_OK) == 0);
	vl_kint(&b, "mem_total_kib", vl_meminfo("MemTotal"));
	vl_kint(&b, "swap_total_kib", vl_meminfo("SwapTotal"));
	vl_kint(&b, "numa", vl_numa());
	vl_open(&b, "nodes", '[');
	for (int n = 0; n < nodes; n++) {
		vl_open(&b, NULL, '{');
		vl_kint(&b, "node", n);
		file_str(&b, "cpus", vl_node_file(p, sizeof p, n, "cpulist"));
		char *s = vl_slurp(vl_node_file(p, sizeof p, n, "meminfo"));
		vl_kint(&b, "mem_total_kib", s ? vl_node_meminfo(s, "MemTotal") : -1);
		free(s);
		/* HMAT, as the kernel parsed it: best initiator's latency (ns) and bandwidth (MB/s) */
		s = vl_slurp(vl_node_file(p, sizeof p, n, "access0/initiators/read_latency"));
		vl_kint(&b, "hmat_read_latency_ns", s ? atoll(s) : -1);
		free(s);
		s = vl_slurp(vl_node_file(p, sizeof p, n, "access0/initiators/read_bandwidth"));
		vl_kint(&b, "hmat_read_bandwidth_mbps", s ? atoll(s) : -1);
		free(s);
		vl_close(&b, '}');
	}
	vl_close(&b, ']');
	vl_open(&b, "distances", '[');
	for (int n = 0; n < nodes; n++) {
		/* without NUMA, the one node's distance to itself: LOCAL_DISTANCE */
		char *s = vl_numa() ? vl_slurp(vl_node_file(p, sizeof p, n, "distance")) : strdup("10");
		vl_open(&b, NULL, '[');
		for (char *t = s ? strtok(s, " \n") : NULL; t; t = strtok(NULL, " \n")) {
			vl_sep(&b);
			vl_raw(&b, "%s", t);
		}
		vl_close(&b, ']');
		free(s);
	}
	vl_close(&b, ']');
	vl_emit(&b);
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "machine")) {
		machine();
		return 0;
	}
	if (argc >= 3 && !strcmp(argv[1], "snapshot")) {
		vl_snapshot(argv[2]);
		return 0;
	}
	if (argc >= 3 && !strcmp(argv[1], "end")) {
		vl_buf b = vl_record("end");
		vl_kint(&b, "rc", atoi(argv[2]));
		vl_kdbl(&b, "t_ms", vl_now_ms(CLOCK_MONOTONIC));
		vl_emit(&b);
		return 0;
	}
	fprintf(stderr, "usage: vmlab-probe machine | snapshot PHASE | end RC\n");
	return 2;
}
