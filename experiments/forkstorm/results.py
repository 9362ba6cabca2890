"""forkstorm's results (seed 002): jobs per interval (forkstorm_ticks), jobs
per worker, the seed's lock classes as metrics, and its part of the summary."""
from __future__ import annotations

from analysis import kit
from analysis.kit import RUN_ID, Column, Table
from analysis.rows import metric

SANITY = True  # it sends a sanity record; the summary says so when it is missing
QUERY_TABLE = "forkstorm_ticks"

TICKS = Table("forkstorm_ticks", "forkstorm: jobs done, swap and scanning sampled over the storm.", (
    RUN_ID,
    Column("seq", "INTEGER", not_null=True),
    Column("t_ms", "REAL", not_null=True),
    Column("jobs", "INTEGER", not_null=True),
    Column("live_workers", "INTEGER"),
    Column("pswpout", "INTEGER"),
    Column("pgscan", "INTEGER"),
    Column("kswapd_s", "REAL"),
), key=("run_id", "seq"))
WORKERS = Table("forkstorm_workers", "forkstorm: jobs per worker process.", (
    RUN_ID,
    Column("worker", "INTEGER", not_null=True),
    Column("jobs", "INTEGER", not_null=True),
), key=("run_id", "worker"))
TABLES = (TICKS, WORKERS)
SCHEMA = kit.schema(*TABLES)  # versioned: a new table or column takes the next step (analysis/kit.py)


def ingest(con, run_id: int, parsed, topo) -> None:
    for r in parsed.of("forkstorm_tick"):
        b, v = r.body, r.body.get("vmstat", {})
        TICKS.insert(con, TICKS.from_body(b, run_id=run_id, pswpout=v.get("pswpout"),
                                          pgscan=(v.get("pgscan_kswapd") or 0) + (v.get("pgscan_direct") or 0)))
    done = parsed.first("forkstorm_done")
    if done:
        WORKERS.insert(con, [{"run_id": run_id, "worker": w, "jobs": j}
                             for w, j in enumerate(done.body.get("per_worker", []))])
        for lock, c in (done.body.get("locks") or {}).items():
            metric(con, run_id, f"forkstorm.lock_contentions.{lock}", c.get("contentions"), "contentions")


def figures(con, run_id: int, r, params: dict, w) -> None:
    done = kit.bodies(con, run_id, "forkstorm_done")
    if not done:
        w("storm:   no forkstorm_done record")
        return
    b = done[0]
    v = b.get("vmstat", {})
    busy = (b.get("user_s") or 0) + (b.get("sys_s") or 0)
    family = params.get("family_mib") or 0
    w(f"\nfork storm: {params.get('workers')} workers x {params.get('children')} children over "
      f"{params.get('region_mib')} MiB regions each"
      + (f" and a {family} MiB region every process inherits" if family else "")
      + f", {b.get('elapsed_ms', 0) / 1e3:.1f} guest s:")
    w(f"  {b.get('jobs')} jobs = {b.get('jobs_per_min', 0):.0f} jobs/min; CPU time (/proc/stat) user "
      f"{b.get('user_s', 0):.2f} s, system {b.get('sys_s', 0):.2f} s"
      + (f" ({100 * b.get('sys_s', 0) / busy:.0f} % of busy time)" if busy else "")
      + f", idle {b.get('idle_s', 0):.2f} s; kswapd {b.get('kswapd_s', 0):.2f} s")
    w(f"  reclaim during the storm: swapped out {v.get('pswpout')}, in {v.get('pswpin')}, scanned "
      f"{(v.get('pgscan_kswapd') or 0) + (v.get('pgscan_direct') or 0)}, major faults {v.get('pgmajfault')}")
    w(f"  jobs per worker: {' '.join(str(j) for j in b.get('per_worker', []))}")
    locks = b.get("locks")
    if locks:
        w("  lock classes of the seed (contentions, wait us): " + "; ".join(
            f"{k} {c.get('contentions')}, {c.get('wait_total_us', 0):.0f}" for k, c in locks.items()))
    else:
        w("  lock contention: not measured (kernel without LOCK_STAT; run with --flavor lockstat)")
