"""memeater's results: each chunk's first-touch time and where it landed
(chunk_times; free memory per node goes to the core's node_free), its part
of the summary (ms per chunk per cycle, fill order, the verdict on swapping
beside free nodes) and its comparison figures."""
from __future__ import annotations

import json
import statistics

from analysis import kit
from analysis.kit import RUN_ID, Column, Table, View
from analysis.rows import hops_from_home, insert, metric, mib
from protocol import facts

QUERY_TABLE = "chunk_times"

CHUNK_TIMES = Table("chunk_times", "memeater: guest time to memset each chunk, per cycle, and where its pages live.", (
    RUN_ID,
    Column("cycle", "INTEGER", not_null=True),
    Column("chunk", "INTEGER", not_null=True),
    Column("wall_ms", "REAL", "guest ms for the chunk", not_null=True),
    Column("cpu_ms", "REAL"),
    Column("t_ms", "REAL"),
    Column("minflt", "INTEGER"),
    Column("majflt", "INTEGER", "major faults during the chunk (swap-ins)"),
    Column("absent_pages", "INTEGER", field="absent"),
    Column("sampled_pages", "INTEGER", field="sampled"),
    Column("main_node", "INTEGER", "node holding most of the chunk's sampled pages"),
    Column("swap_used_kib", "INTEGER", "swap in use after the chunk, KiB"),
), key=("run_id", "cycle", "chunk"))
V_CHUNK_CYCLE = View("v_chunk_cycle", "memeater: per cycle, min / average / max ms per chunk and major faults.", """
    SELECT run_id, cycle, COUNT(*) AS chunks, MIN(wall_ms) AS min_ms, AVG(wall_ms) AS avg_ms,
           MAX(wall_ms) AS max_ms, SUM(wall_ms) AS total_ms, SUM(majflt) AS majflt
    FROM chunk_times GROUP BY run_id, cycle""")
# the guest marks instance = cycle << 32 | chunk
V_TIMING_CHUNKS = View(
    "v_timing_chunks", "memeater with the timing model: the guest's and the model's ms per chunk side by side.", f"""
    SELECT p.run_id, p.instance >> 32 AS cycle, p.instance & 4294967295 AS chunk, p.cpu,
           c.wall_ms AS guest_ms, (p.end_ps - p.begin_ps) / 1e9 AS modeled_ms, p.insns, p.misses,
           p.remote, p.stall_ps / 1e9 AS stall_ms
    FROM timing_phases p LEFT JOIN chunk_times c
      ON c.run_id = p.run_id AND c.cycle = p.instance >> 32 AND c.chunk = p.instance & 4294967295
    WHERE p.phase_id = {facts.phase_id("memeater.chunk")}""")
CYCLE_COUNTERS = ("pswpout", "pswpin", "pgscan_kswapd", "pgscan_direct", "pgsteal_kswapd", "pgsteal_direct",
                  "pgmajfault")
# 2: each cycle's time, swap and reclaim (record memeater_cycle)
MEMEATER_CYCLES = Table(
    "memeater_cycles", "memeater: each cycle's time, swap use and reclaim deltas (swap growth over cycles).", (
        RUN_ID,
        Column("cycle", "INTEGER", not_null=True),
        Column("wall_ms", "REAL", not_null=True),
        Column("swap_used_kib", "INTEGER"),
        *(Column(k, "INTEGER") for k in CYCLE_COUNTERS),
    ), key=("run_id", "cycle"), step=2)
TABLES = (CHUNK_TIMES, MEMEATER_CYCLES, V_CHUNK_CYCLE, V_TIMING_CHUNKS)
# Versioned like the core schema (analysis/schema.py): a new table, view or
# column takes the next step (analysis/kit.py). The core's first migrations
# created chunk_times and its views before experiments owned their tables;
# IF NOT EXISTS lets such databases converge with new ones.
SCHEMA = kit.schema(*TABLES)


def ingest(con, run_id: int, parsed, topo) -> None:
    for seq, r in enumerate(parsed.of("chunk")):
        b = r.body
        placement = b.get("placement", {})
        main = max(placement, key=lambda k: placement[k]) if placement else None
        CHUNK_TIMES.insert(con, CHUNK_TIMES.from_body(b, run_id=run_id,
                                                      main_node=int(main) if main is not None else None))
        insert(con, "node_free", [{"run_id": run_id, "seq": seq, "cycle": b.get("cycle"), "chunk": b.get("chunk"),
                                   "node": n, "free_kib": v} for n, v in enumerate(b.get("free_kib", []))])
    # swap used after each chunk, at its highest: the summary's swap peak
    # (`<exp>.swap_peak_kib`, beside the core's snapshots) and a compare row
    peaks = [r.body["swap_used_kib"] for r in parsed.of("chunk") if r.body.get("swap_used_kib") is not None]
    if peaks:
        metric(con, run_id, "memeater.swap_peak_kib", max(peaks), "KiB")
    MEMEATER_CYCLES.insert(con, [MEMEATER_CYCLES.from_body(r.body, run_id=run_id, **{
        k: r.body.get("vmstat", {}).get(k) for k in CYCLE_COUNTERS}) for r in parsed.of("memeater_cycle")])
    done = parsed.first("memeater_done")
    if done:
        metric(con, run_id, "memeater.total_ms", done.body.get("total_ms"), "ms")


def figures(con, run_id: int, r, params: dict, w) -> None:
    rows = con.execute("SELECT * FROM chunk_times WHERE run_id = ? ORDER BY cycle, chunk", (run_id,)).fetchall()
    if not rows:
        w("chunks:  no chunk records")
        return
    cache = con.execute("SELECT body FROM records WHERE run_id = ? AND type = 'memeater_cache'", (run_id,)).fetchone()
    if cache:
        c = json.loads(cache[0])
        free = c.get("free_kib") or []
        w(f"page cache filled first: {c.get('cache_mib')} MiB written over every node in "
          f"{c.get('write_ms', 0) / 1e3:.2f} s (Cached {mib(c.get('file_kib'))} MiB); then "
          f"{mib(min(free)) if free else '?'}-{mib(max(free)) if free else '?'} MiB free per node")
    w(f"\nms per chunk of {params.get('chunk_mib')} MiB (guest clock), per cycle:")
    cycles = sorted({x["cycle"] for x in rows})
    table = []
    for c in cycles:
        xs = [x for x in rows if x["cycle"] == c]
        ms = [x["wall_ms"] for x in xs]
        table.append([c, f"{min(ms):.2f}", f"{statistics.median(ms):.2f}", f"{max(ms):.2f}", f"{sum(ms):.1f}",
                      sum(x["majflt"] or 0 for x in xs), mib(xs[-1]["swap_used_kib"])])
    for line in kit.text_table(["cycle", "min", "median", "max", "total", "majflt", "swap MiB"], table):
        w("  " + line)
    for c in cycles:
        ms = [x["wall_ms"] for x in rows if x["cycle"] == c]
        for i in range(0, len(ms), 16):
            w(f"  c{c} #{i:<3} " + " ".join(f"{v:6.1f}" for v in ms[i:i + 16]))
    # Fill order: the node that held most sampled pages of each chunk, first cycle.
    runs = []
    for x in (x for x in rows if x["cycle"] == cycles[0]):
        node = x["main_node"]
        if runs and runs[-1][0] == node:
            runs[-1][2] = x["chunk"]
        else:
            runs.append([node, x["chunk"], x["chunk"]])
    hops = hops_from_home(con, run_id, r, params)
    parts = [f"node {n}" + (f" ({hops.get(n, '?')} hops)" if n is not None else "") + f": {a}"
             + (f"-{b}" if b != a else "") for n, a, b in runs]
    w(f"fill:    where each chunk landed in cycle {cycles[0]} (node: chunks): " + "; ".join(parts[:24])
      + (" ..." if len(parts) > 24 else ""))
    absent = [x for x in rows if x["absent_pages"]]
    if absent:
        w(f"         {len(absent)} chunk samples had pages not resident (swapped out) right after their memset")


def verdict(con, run_id: int, r, params: dict, w) -> None:
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
      f"than 16 MiB free ({mib(free[0])} MiB in all): the seed's pathology"
      if free[1] else
      f"  verdict: swapping began at cycle {cyc}, chunk {ch}, once every node was nearly full (expected)")


def compare_figures(con, run_id: int) -> dict[str, tuple[float, str]]:
    out = {}
    c = con.execute("SELECT COUNT(*), SUM(wall_ms), MAX(wall_ms), SUM(majflt) "
                    "FROM chunk_times WHERE run_id = ?", (run_id,)).fetchone()
    if c[0]:
        out["chunks.total_ms"] = (float(c[1]), "ms")
        out["chunks.max_ms"] = (float(c[2]), "ms")
        if c[3] is not None:
            out["chunks.majflt"] = (float(c[3]), "")
    return out  # the swap peak is a metric (memeater.swap_peak_kib), which compare lists itself
