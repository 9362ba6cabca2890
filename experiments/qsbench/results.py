"""qsbench's results (seed 003): one row per sorting process (qsbench_procs),
the run's checksum and host wall time, and its part of the summary."""
from __future__ import annotations

from analysis import kit
from analysis.kit import RUN_ID, Column, Table
from analysis.rows import f, metric, metrics

SANITY = True  # it sends a sanity record; the summary says so when it is missing
QUERY_TABLE = "qsbench_procs"

PROCS = Table("qsbench_procs", "qsbench: each sorting process's times, faults and checksum.", (
    RUN_ID,
    Column("proc", "INTEGER", not_null=True),
    Column("elements", "INTEGER", not_null=True),
    Column("fill_ms", "REAL"),
    Column("sort_ms", "REAL"),
    Column("elapsed_ms", "REAL"),
    Column("user_ms", "REAL"),
    Column("sys_ms", "REAL"),
    Column("majflt", "INTEGER"),
    Column("minflt", "INTEGER"),
    Column("checksum", "TEXT"),
    Column("unsorted", "INTEGER"),
), key=("run_id", "proc"))
TABLES = (PROCS,)
SCHEMA = kit.schema(*TABLES)  # versioned: a new table or column takes the next step (analysis/kit.py)


def ingest(con, run_id: int, parsed, topo) -> None:
    PROCS.insert(con, [PROCS.from_body(r.body, run_id=run_id) for r in parsed.of("qsbench_proc")])
    start, done = parsed.first("qsbench_start"), parsed.first("qsbench_done")
    if done:
        metric(con, run_id, "qsbench.checksum", text=done.body.get("checksum"))
    # the host's own view: wall seconds between the two records' arrival
    if start and done and start.host_s is not None and done.host_s is not None:
        metric(con, run_id, "qsbench.host_wall_s", round(done.host_s - start.host_s, 3), "s")


def figures(con, run_id: int, r, params: dict, w) -> None:
    rows = con.execute("SELECT * FROM qsbench_procs WHERE run_id = ? ORDER BY proc", (run_id,)).fetchall()
    if not rows:
        w("qsbench: no process records")
        return
    m = metrics(con, run_id)
    text = dict(con.execute("SELECT name, text FROM metrics WHERE run_id = ? AND text IS NOT NULL",
                            (run_id,)).fetchall())
    w(f"\nqsbench: {params.get('array_mib')} MiB of random ints in {params.get('procs')} process(es), "
      f"seed {params.get('qs_seed')}:")
    table = [[x["proc"], x["elements"], f"{x['fill_ms'] / 1e3:.2f}", f"{x['sort_ms'] / 1e3:.2f}",
              f"{x['user_ms'] / 1e3:.2f}", f"{x['sys_ms'] / 1e3:.2f}", x["majflt"], x["checksum"]] for x in rows]
    for line in kit.text_table(["proc", "elements", "fill s", "sort s", "user s", "sys s", "majflt", "checksum"],
                               table, left={7}):
        w("  " + line)
    w(f"  elapsed {f(m.get('qsbench.elapsed_s'))} s guest clock (host wall {f(m.get('qsbench.host_wall_s'), '{:.1f}')}"
      f" s), user {f(m.get('qsbench.user_s'))} s, system {f(m.get('qsbench.sys_s'))} s, "
      f"{f(m.get('qsbench.majflt'), '{:.0f}')} major faults, kswapd {f(m.get('qsbench.kswapd_s'))} s; "
      f"checksum {text.get('qsbench.checksum')}")
