"""kvio's results (seed 001): per background-IO level, the key-value store's
ops/s beside the reclaim counters of Mel Gorman's mmtests table (kvio_levels),
and its part of the summary."""
from __future__ import annotations

from analysis import kit
from analysis.kit import RUN_ID, Column, Table
from analysis.rows import f, metric, ratio

SANITY = True  # it sends a sanity record; the summary says so when it is missing
QUERY_TABLE = "kvio_levels"

# The seed's table for kvio (Mel Gorman's mmtests report), per IO level.
COUNTERS = ("pswpin", "pswpout", "pgmajfault", "pgfault", "pgscan_kswapd", "pgsteal_kswapd",
            "pgscan_direct", "pgsteal_direct")

LEVELS = Table("kvio_levels", "kvio: the key-value service's ops/s at each background IO level, with swap and "
               "reclaim counters (seed 001's table).", (
                   RUN_ID,
                   Column("level", "INTEGER", not_null=True),
                   Column("io_frac", "REAL", not_null=True),
                   Column("io_mib", "INTEGER", "MiB written by dd in the background", not_null=True),
                   Column("io_ok", "INTEGER"),
                   Column("io_s", "REAL"),
                   Column("ops", "INTEGER"),
                   Column("elapsed_s", "REAL"),
                   Column("ops_per_s", "REAL", "service operations per guest second", field="ops_s"),
                   Column("kswapd_s", "REAL"),
                   *(Column(k, "INTEGER") for k in COUNTERS),
                   Column("kswapd_efficiency", "REAL", "pages reclaimed / scanned by kswapd"),
                   Column("kswapd_velocity", "REAL"),
                   Column("direct_efficiency", "REAL"),
                   Column("direct_velocity", "REAL"),
               ), key=("run_id", "level"))
TABLES = (LEVELS,)
SCHEMA = kit.schema(*TABLES)  # versioned: a new table or column takes the next step (analysis/kit.py)


def ingest(con, run_id: int, parsed, topo) -> None:
    for r in parsed.of("kvio_level"):
        b = r.body
        v = b.get("vmstat", {})
        el = (b.get("elapsed_ms") or 0) / 1e3
        sk, gk = v.get("pgscan_kswapd"), v.get("pgsteal_kswapd")
        sd, gd = v.get("pgscan_direct"), v.get("pgsteal_direct")
        row = LEVELS.from_body(b, run_id=run_id, io_s=(b.get("io_ms") or 0) / 1e3, elapsed_s=el,
                               **{k: v.get(k) for k in COUNTERS}, kswapd_efficiency=ratio(gk, sk),
                               kswapd_velocity=ratio(sk, el), direct_efficiency=ratio(gd, sd),
                               direct_velocity=ratio(sd, el))
        LEVELS.insert(con, row)
        for k, unit in (("pswpout", "pages"), ("pswpin", "pages"), ("pgmajfault", "faults"),
                        ("kswapd_efficiency", "ratio"), ("kswapd_velocity", "pages/s")):
            if row[k] is not None:
                metric(con, run_id, f"kvio.{k}.io{row['level']}", row[k], unit)


def figures(con, run_id: int, r, params: dict, w) -> None:
    rows = con.execute("SELECT * FROM kvio_levels WHERE run_id = ? ORDER BY level", (run_id,)).fetchall()
    if not rows:
        w("kvio:    no level records")
        return
    base = rows[0]["ops_per_s"]
    w(f"\nkey-value ops/s while dd writes in the background (store {params.get('store_mib')} MiB, "
      f"{params.get('clients')} clients; the seed's table):")
    cols = ["IO (x RAM)", "IO MiB", "ops/s", "vs no IO", "IO s", "swap in", "swap out", "major flt", "minor flt",
            "kswapd scan", "kswapd steal", "kswapd eff", "kswapd vel/s", "direct scan", "direct steal"]
    table = [[f"{x['io_frac']:g}", x["io_mib"], f"{x['ops_per_s']:.0f}",
              f"{(x['ops_per_s'] / base - 1) * 100:+.1f}%" if base else "-", f"{x['io_s']:.1f}",
              x["pswpin"], x["pswpout"], x["pgmajfault"], x["pgfault"], x["pgscan_kswapd"], x["pgsteal_kswapd"],
              f(x["kswapd_efficiency"]), f(x["kswapd_velocity"], "{:.0f}"), x["pgscan_direct"], x["pgsteal_direct"]]
             for x in rows]
    for line in kit.text_table(cols, table):
        w("  " + line)
