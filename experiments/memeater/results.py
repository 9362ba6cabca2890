"""memeater's results: each chunk's first-touch time and where it landed
(chunk_times; free memory per node goes to the core's node_free), its part
of the summary (ms per chunk per cycle, fill order, the verdict on swapping
beside free nodes) and its comparison figures."""
from __future__ import annotations

import statistics

from analysis.rows import hops_from_home, insert, metric, mib
from protocol import facts

QUERY_TABLE = "chunk_times"

# Versioned like the core schema (analysis/schema.py): append, never edit. The
# core's first migrations created these before experiments owned their
# tables; IF NOT EXISTS lets such databases converge with new ones.
SCHEMA = [
    f"""
    CREATE TABLE IF NOT EXISTS chunk_times (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        cycle INTEGER NOT NULL,
        chunk INTEGER NOT NULL,
        wall_ms REAL NOT NULL,
        cpu_ms REAL,
        t_ms REAL,
        minflt INTEGER,
        majflt INTEGER,
        absent_pages INTEGER,
        sampled_pages INTEGER,
        main_node INTEGER,
        swap_used_kib INTEGER,
        PRIMARY KEY (run_id, cycle, chunk)
    );
    CREATE VIEW IF NOT EXISTS v_chunk_cycle AS
        SELECT run_id, cycle, COUNT(*) AS chunks, MIN(wall_ms) AS min_ms, AVG(wall_ms) AS avg_ms,
               MAX(wall_ms) AS max_ms, SUM(wall_ms) AS total_ms, SUM(majflt) AS majflt
        FROM chunk_times GROUP BY run_id, cycle;
    -- the guest's own clock beside the model's time (the guest marks
    -- instance = cycle << 32 | chunk)
    CREATE VIEW IF NOT EXISTS v_timing_chunks AS
        SELECT p.run_id, p.instance >> 32 AS cycle, p.instance & 4294967295 AS chunk, p.cpu,
               c.wall_ms AS guest_ms, (p.end_ps - p.begin_ps) / 1e9 AS modeled_ms, p.insns, p.misses,
               p.remote, p.stall_ps / 1e9 AS stall_ms
        FROM timing_phases p LEFT JOIN chunk_times c
          ON c.run_id = p.run_id AND c.cycle = p.instance >> 32 AND c.chunk = p.instance & 4294967295
        WHERE p.phase_id = {facts.phase_id("memeater.chunk")};
    """,
    # 2: each cycle's time, swap and reclaim (record memeater_cycle)
    """
    CREATE TABLE IF NOT EXISTS memeater_cycles (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        cycle INTEGER NOT NULL,
        wall_ms REAL NOT NULL,
        swap_used_kib INTEGER,
        pswpout INTEGER,
        pswpin INTEGER,
        pgscan_kswapd INTEGER,
        pgscan_direct INTEGER,
        pgsteal_kswapd INTEGER,
        pgsteal_direct INTEGER,
        pgmajfault INTEGER,
        PRIMARY KEY (run_id, cycle)
    );
    """,
]
CYCLE_COUNTERS = ("pswpout", "pswpin", "pgscan_kswapd", "pgscan_direct", "pgsteal_kswapd", "pgsteal_direct",
                  "pgmajfault")


def ingest(con, run_id: int, parsed, topo) -> None:
    for seq, r in enumerate(parsed.of("chunk")):
        b = r.body
        placement = b.get("placement", {})
        main = max(placement, key=lambda k: placement[k]) if placement else None
        insert(con, "chunk_times", {
            "run_id": run_id, "cycle": b.get("cycle"), "chunk": b.get("chunk"), "wall_ms": b.get("wall_ms"),
            "cpu_ms": b.get("cpu_ms"), "t_ms": b.get("t_ms"), "minflt": b.get("minflt"), "majflt": b.get("majflt"),
            "absent_pages": b.get("absent"), "sampled_pages": b.get("sampled"),
            "main_node": int(main) if main is not None else None, "swap_used_kib": b.get("swap_used_kib")})
        insert(con, "node_free", [{"run_id": run_id, "seq": seq, "cycle": b.get("cycle"), "chunk": b.get("chunk"),
                                   "node": n, "free_kib": v} for n, v in enumerate(b.get("free_kib", []))])
    # swap used after each chunk, at its highest: the summary's swap peak
    # (`<exp>.swap_peak_kib`, beside the core's snapshots) and a compare row
    peaks = [r.body["swap_used_kib"] for r in parsed.of("chunk") if r.body.get("swap_used_kib") is not None]
    if peaks:
        metric(con, run_id, "memeater.swap_peak_kib", max(peaks), "KiB")
    insert(con, "memeater_cycles", [{"run_id": run_id, "cycle": r.body.get("cycle"), "wall_ms": r.body.get("wall_ms"),
                                     "swap_used_kib": r.body.get("swap_used_kib"),
                                     **{k: r.body.get("vmstat", {}).get(k) for k in CYCLE_COUNTERS}}
                                    for r in parsed.of("memeater_cycle")])
    done = parsed.first("memeater_done")
    if done:
        metric(con, run_id, "memeater.total_ms", done.body.get("total_ms"), "ms")


def figures(con, run_id: int, r, params: dict, w) -> None:
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
          f"{sum(x['majflt'] or 0 for x in xs):>7} {mib(xs[-1]['swap_used_kib']):>9}")
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
