"""What a researcher reads: the run summary (built from the database only, so
`show` prints the same thing later), live progress, and plain tables/CSV."""
from __future__ import annotations

import csv
import io
import json
import sys

import experiments
import topologies
from analysis import experiment_results, kit, timing as timing_summary
from analysis.rows import f as _f, hops_from_home, metrics as _metrics, mib as _mib
from protocol import facts
from timing import modes

# The reclaim counters every reproducer reports (experiments/lib/
# vmlab_facts.h), then the placement ones; labels where the name is terse.
LABELS = {
    "pgfault": "page faults", "pgmajfault": "major faults", "pgscan_kswapd": "scanned by kswapd",
    "pgscan_direct": "scanned by direct reclaim", "pgsteal_kswapd": "reclaimed by kswapd",
    "pgsteal_direct": "reclaimed by direct reclaim", "pswpin": "swapped in (pages)", "pswpout": "swapped out (pages)",
    "allocstall_normal": "direct reclaim stalls (Normal)", "allocstall_dma32": "direct reclaim stalls (DMA32)",
    "pgpgin": "paged in (KiB)", "pgpgout": "paged out (KiB)", "oom_kill": "OOM kills",
    "zone_reclaim_failed": "zone reclaim failures", "numa_pages_migrated": "pages migrated by NUMA balancing",
    "thp_fault_alloc": "THP faults", "thp_fault_fallback": "THP fallbacks",
}
PLACEMENT = ("zone_reclaim_failed", "numa_hit", "numa_miss", "numa_foreign", "numa_local", "numa_other",
             "numa_pages_migrated", "thp_fault_alloc", "thp_fault_fallback")
VMSTAT_KEYS = [(k, LABELS.get(k, k)) for k in (*facts.RECLAIM_COUNTERS, *PLACEMENT)]


def dumps(obj) -> str:
    return json.dumps(obj, sort_keys=True)


# --- tables ----------------------------------------------------------------------
def _fmt(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.3f}".rstrip("0").rstrip(".") if abs(v) < 1e6 else f"{v:.0f}"
    return str(v)


def table(cols, rows) -> str:
    cells = [[_fmt(v) for v in r] for r in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(cols)]
    line = lambda vals: "  ".join(v.ljust(w) for v, w in zip(vals, widths)).rstrip() + "\n"
    return line(cols) + line(["-" * w for w in widths]) + "".join(line(r) for r in cells)


def csv_text(cols, rows) -> str:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(cols)
    w.writerows(rows)
    return buf.getvalue()


# --- live progress -------------------------------------------------------------------
class LiveProgress:
    """Boot, then the experiment's own progress records. A bar on a terminal;
    a line every 30 s otherwise (CI logs)."""

    def __init__(self, exp, plan, topo):
        spec = exp.manifest.get("progress", {})
        self.kind = spec.get("record")
        names = {"nodes": topo.nodes, "cpus": topo.cpus, **plan.all_values}
        self.total = int(experiments.evaluate(spec["total"], names)) if spec.get("total") else None
        self.label = spec.get("label", exp.name)
        self.done = 0
        self.booted = False
        self.tty = sys.stderr.isatty()
        self.last_line = 0.0
        self.progress = None

    def __enter__(self):
        if self.tty:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
            self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                     TimeElapsedColumn(), transient=False)
            self.progress.start()
            self.task = self.progress.add_task("booting guest", total=None)
        return self

    def __exit__(self, *exc):
        if self.progress:
            self.progress.stop()
        return False

    def record(self, r):
        if r.type == "machine" and not self.booted:
            self.booted = True
            msg = (f"guest up: {len(r.body.get('nodes', []))} nodes, CPUs {r.body.get('cpus_online')}, "
                   f"{r.body.get('release')}")
            if self.progress:
                self.progress.console.print(msg)
                self.progress.update(self.task, description=self.label, total=self.total, completed=0)
            else:
                print(f"  {msg}", flush=True)
        if r.type == self.kind:
            self.done += 1
            if self.progress:
                self.progress.update(self.task, completed=self.done)

    def tick(self, elapsed: float, boot_at):
        if self.progress or elapsed - self.last_line < 30:
            return
        self.last_line = elapsed
        what = (f"{self.label}: {self.done}/{self.total or '?'}" if self.booted else "booting")
        print(f"  [{elapsed:5.0f} s] {what}", flush=True)


# --- the run summary ---------------------------------------------------------------
def _vcpu_clocks(con, run_id: int, w) -> None:
    """Each vCPU's own time at exit: busy vCPUs advance alone, not as a sum."""
    rows = con.execute("SELECT cpu, insns, stall_ps, clock_ps FROM vcpu_clocks WHERE run_id = ? ORDER BY cpu",
                       (run_id,)).fetchall()
    if not rows:
        return
    busiest = max(rows, key=lambda x: x["insns"])
    total = sum(x["insns"] for x in rows)
    w(f"vCPUs:   {len(rows)} clocks at exit; {total / 1e9:.2f} G instructions in all, the busiest (CPU "
      f"{busiest['cpu']}) {busiest['insns'] / 1e9:.2f} G, its clock {busiest['clock_ps'] / 1e12:.3f} s with "
      f"{busiest['stall_ps'] / 1e12:.3f} s of model stalls")
    m = _metrics(con, run_id)
    if "engine.pauses" in m:
        w(f"         spin-waits: {m['engine.pauses']:,.0f} PAUSEs (spin-loop turns) in all, "
          f"{m.get('engine.pause_cpu_s', 0):.3f} CPU-s at the topology's PAUSE latency; "
          f"{m.get('engine.slices', 0):,.0f} slices")


def render(con, run_id: int) -> str:
    r = con.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
    params = json.loads(r["params_json"])
    out = []
    w = out.append
    wall = f"{r['wall_s']:.0f} s wall" if r["wall_s"] is not None else "no wall time"
    boot = f", boot {r['boot_wall_s']:.0f} s" if r["boot_wall_s"] else ""
    w(f"\n=== run {run_id}: {r['status'].upper()}  {r['topology']} / {r['experiment']}  ({wall}{boot})")
    if r["reason"]:
        w(f"reason:  {r['reason']}")
    if head := modes.get(r["timing_mode"]).headline() if r["timing_mode"] in modes.NAMES else "":
        w(f"NOTE:    {head}")
    # the row keeps the topology file as it was parsed for the run
    try:  # the row's topology: memory nodes' memory counted too
        topo = kit.run_topology(con, run_id)
        desc, total = topo.description, topo.total_memory_mib
    except topologies.TopologyError:  # a row of an older checkout whose file today's parser refuses
        desc, total = "(its topology file no longer parses)", r["nodes"] * r["memory_mib_per_node"]
    w(f"machine: {desc}")
    w(f"         {r['nodes']} nodes ({r['topology_shape']}), {r['cpus']} CPUs, {r['memory_mib_per_node']} MiB/node "
      f"= {total} MiB, scale 1/{round(1 / r['scale'])}; guest {r['guest_isa']}"
      + (f" (native {r['native_isa']}, substituted)" if r["guest_isa"] != r["native_isa"] else "")
      + f"; topology sha256 {r['topology_sha256'][:12]}")
    w(f"kernel:  Linux {r['kernel_release']} ({r['kernel_source']}), patch set {r['patch_set']}, "
      f"flavor {r['kernel_flavor']}, config sha256 {(r['kernel_config_sha256'] or '')[:12]}")
    w(f"engine:  {r['engine_version']}, TCG {r['qemu_mode']} mode, timing model {r['timing_mode']}"
      + (f" ({r['timing_plugin']})" if r["timing_plugin"] else ""))
    if r["clock_model"]:
        w(f"clock:   {r['clock_model']}" + (f"; disk {r['disk_model']}" if r["disk_model"] else ""))
    _vcpu_clocks(con, run_id, w)
    shown = {k: v for k, v in params.items() if k != "command"}
    w("params:  " + ", ".join(f"{k}={v}" for k, v in shown.items()))
    w(f"limits:  {r['limitations']}")
    _guest_view(con, run_id, r, w)
    # the experiment's own part (experiments/<name>/results.py): its figures
    # before the per-node table, its verdict after the reclaim counters
    res = experiment_results.results(r["experiment"])
    res.figures(con, run_id, r, params, w)
    _nodes(con, run_id, r, params, w)
    _reclaim(con, run_id, w)
    res.verdict(con, run_id, r, params, w)
    _reproducer(con, run_id, w, expect_sanity=res.SANITY)
    timing_summary.render(con, run_id, w)
    table_name = res.QUERY_TABLE
    if r["ingest_errors"]:
        w(f"records: {r['ingest_errors']} malformed record line(s); see metrics ingest_error_*")
    w(f"log:     {r['log_path']}")
    w(f"query:   ./run.py query \"SELECT * FROM {table_name} WHERE run_id = {run_id}\"   (or show {run_id})")
    return "\n".join(out)


def _guest_view(con, run_id, r, w):
    rows = con.execute("SELECT src, dst, distance, expected, hops FROM guest_distances WHERE run_id = ?",
                       (run_id,)).fetchall()
    n = con.execute("SELECT COUNT(*) FROM guest_nodes WHERE run_id = ?", (run_id,)).fetchone()[0]
    if not n:
        w("guest:   no machine record (the guest did not get as far as /init)")
        return
    bad = [x for x in rows if x["distance"] != x["expected"]]
    dists = sorted({x["distance"] for x in rows})
    ok = n == r["nodes"] and not bad and len(rows) == r["nodes"] ** 2
    verdict = "matches the topology" if ok else "DOES NOT match the topology"
    w(f"guest:   saw {n} NUMA nodes, SLIT {n}x{n} with distances {dists[0]}..{dists[-1]} "
      f"(max {max(x['hops'] for x in rows)} hops): {verdict}")
    for x in bad[:5]:
        w(f"         node {x['src']} -> {x['dst']}: guest {x['distance']}, expected {x['expected']}")


def _nodes(con, run_id, r, params, w):
    mem = {}
    for x in con.execute("SELECT phase, node, field, kib FROM node_mem WHERE run_id = ? AND field IN "
                         "('MemTotal', 'MemUsed')", (run_id,)):
        mem[(x["phase"], x["node"], x["field"])] = x["kib"]
    nodes = sorted({n for (_, n, _) in mem})
    if not nodes:
        return
    # "peak": taken by the experiment itself with all its memory mapped;
    # "after" comes once it has exited and freed it. A failed or aborted run
    # may have only some of them.
    phases = [ph for ph in ("before", "peak", "after") if any(p == ph for (p, _, _) in mem)]
    minfree = {x["node"]: x["m"] for x in con.execute(
        "SELECT node, MIN(free_kib) AS m FROM node_free WHERE run_id = ? GROUP BY node", (run_id,))}
    ks = {x["node"]: x["d"] for x in con.execute(
        "SELECT a.node, a.cpu_s - b.cpu_s AS d FROM kswapd a JOIN kswapd b ON a.run_id = b.run_id AND a.node = b.node "
        "WHERE a.run_id = ? AND a.phase = 'after' AND b.phase = 'before'", (run_id,))}
    na = {}
    for x in con.execute("SELECT node, counter, delta FROM v_node_stat_delta WHERE run_id = ?", (run_id,)):
        na.setdefault(x["node"], {})[x["counter"]] = x["delta"]
    hops = hops_from_home(con, run_id, r, params)
    w(f"\nmemory per node (MiB; used = MemUsed {', '.join(phases)} the experiment; "
      "min free = lowest MemFree sampled; numa counters, pages written out by reclaim (swap) and kswapd CPU: "
      "after - before):")
    w(f"  {'node':>4} {'hops':>4} {'total':>6} " + "".join(f"{ph:>7} " for ph in phases) + f"{'min free':>8} "
      f"{'numa_hit':>9} {'miss':>7} {'foreign':>7} {'written':>7} {'kswapd s':>8}")
    quiet = []
    for n in nodes:
        used = [mem.get((ph, n, "MemUsed")) for ph in phases]
        c = na.get(n, {})
        moved = (max(abs((u or 0) - (used[0] or 0)) for u in used) > 1024 or ks.get(n, 0) > 0
                 or c.get("numa_miss", 0) > 0 or c.get("nr_vmscan_write", 0) > 0
                 or (n in minfree and (mem.get(("before", n, "MemTotal")) or 0) - (used[0] or 0) - minfree[n] > 1024))
        if not moved and len(nodes) > 12:
            quiet.append(n)
            continue
        w(f"  {n:>4} {hops.get(n, ''):>4} {_mib(mem.get(('before', n, 'MemTotal'))):>6} "
          + "".join(f"{_mib(u):>7} " for u in used) + f"{_mib(minfree.get(n)):>8} {c.get('numa_hit', 0):>9} "
          f"{c.get('numa_miss', 0):>7} {c.get('numa_foreign', 0):>7} {c.get('nr_vmscan_write', 0):>7} "
          f"{ks.get(n, 0):>8.2f}")
    if quiet:
        w(f"  {len(quiet)} other nodes changed by less than 1 MiB, no kswapd time, no numa_miss, nothing written out: "
          f"{_ranges(quiet)}")


def _ranges(nums) -> str:
    out, start, prev = [], None, None
    for n in nums:
        if start is None:
            start = prev = n
        elif n == prev + 1:
            prev = n
        else:
            out.append(f"{start}-{prev}" if prev != start else f"{start}")
            start = prev = n
    if start is not None:
        out.append(f"{start}-{prev}" if prev != start else f"{start}")
    return ", ".join(out)


def _reclaim(con, run_id, w):
    d = {x["counter"]: x["delta"] for x in con.execute(
        "SELECT counter, delta FROM v_vmstat_delta WHERE run_id = ?", (run_id,))}
    if not d:
        return
    w("\nreclaim and swap (/proc/vmstat, after - before):")
    items = [(label, d[k]) for k, label in VMSTAT_KEYS if k in d]
    for i in range(0, len(items), 3):
        w("  " + "   ".join(f"{label:>30} {v:>10}" for label, v in items[i:i + 3]))
    m = {x["name"]: x["value"] for x in con.execute(
        "SELECT name, value FROM metrics WHERE run_id = ? AND value IS NOT NULL AND "
        "(name LIKE 'swap_used_%' OR name LIKE '%.swap_peak_kib')", (run_id,))}
    sb, sa = m.get("swap_used_before"), m.get("swap_used_after")
    # the core's "peak" snapshot, or higher where an experiment sampled swap
    # during its run (<exp>.swap_peak_kib)
    peaks = [v for k, v in m.items() if k == "swap_used_peak" or k.endswith(".swap_peak_kib")]
    peak = max(peaks) if peaks else None
    w(f"  swap used: {_mib(sb)} MiB before, " + (f"{_mib(peak)} MiB at peak, " if peak is not None else "")
      + f"{_mib(sa)} MiB after")


def _reproducer(con, run_id, w, expect_sanity: bool) -> None:
    """Sanity, kswapd share and lock contention: the records any reproducer
    may send through the guest library (analysis/ingest.py)."""
    m = _metrics(con, run_id)
    peak = next((v for k, v in m.items() if k.endswith(".kswapd_share_peak")), None)
    mean = next((v for k, v in m.items() if k.endswith(".kswapd_share_mean")), None)
    if peak is not None:
        w(f"kswapd:  CPU share over the run {mean:.3f} (all nodes' kswapds; 1.0 = one CPU), "
          f"busiest node's peak interval {peak:.3f}")
    locks = con.execute("SELECT * FROM repro_lockstat WHERE run_id = ? ORDER BY phase, rank", (run_id,)).fetchall()
    if locks:
        w("\nlock_stat, most contended classes (/proc/lock_stat, cleared at the start):")
        w(f"  {'class':<44} {'contentions':>11} {'wait us':>12} {'max us':>9} {'acquisitions':>12}")
        for x in locks:
            w(f"  {x['class'][:44]:<44} {x['contentions']:>11} {x['wait_total_us']:>12.1f} "
              f"{x['wait_max_us']:>9.1f} {x['acquisitions']:>12}")
    checks = con.execute("SELECT * FROM repro_sanity WHERE run_id = ? ORDER BY rowid", (run_id,)).fetchall()
    if checks:
        ok = all(c["ok"] for c in checks)
        w(f"\nsanity:  {'PASSED' if ok else 'FAILED'} ("
          + "; ".join(f"{c['check_name']} {'ok' if c['ok'] else 'FAILED'}: {_f(c['value'], '{:g}')}, expected "
                      f"{c['expect']}" for c in checks) + ")")
    elif expect_sanity:
        w("\nsanity:  no sanity record (the reproducer did not finish)")
