"""kvio's results (seed 001): per background-IO level, the key-value store's
ops/s beside the reclaim counters of Mel Gorman's mmtests table (kvio_levels),
and its part of the summary."""
from __future__ import annotations

from analysis.rows import f, insert, metric, ratio

SANITY = True  # it sends a sanity record; the summary says so when it is missing
QUERY_TABLE = "kvio_levels"

# The seed's table for kvio (Mel Gorman's mmtests report), per IO level.
COUNTERS = ("pswpin", "pswpout", "pgmajfault", "pgfault", "pgscan_kswapd", "pgsteal_kswapd",
            "pgscan_direct", "pgsteal_direct")

SCHEMA = [  # versioned: append, never edit (see experiments/memeater/results.py)
    """
    CREATE TABLE IF NOT EXISTS kvio_levels (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        level INTEGER NOT NULL,
        io_frac REAL NOT NULL,
        io_mib INTEGER NOT NULL,
        io_ok INTEGER,
        io_s REAL,
        ops INTEGER,
        elapsed_s REAL,
        ops_per_s REAL,
        kswapd_s REAL,
        pswpin INTEGER,
        pswpout INTEGER,
        pgmajfault INTEGER,
        pgfault INTEGER,
        pgscan_kswapd INTEGER,
        pgsteal_kswapd INTEGER,
        pgscan_direct INTEGER,
        pgsteal_direct INTEGER,
        kswapd_efficiency REAL,
        kswapd_velocity REAL,
        direct_efficiency REAL,
        direct_velocity REAL,
        PRIMARY KEY (run_id, level)
    );
    """,
]


def ingest(con, run_id: int, parsed, topo) -> None:
    for r in parsed.of("kvio_level"):
        b = r.body
        v = b.get("vmstat", {})
        el = (b.get("elapsed_ms") or 0) / 1e3
        sk, gk = v.get("pgscan_kswapd"), v.get("pgsteal_kswapd")
        sd, gd = v.get("pgscan_direct"), v.get("pgsteal_direct")
        row = {
            "run_id": run_id, "level": b.get("level"), "io_frac": b.get("io_frac"), "io_mib": b.get("io_mib"),
            "io_ok": b.get("io_ok"), "io_s": (b.get("io_ms") or 0) / 1e3, "ops": b.get("ops"), "elapsed_s": el,
            "ops_per_s": b.get("ops_s"), "kswapd_s": b.get("kswapd_s"), **{k: v.get(k) for k in COUNTERS},
            "kswapd_efficiency": ratio(gk, sk), "kswapd_velocity": ratio(sk, el),
            "direct_efficiency": ratio(gd, sd), "direct_velocity": ratio(sd, el),
        }
        insert(con, "kvio_levels", row)
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
    w("  " + " ".join(f"{c:>12}" for c in cols))
    for x in rows:
        vals = [f"{x['io_frac']:g}", x["io_mib"], f"{x['ops_per_s']:.0f}",
                f"{(x['ops_per_s'] / base - 1) * 100:+.1f}%" if base else "-", f"{x['io_s']:.1f}",
                x["pswpin"], x["pswpout"], x["pgmajfault"], x["pgfault"], x["pgscan_kswapd"], x["pgsteal_kswapd"],
                f(x["kswapd_efficiency"]), f(x["kswapd_velocity"], "{:.0f}"), x["pgscan_direct"],
                x["pgsteal_direct"]]
        w("  " + " ".join(f"{'-' if v is None else v:>12}" for v in vals))
