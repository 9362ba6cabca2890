"""What a researcher reads: the run summary (built from the database only, so
`show` prints the same thing later), live progress, and plain tables/CSV."""
from __future__ import annotations

import csv
import io
import json
import statistics
import sys
import tomllib

import experiments
from analysis import reproducers
from analysis import timing as timing_summary

VMSTAT_KEYS = [
    ("pgfault", "page faults"), ("pgmajfault", "major faults"),
    ("pgscan_kswapd", "scanned by kswapd"), ("pgscan_direct", "scanned by direct reclaim"),
    ("pgsteal_kswapd", "reclaimed by kswapd"), ("pgsteal_direct", "reclaimed by direct reclaim"),
    ("pswpin", "swapped in (pages)"), ("pswpout", "swapped out (pages)"),
    ("allocstall_normal", "direct reclaim stalls (Normal)"), ("allocstall_dma32", "direct reclaim stalls (DMA32)"),
    ("zone_reclaim_failed", "zone reclaim failures"), ("numa_hit", "numa_hit"), ("numa_miss", "numa_miss"),
    ("numa_foreign", "numa_foreign"), ("numa_local", "numa_local"), ("numa_other", "numa_other"),
    ("numa_pages_migrated", "pages migrated by NUMA balancing"), ("thp_fault_alloc", "THP faults"),
    ("thp_fault_fallback", "THP fallbacks"),
]


def dumps(obj) -> str:
    return json.dumps(obj, sort_keys=True)


def limitations(topo, qemu_mode: str, timing: str, swap_dev: str = "", data_dev: str = "",
                stalls_on: bool = True, disk_modeled: bool = False) -> str:
    out = [f"memory scaled: {topo.memory_mib} MiB per node stands for {topo.real_memory_gib:g} GiB "
           f"(scale 1/{round(1 / topo.scale)})"]
    if topo.guest_isa != topo.native_isa:
        out.append(f"guest ISA {topo.guest_isa} substituted for the machine's {topo.native_isa}")
    if topo.guest_isa == "alpha":
        out.append("Alpha guest (native ISA, QEMU clipper): no NUMA (Linux removed Alpha NUMA in 5.14), "
                   "one node of at most 4 CPUs; no transparent huge pages; NUMA and THP knobs do not apply")
    if timing == "off":
        out.append("no memory-system model: guest time counts instructions only (1 per cycle), no cache, "
                   "remote-memory or lock latency")
    else:
        stalls = "its stalls are charged to the vCPU clocks, so the guest feels them" if (
            timing == "detailed" and qemu_mode == "icount" and stalls_on) else \
            "the guest does not feel its latencies (reported beside the guest's figures)"
        out.append(f"timing model {timing}: {stalls}"
                   + ("; private L1D/L2, MESI directory, hops and queueing modeled, instruction fetch "
                      "as L1I hits at 1 instruction per cycle" if timing == "detailed" else
                      "; instruction counts and basic-block vectors only"))
    if qemu_mode == "icount":
        out.append("guest time = per-vCPU clocks (instructions at the topology clock + stalls), interleaved in a "
                   "quantum; a plain store by one vCPU can be seen by another up to a quantum late"
                   + ("; swap disk I/O completes in host time, so the run repeats only up to disk timing, "
                      "and disk latency is not modeled" if swap_dev.startswith("/dev/") and not disk_modeled
                      else "; deterministic"))
    else:
        out.append("guest time follows the host clock (MTTCG): not repeatable")
    if data_dev and not disk_modeled:
        out.append("data disk (ext2 on virtio-blk): its I/O completes in host time and its latency is not "
                   "modeled, so IO durations are TCG's, not a disk's")
    if disk_modeled and (data_dev or swap_dev.startswith("/dev/")):
        out.append("disks complete at a modeled guest time (latency + bytes at the model's rate, FIFO per "
                   "server): no seek distance, caching or request reordering inside the disk")
    return "; ".join(out)


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
            msg = f"guest up: {len(r.body.get('nodes', []))} nodes, CPUs {r.body.get('cpus_online')}, {r.body.get('release')}"
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
def _mib(kib) -> str:
    return "" if kib is None else f"{kib / 1024:.1f}"


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
    # the row keeps the topology file as it was parsed for the run
    w(f"machine: {tomllib.loads(r['topology_toml']).get('description', '')}")
    w(f"         {r['nodes']} nodes ({r['topology_shape']}), {r['cpus']} CPUs, {r['memory_mib_per_node']} MiB/node "
      f"= {r['nodes'] * r['memory_mib_per_node']} MiB, scale 1/{round(1 / r['scale'])}; guest {r['guest_isa']}"
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
    figures, verdict, table_name = EXPERIMENTS.get(r["experiment"], (None, None, "records"))
    if figures:
        figures(con, run_id, r, params, w)
    if r["experiment"] == "latprobe":
        timing_summary.render_latprobe(con, run_id, w)
    _nodes(con, run_id, r, params, w)
    _reclaim(con, run_id, w)
    if verdict:
        verdict(con, run_id, w)
    timing_summary.render(con, run_id, w)
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


def _memeater(con, run_id, r, params, w):
    rows = con.execute("SELECT * FROM chunk_times WHERE run_id = ? ORDER BY cycle, chunk", (run_id,)).fetchall()
    if not rows:
        w("chunks:  no chunk records")
        return
    w(f"\nms per chunk of {params.get('chunk_mib')} MiB (guest clock), per cycle:")
    w(f"  {'cycle':>5} {'min':>8} {'median':>8} {'max':>8} {'total':>9} {'majflt':>7} {'swap MiB':>9}")
    cycles = sorted({x["cycle"] for x in rows})
    for c in cycles:
        xs = [x for x in rows if x["cycle"] == c]
        ms = [x["wall_ms"] for x in xs]
        w(f"  {c:>5} {min(ms):>8.2f} {statistics.median(ms):>8.2f} {max(ms):>8.2f} {sum(ms):>9.1f} "
          f"{sum(x['majflt'] or 0 for x in xs):>7} {_mib(xs[-1]['swap_used_kib']):>9}")
    for c in cycles:
        ms = [x["wall_ms"] for x in rows if x["cycle"] == c]
        for i in range(0, len(ms), 16):
            w(f"  c{c} #{i:<3} " + " ".join(f"{v:6.1f}" for v in ms[i:i + 16]))
    # Fill order: the node that held most sampled pages of each chunk, first cycle.
    first = [x for x in rows if x["cycle"] == cycles[0]]
    runs = []
    for x in first:
        node = x["main_node"]
        if runs and runs[-1][0] == node:
            runs[-1][2] = x["chunk"]
        else:
            runs.append([node, x["chunk"], x["chunk"]])
    hops = _hops_from_home(con, run_id, r, params)
    parts = [f"node {n}" + (f" ({hops.get(n, '?')} hops)" if n is not None else "") + f": {a}" + (f"-{b}" if b != a else "")
             for n, a, b in runs]
    w(f"fill:    where each chunk landed in cycle {cycles[0]} (node: chunks): " + "; ".join(parts[:24])
      + (" ..." if len(parts) > 24 else ""))
    absent = [(x["cycle"], x["chunk"], x["absent_pages"]) for x in rows if x["absent_pages"]]
    if absent:
        w(f"         {len(absent)} chunk samples had pages not resident (swapped out) right after their memset")


def _hops_from_home(con, run_id, r, params) -> dict:
    cpu = params.get("cpu", -1)
    if cpu is None or cpu < 0:
        return {}
    home = cpu // (r["cpus"] // r["nodes"])
    return {x["dst"]: x["hops"] for x in con.execute(
        "SELECT dst, hops FROM guest_distances WHERE run_id = ? AND src = ?", (run_id, home))}


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
    hops = _hops_from_home(con, run_id, r, params)
    w(f"\nmemory per node (MiB; used = MemUsed {', '.join(phases)} the experiment; "
      "min free = lowest MemFree sampled; numa counters, pages written out by reclaim (swap) and kswapd CPU: "
      "after - before):")
    w(f"  {'node':>4} {'hops':>4} {'total':>6} " + "".join(f"{ph:>7} " for ph in phases) + f"{'min free':>8} "
      f"{'numa_hit':>9} {'miss':>7} {'foreign':>7} {'written':>7} {'kswapd s':>8}")
    quiet = []
    for n in nodes:
        used = [mem.get((ph, n, "MemUsed")) for ph in phases]
        c = na.get(n, {})
        moved = (max(abs((u or 0) - (used[0] or 0)) for u in used) > 1024 or ks.get(n, 0) > 0 or c.get("numa_miss", 0) > 0
                 or c.get("nr_vmscan_write", 0) > 0 or (n in minfree and (mem.get(("before", n, "MemTotal")) or 0)
                                         - (used[0] or 0) - minfree[n] > 1024))
        if not moved and len(nodes) > 12:
            quiet.append(n)
            continue
        w(f"  {n:>4} {hops.get(n, ''):>4} {_mib(mem.get(('before', n, 'MemTotal'))):>6} "
          + "".join(f"{_mib(u):>7} " for u in used) + f"{_mib(minfree.get(n)):>8} {c.get('numa_hit', 0):>9} "
          f"{c.get('numa_miss', 0):>7} {c.get('numa_foreign', 0):>7} {c.get('nr_vmscan_write', 0):>7} {ks.get(n, 0):>8.2f}")
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
        "SELECT name, value FROM metrics WHERE run_id = ? AND name LIKE 'swap_used_%'", (run_id,))}
    sb, sa = m.get("swap_used_before"), m.get("swap_used_after")
    peak = con.execute("SELECT MAX(swap_used_kib) FROM chunk_times WHERE run_id = ?", (run_id,)).fetchone()[0]
    peak = m.get("swap_used_peak") if peak is None else max(peak, m.get("swap_used_peak") or 0)
    w(f"  swap used: {_mib(sb)} MiB before, " + (f"{_mib(peak)} MiB at peak, " if peak is not None else "")
      + f"{_mib(sa)} MiB after")


def _memeater_verdict(con, run_id, w):
    d = {x["counter"]: x["delta"] for x in con.execute(
        "SELECT counter, delta FROM v_vmstat_delta WHERE run_id = ?", (run_id,))}
    if not d:
        return
    first = con.execute("SELECT cycle, chunk FROM chunk_times WHERE run_id = ? AND swap_used_kib > 0 "
                        "ORDER BY cycle, chunk LIMIT 1", (run_id,)).fetchone()
    if first is None:
        w(f"  verdict: no swapping; the working set stayed resident (pswpout {d.get('pswpout', 0)})")
        return
    cyc, ch = first
    free = con.execute("SELECT SUM(free_kib), COUNT(*) FROM node_free WHERE run_id = ? AND cycle = ? AND chunk = ? "
                       "AND free_kib > 16384", (run_id, cyc, ch)).fetchone()
    w(f"  verdict: SWAPPING began at cycle {cyc}, chunk {ch}, while {free[1]} nodes still had more "
      f"than 16 MiB free ({_mib(free[0])} MiB in all): the seed's pathology"
      if free[1] else
      f"  verdict: swapping began at cycle {cyc}, chunk {ch}, once every node was nearly full (expected)")


# Each experiment's part of the summary: its figures (before the per-node
# table), its verdict (after the reclaim counters) and the table to query.
EXPERIMENTS = {
    "memeater": (_memeater, _memeater_verdict, "chunk_times"),
    "mlockchurn": (reproducers.render_mlockchurn, reproducers.render_common, "mlockchurn_chunks"),
    "kvio": (reproducers.render_kvio, reproducers.render_common, "kvio_levels"),
    "forkstorm": (reproducers.render_forkstorm, reproducers.render_common, "forkstorm_ticks"),
    "qsbench": (reproducers.render_qsbench, reproducers.render_common, "qsbench_procs"),
}
