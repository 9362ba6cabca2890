"""qsbench's results (seed 003): one row per sorting process (qsbench_procs),
the run's checksum and host wall time, and its part of the summary."""
from __future__ import annotations

from analysis.rows import f, insert, metric, metrics

SANITY = True  # it sends a sanity record; the summary says so when it is missing
QUERY_TABLE = "qsbench_procs"

SCHEMA = [  # versioned: append, never edit (see experiments/memeater/results.py)
    """
    CREATE TABLE IF NOT EXISTS qsbench_procs (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        proc INTEGER NOT NULL,
        elements INTEGER NOT NULL,
        fill_ms REAL,
        sort_ms REAL,
        elapsed_ms REAL,
        user_ms REAL,
        sys_ms REAL,
        majflt INTEGER,
        minflt INTEGER,
        checksum TEXT,
        unsorted INTEGER,
        PRIMARY KEY (run_id, proc)
    );
    """,
]
COLUMNS = ("proc", "elements", "fill_ms", "sort_ms", "elapsed_ms", "user_ms", "sys_ms", "majflt", "minflt",
           "checksum", "unsorted")


def ingest(con, run_id: int, parsed, topo) -> None:
    insert(con, "qsbench_procs", [{"run_id": run_id, **{c: r.body.get(c) for c in COLUMNS}}
                                  for r in parsed.of("qsbench_proc")])
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
    w(f"  {'proc':>4} {'elements':>10} {'fill s':>7} {'sort s':>8} {'user s':>7} {'sys s':>7} {'majflt':>7} checksum")
    for x in rows:
        w(f"  {x['proc']:>4} {x['elements']:>10} {x['fill_ms'] / 1e3:>7.2f} {x['sort_ms'] / 1e3:>8.2f} "
          f"{x['user_ms'] / 1e3:>7.2f} {x['sys_ms'] / 1e3:>7.2f} {x['majflt']:>7} {x['checksum']}")
    w(f"  elapsed {f(m.get('qsbench.elapsed_s'))} s guest clock (host wall {f(m.get('qsbench.host_wall_s'), '{:.1f}')}"
      f" s), user {f(m.get('qsbench.user_s'))} s, system {f(m.get('qsbench.sys_s'))} s, "
      f"{f(m.get('qsbench.majflt'), '{:.0f}')} major faults, kswapd {f(m.get('qsbench.kswapd_s'))} s; "
      f"checksum {text.get('qsbench.checksum')}")
