/* vmlab guest library: the records every run reports (snapshots around the
 * experiment, metrics, sanity checks, reclaim deltas). */
#include "vmlab.h"

const char *VL_RECLAIM[] = {
#define X(n) #n,
	VMLAB_RECLAIM_COUNTERS(X)
#undef X
	NULL,
};

/* Per-node reclaim counters a nodestat record keeps from the node's vmstat. */
static const char *VL_NODE_VMSTAT[] = {
	"nr_vmscan_write", "nr_vmscan_immediate_reclaim", "workingset_refault_anon",
	"workingset_refault_file", "nr_anon_pages", "nr_file_pages", "nr_swapcached", NULL,
};

static const char *VL_NODE_FIELDS[] = {
	"MemTotal", "MemFree", "MemUsed", "FilePages", "AnonPages", "AnonHugePages",
	"Active(anon)", "Inactive(anon)", "Active(file)", "Inactive(file)", "Slab", NULL,
};

/* "key value" lines (vmstat, numastat) as JSON members; `only` (NULL-ended)
 * keeps just the named keys */
static void kv_fields(vl_buf *b, const char *path, const char **only)
{
	char *s = vl_slurp(path);
	for (char *line = s ? strtok(s, "\n") : NULL; line; line = strtok(NULL, "\n")) {
		char name[128];
		long long v;
		if (sscanf(line, "%127s %lld", name, &v) != 2)
			continue;
		const char **f = only;
		while (f && *f && strcmp(*f, name))
			f++;
		if (!only || *f)
			vl_kint(b, name, v);
	}
	free(s);
}

void vl_nodemem(vl_buf *b, int nodes)
{
	char p[96];
	vl_open(b, "nodes", '[');
	for (int n = 0; n < nodes; n++) {
		char *s = vl_slurp(vl_node_file(p, sizeof p, n, "meminfo"));
		vl_open(b, NULL, '{');
		vl_kint(b, "node", n);
		for (const char **f = VL_NODE_FIELDS; *f; f++) {
			long long v = s ? vl_node_meminfo(s, *f) : -1;
			/* /proc/meminfo (no NUMA) lacks the node file's MemUsed: same definition */
			if (v < 0 && s && !strcmp(*f, "MemUsed"))
				v = vl_node_meminfo(s, "MemTotal") - vl_node_meminfo(s, "MemFree");
			vl_kint(b, *f, v);
		}
		vl_close(b, '}');
		free(s);
	}
	vl_close(b, ']');
}

void vl_nodefree(vl_buf *b, int nodes)
{
	char p[96];
	vl_open(b, "free_kib", '[');
	for (int n = 0; n < nodes; n++) {
		char *s = vl_slurp(vl_node_file(p, sizeof p, n, "meminfo"));
		vl_sep(b);
		vl_raw(b, "%lld", s ? vl_node_meminfo(s, "MemFree") : -1LL);
		free(s);
	}
	vl_close(b, ']');
}

void vl_snapshot(const char *phase)
{
	int nodes = vl_nodes();
	char p[96];
	vl_buf b = vl_record("vmstat");
	vl_kstr(&b, "phase", phase);
	vl_kdbl(&b, "t_ms", vl_now_ms(CLOCK_MONOTONIC));
	vl_open(&b, "counters", '{');
	kv_fields(&b, "/proc/vmstat", NULL);
	vl_close(&b, '}');
	vl_emit(&b);

	b = vl_record("nodemem");
	vl_kstr(&b, "phase", phase);
	vl_nodemem(&b, nodes);
	vl_emit(&b);

	/* Per-node counters: numastat, plus the node's reclaim counters (pages
	 * it wrote out, i.e. swapped, for anonymous memory; refaults);
	 * /proc/vmstat's pgscan and pgsteal are machine-wide. */
	b = vl_record("nodestat");
	vl_kstr(&b, "phase", phase);
	vl_open(&b, "nodes", '[');
	for (int n = 0; n < nodes; n++) {
		vl_open(&b, NULL, '{');
		kv_fields(&b, vl_node_file(p, sizeof p, n, "numastat"), NULL);
		kv_fields(&b, vl_node_file(p, sizeof p, n, "vmstat"), VL_NODE_VMSTAT);
		vl_close(&b, '}');
	}
	vl_close(&b, ']');
	vl_emit(&b);

	b = vl_record("kswapd");
	vl_kstr(&b, "phase", phase);
	vl_kswapd(&b);
	vl_emit(&b);

	b = vl_record("swap");
	vl_kstr(&b, "phase", phase);
	long long tot = vl_meminfo("SwapTotal"), fr = vl_meminfo("SwapFree");
	vl_kint(&b, "total_kib", tot);
	vl_kint(&b, "used_kib", tot >= 0 && fr >= 0 ? tot - fr : -1);
	vl_emit(&b);
}

void vl_reclaim_delta(vl_buf *b, const char *k, const long long *before, const long long *now)
{
	vl_open(b, k, '{');
	for (size_t i = 0; i < VL_NRECLAIM; i++)
		if (before[i] >= 0 && now[i] >= 0)
			vl_kint(b, VL_RECLAIM[i], now[i] - before[i]);
	vl_close(b, '}');
}

void vl_metric(const char *name, double value, const char *unit)
{
	vl_buf b = vl_record("metric");
	vl_kstr(&b, "name", name);
	vl_kdbl(&b, "value", value);
	vl_kstr(&b, "unit", unit);
	vl_emit(&b);
}

vl_sanity vl_sanity_begin(const char *experiment)
{
	vl_sanity s = {vl_record("sanity"), 1};
	vl_kstr(&s.b, "experiment", experiment);
	vl_open(&s.b, "checks", '[');
	return s;
}

void vl_sanity_check(vl_sanity *s, const char *name, int pass, double value, const char *expect)
{
	vl_open(&s->b, NULL, '{');
	vl_kstr(&s->b, "name", name);
	vl_kint(&s->b, "ok", pass != 0);
	vl_kdbl(&s->b, "value", value);
	vl_kstr(&s->b, "expect", expect);
	vl_close(&s->b, '}');
	if (!pass)
		s->ok = 0;
}

int vl_sanity_end(vl_sanity *s)
{
	vl_close(&s->b, ']');
	vl_kint(&s->b, "ok", s->ok);
	vl_emit(&s->b);
	return s->ok;
}
