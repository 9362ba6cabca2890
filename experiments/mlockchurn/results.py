"""mlockchurn's results (seed 000): each chunk's mlock time with reclaim
beside it (mlockchurn_chunks; free memory per node goes to the core's
node_free, beside memeater's) and its part of the summary."""
from __future__ import annotations

import statistics

from analysis import kit
from analysis.kit import RUN_ID, Column, Table
from analysis.rows import f, insert, metrics

SANITY = True  # it sends a sanity record; the summary says so when it is missing
QUERY_TABLE = "mlockchurn_chunks"

CHUNKS = Table("mlockchurn_chunks", "mlockchurn: each file chunk mapped over a slot and mlocked in 1 MiB steps: times, "
               "faults, kswapd CPU and reclaim counters.", (
                   RUN_ID,
                   Column("chunk", "INTEGER", not_null=True),
                   Column("slot", "INTEGER", not_null=True),
                   Column("steps", "INTEGER"),
                   Column("ok", "INTEGER"),
                   Column("mlock_ms", "REAL", not_null=True),
                   Column("step_median_ms", "REAL"),
                   Column("step_max_ms", "REAL"),
                   Column("wall_ms", "REAL"),
                   Column("t_ms", "REAL"),
                   Column("majflt", "INTEGER"),
                   Column("minflt", "INTEGER"),
                   Column("kswapd_s", "REAL"),
                   Column("pgscan_kswapd", "INTEGER"),
                   Column("pgscan_direct", "INTEGER"),
                   Column("pgsteal_kswapd", "INTEGER"),
                   Column("pgsteal_direct", "INTEGER"),
                   # the seed's CPU over ideal: the program's CPU time and the machine's busy time per chunk
                   Column("cpu_ms", "REAL", "the program's CPU time over the chunk (user + system, getrusage)",
                          step=2),
                   Column("busy_ms", "REAL", "the machine's busy CPU time over the chunk (/proc/stat, all CPUs: "
                          "kswapd included)", step=2),
               ), key=("run_id", "chunk"))
TABLES = (CHUNKS,)
SCHEMA = kit.schema(*TABLES)  # versioned: a new table or column takes the next step (analysis/kit.py)


def ingest(con, run_id: int, parsed, topo) -> None:
    for r in parsed.of("mlock_chunk"):
        b = r.body
        CHUNKS.insert(con, CHUNKS.from_body(b, run_id=run_id))
        insert(con, "node_free", [{"run_id": run_id, "seq": b.get("chunk"), "cycle": None, "chunk": b.get("chunk"),
                                   "node": n, "free_kib": v} for n, v in enumerate(b.get("free_kib", []))])


def figures(con, run_id: int, r, params: dict, w) -> None:
    rows = con.execute("SELECT * FROM mlockchurn_chunks WHERE run_id = ? ORDER BY chunk", (run_id,)).fetchall()
    if not rows:
        w("mlock:   no chunk records")
        return
    slot = params.get("slot_mib")
    w(f"\nmlock of each {slot} MiB file chunk over a slot, in {params.get('step_kib')} KiB steps (guest clock):")
    table = [[x["chunk"], x["slot"], f"{x['mlock_ms'] / 1e3:.2f}", f"{x['mlock_ms'] / slot:.2f}",
              f"{x['step_max_ms']:.1f}", x["majflt"], f"{x['kswapd_s']:.2f}",
              (x["pgscan_kswapd"] or 0) + (x["pgscan_direct"] or 0),
              (x["pgsteal_kswapd"] or 0) + (x["pgsteal_direct"] or 0)] for x in rows]
    for line in kit.text_table(["chunk", "slot", "mlock s", "ms/MiB", "max step ms", "majflt", "kswapd s", "scanned",
                                "reclaimed"], table):
        w("  " + line)
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
    if m.get("mlockchurn.machine_busy_s") is not None:
        w(f"  CPU over the chunks: the program {f(m.get('mlockchurn.cpu_s'))} s (user + system), the machine "
          f"{f(m.get('mlockchurn.machine_busy_s'))} CPU-s busy (kswapd and all; the seed: 95 % more than it should)")
    if m.get("mlockchurn.sleep_s"):
        w(f"  then {m['mlockchurn.sleep_s']:.1f} s asleep with everything locked: the busiest node's kswapd at "
          f"{f(m.get('mlockchurn.kswapd_sleeping_busiest'), '{:.2f}')} CPU, all together "
          f"{f(m.get('mlockchurn.kswapd_sleeping_all'), '{:.2f}')} (the seed: 100 % while its program slept)")
