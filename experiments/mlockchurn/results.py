"""mlockchurn's results (seed 000): each chunk's mlock time with reclaim
beside it (mlockchurn_chunks; free memory per node goes to the core's
node_free, beside memeater's) and its part of the summary."""
from __future__ import annotations

import statistics

from analysis.rows import f, insert, metrics

SANITY = True  # it sends a sanity record; the summary says so when it is missing
QUERY_TABLE = "mlockchurn_chunks"

SCHEMA = [  # versioned: append, never edit (see experiments/memeater/results.py)
    """
    CREATE TABLE IF NOT EXISTS mlockchurn_chunks (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        chunk INTEGER NOT NULL,
        slot INTEGER NOT NULL,
        steps INTEGER,
        ok INTEGER,
        mlock_ms REAL NOT NULL,
        step_median_ms REAL,
        step_max_ms REAL,
        wall_ms REAL,
        t_ms REAL,
        majflt INTEGER,
        minflt INTEGER,
        kswapd_s REAL,
        pgscan_kswapd INTEGER,
        pgscan_direct INTEGER,
        pgsteal_kswapd INTEGER,
        pgsteal_direct INTEGER,
        PRIMARY KEY (run_id, chunk)
    );
    """,
]
COLUMNS = ("chunk", "slot", "steps", "ok", "mlock_ms", "step_median_ms", "step_max_ms", "wall_ms", "t_ms", "majflt",
           "minflt", "kswapd_s", "pgscan_kswapd", "pgscan_direct", "pgsteal_kswapd", "pgsteal_direct")


def ingest(con, run_id: int, parsed, topo) -> None:
    for r in parsed.of("mlock_chunk"):
        b = r.body
        insert(con, "mlockchurn_chunks", {"run_id": run_id, **{c: b.get(c) for c in COLUMNS}})
        insert(con, "node_free", [{"run_id": run_id, "seq": b.get("chunk"), "cycle": None, "chunk": b.get("chunk"),
                                   "node": n, "free_kib": v} for n, v in enumerate(b.get("free_kib", []))])


def figures(con, run_id: int, r, params: dict, w) -> None:
    rows = con.execute("SELECT * FROM mlockchurn_chunks WHERE run_id = ? ORDER BY chunk", (run_id,)).fetchall()
    if not rows:
        w("mlock:   no chunk records")
        return
    slot = params.get("slot_mib")
    w(f"\nmlock of each {slot} MiB file chunk over a slot, in {params.get('step_kib')} KiB steps (guest clock):")
    w(f"  {'chunk':>5} {'slot':>4} {'mlock s':>8} {'ms/MiB':>7} {'max step ms':>11} {'majflt':>7} "
      f"{'kswapd s':>8} {'scanned':>9} {'reclaimed':>9}")
    for x in rows:
        scan = (x["pgscan_kswapd"] or 0) + (x["pgscan_direct"] or 0)
        steal = (x["pgsteal_kswapd"] or 0) + (x["pgsteal_direct"] or 0)
        w(f"  {x['chunk']:>5} {x['slot']:>4} {x['mlock_ms'] / 1e3:>8.2f} {x['mlock_ms'] / slot:>7.2f} "
          f"{x['step_max_ms']:>11.1f} {x['majflt']:>7} {x['kswapd_s']:>8.2f} {scan:>9} {steal:>9}")
    m = metrics(con, run_id)
    first = [x["mlock_ms"] for x in rows[:params.get("slots", 1)]]
    later = [x["mlock_ms"] for x in rows[params.get("slots", 1):]]
    if first and later:
        w(f"  first {len(first)} chunk(s) (free memory) {statistics.mean(first) / 1e3:.2f} s per mlock, "
          f"the {len(later)} after (recycling) {statistics.mean(later) / 1e3:.2f} s")
    w(f"  reclaim: {f(m.get('mlockchurn.pgscan'), '{:.0f}')} pages scanned, "
      f"{f(m.get('mlockchurn.pgsteal'), '{:.0f}')} reclaimed (efficiency "
      f"{f(m.get('mlockchurn.reclaim_efficiency'))}); kswapd CPU over the chunks "
      f"{f(m.get('mlockchurn.kswapd_cpu_share'), '{:.3f}')} CPUs, all {r['nodes']} nodes' kswapds together "
      f"(the seed's storm: its one kswapd at 100 %, 1.0; per node see the peak below)")
    if m.get("mlockchurn.sleep_s"):
        w(f"  then {m['mlockchurn.sleep_s']:.1f} s asleep with everything locked: the busiest node's kswapd at "
          f"{f(m.get('mlockchurn.kswapd_sleeping_busiest'), '{:.2f}')} CPU, all together "
          f"{f(m.get('mlockchurn.kswapd_sleeping_all'), '{:.2f}')} (the seed: 100 % while its program slept)")
