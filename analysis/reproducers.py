"""Results of the seed reproducers (mlockchurn, kvio, forkstorm, qsbench):
their records into typed tables and `metrics`, and their part of the run
summary.

Records every reproducer may send (experiments/lib/vmlab.h):
  metric         a key figure under a stable name -> metrics (name, value, unit)
  sanity         the reproducer's own pass/fail checks -> repro_sanity
  kswapd_sample  kswapd CPU ticks per node every interval -> repro_kswapd_samples
  lockstat       top contended lock classes (LOCK_STAT kernels) -> repro_lockstat
and each experiment's own per-step records (INGEST below).
"""
from __future__ import annotations

import statistics

# The seed's table for kvio (Mel Gorman's mmtests report), per IO level.
KVIO_COUNTERS = ("pswpin", "pswpout", "pgmajfault", "pgfault", "pgscan_kswapd", "pgsteal_kswapd",
                 "pgscan_direct", "pgsteal_direct")


def _metric(con, run_id, name, value, unit=None):
    con.execute("INSERT OR REPLACE INTO metrics (run_id, name, value, unit) VALUES (?, ?, ?, ?)",
                (run_id, name, value, unit))


def ratio(a, b):
    return a / b if b else None


# --- records shared by the reproducers -----------------------------------------
def ingest_common(con, run_id, parsed, exp: str) -> None:
    for r in parsed.of("metric"):
        b = r.body
        if isinstance(b.get("name"), str):
            _metric(con, run_id, b["name"], b.get("value"), b.get("unit"))
    for r in parsed.of("sanity"):
        b = r.body
        for c in b.get("checks", []):
            con.execute("INSERT OR REPLACE INTO repro_sanity VALUES (?,?,?,?,?,?)",
                        (run_id, exp, c.get("name"), c.get("ok"), c.get("value"), c.get("expect")))
        _metric(con, run_id, f"{exp}.sanity_ok", b.get("ok"), "bool")
    samples = parsed.of("kswapd_sample")
    for r in samples:
        b = r.body
        tck = b.get("clk_tck") or 100
        con.executemany("INSERT OR REPLACE INTO repro_kswapd_samples VALUES (?,?,?,?,?)",
                        [(run_id, b.get("seq"), b.get("t_ms"), n, t / tck) for n, t in enumerate(b.get("ticks", []))])
    share = kswapd_share(samples)
    if share:
        _metric(con, run_id, f"{exp}.kswapd_share_peak", share["peak"], "CPU")
        _metric(con, run_id, f"{exp}.kswapd_share_mean", share["mean"], "CPU")
    for r in parsed.of("lockstat"):
        b = r.body
        con.executemany("INSERT OR REPLACE INTO repro_lockstat VALUES (?,?,?,?,?,?,?,?,?,?)",
                        [(run_id, b.get("phase"), i + 1, c.get("class"), c.get("contentions"), c.get("con_bounces"),
                          c.get("wait_total_us"), c.get("wait_max_us"), c.get("acquisitions"), c.get("hold_total_us"))
                         for i, c in enumerate(b.get("top", []))])


def kswapd_share(samples) -> dict | None:
    """kswapd CPU share between consecutive samples (1.0 = one CPU busy the
    whole interval, the seed's '100 %'): the busiest node's peak interval,
    and all kswapds together over the sampled span."""
    pts = [(s.body.get("t_ms"), [t / (s.body.get("clk_tck") or 100) for t in s.body.get("ticks", [])])
           for s in samples if s.body.get("t_ms") is not None]
    if len(pts) < 2:
        return None
    peak = 0.0
    for (t0, a), (t1, b) in zip(pts, pts[1:]):
        dt = (t1 - t0) / 1e3
        if dt > 0:
            peak = max([peak] + [(y - x) / dt for x, y in zip(a, b)])
    span = (pts[-1][0] - pts[0][0]) / 1e3
    mean = (sum(pts[-1][1]) - sum(pts[0][1])) / span if span > 0 else 0.0
    return {"peak": round(peak, 4), "mean": round(mean, 4)}


# --- per experiment -------------------------------------------------------------
def ingest_mlockchurn(con, run_id, parsed) -> None:
    cols = ("chunk", "slot", "steps", "ok", "mlock_ms", "step_median_ms", "step_max_ms", "wall_ms", "t_ms", "majflt",
            "minflt", "kswapd_s", "pgscan_kswapd", "pgscan_direct", "pgsteal_kswapd", "pgsteal_direct")
    for r in parsed.of("mlock_chunk"):
        b = r.body
        con.execute(f"INSERT OR REPLACE INTO mlockchurn_chunks VALUES (?, {', '.join('?' for _ in cols)})",
                    (run_id, *[b.get(c) for c in cols]))
        # free memory per node after each chunk, beside memeater's
        con.executemany("INSERT OR REPLACE INTO node_free VALUES (?,?,?,?,?,?)",
                        [(run_id, b.get("chunk"), None, b.get("chunk"), n, v)
                         for n, v in enumerate(b.get("free_kib", []))])


def ingest_kvio(con, run_id, parsed) -> None:
    for r in parsed.of("kvio_level"):
        b = r.body
        v = b.get("vmstat", {})
        el = (b.get("elapsed_ms") or 0) / 1e3
        sk, gk = v.get("pgscan_kswapd"), v.get("pgsteal_kswapd")
        sd, gd = v.get("pgscan_direct"), v.get("pgsteal_direct")
        row = {
            "level": b.get("level"), "io_frac": b.get("io_frac"), "io_mib": b.get("io_mib"), "io_ok": b.get("io_ok"),
            "io_s": (b.get("io_ms") or 0) / 1e3, "ops": b.get("ops"), "elapsed_s": el, "ops_per_s": b.get("ops_s"),
            "kswapd_s": b.get("kswapd_s"), **{k: v.get(k) for k in KVIO_COUNTERS},
            "kswapd_efficiency": ratio(gk, sk), "kswapd_velocity": ratio(sk, el),
            "direct_efficiency": ratio(gd, sd), "direct_velocity": ratio(sd, el),
        }
        con.execute(f"INSERT OR REPLACE INTO kvio_levels (run_id, {', '.join(row)}) "
                    f"VALUES (?, {', '.join('?' for _ in row)})", (run_id, *row.values()))
        lv = row["level"]
        for k, unit in (("pswpout", "pages"), ("pswpin", "pages"), ("pgmajfault", "faults"),
                        ("kswapd_efficiency", "ratio"), ("kswapd_velocity", "pages/s")):
            if row[k] is not None:
                _metric(con, run_id, f"kvio.{k}.io{lv}", row[k], unit)


def ingest_forkstorm(con, run_id, parsed) -> None:
    for r in parsed.of("forkstorm_tick"):
        b = r.body
        v = b.get("vmstat", {})
        con.execute("INSERT OR REPLACE INTO forkstorm_ticks VALUES (?,?,?,?,?,?,?,?)",
                    (run_id, b.get("seq"), b.get("t_ms"), b.get("jobs"), b.get("live_workers"), v.get("pswpout"),
                     (v.get("pgscan_kswapd") or 0) + (v.get("pgscan_direct") or 0), b.get("kswapd_s")))
    done = parsed.first("forkstorm_done")
    if done:
        con.executemany("INSERT OR REPLACE INTO forkstorm_workers VALUES (?,?,?)",
                        [(run_id, w, j) for w, j in enumerate(done.body.get("per_worker", []))])
        for lock, c in (done.body.get("locks") or {}).items():
            _metric(con, run_id, f"forkstorm.lock_contentions.{lock}", c.get("contentions"), "contentions")


def ingest_qsbench(con, run_id, parsed) -> None:
    cols = ("proc", "elements", "fill_ms", "sort_ms", "elapsed_ms", "user_ms", "sys_ms", "majflt", "minflt",
            "checksum", "unsorted")
    for r in parsed.of("qsbench_proc"):
        con.execute(f"INSERT OR REPLACE INTO qsbench_procs VALUES (?, {', '.join('?' for _ in cols)})",
                    (run_id, *[r.body.get(c) for c in cols]))
    start, done = parsed.first("qsbench_start"), parsed.first("qsbench_done")
    if done:
        con.execute("INSERT OR REPLACE INTO metrics (run_id, name, text) VALUES (?, ?, ?)",
                    (run_id, "qsbench.checksum", done.body.get("checksum")))
    # the host's own view: wall seconds between the two records' arrival
    if start and done and start.host_s is not None and done.host_s is not None:
        _metric(con, run_id, "qsbench.host_wall_s", round(done.host_s - start.host_s, 3), "s")


INGEST = {"mlockchurn": ingest_mlockchurn, "kvio": ingest_kvio, "forkstorm": ingest_forkstorm,
          "qsbench": ingest_qsbench}


def ingest(con, run_id, parsed, experiment: str) -> None:
    ingest_common(con, run_id, parsed, experiment)
    if experiment in INGEST:
        INGEST[experiment](con, run_id, parsed)


# --- summary ---------------------------------------------------------------------
def _m(con, run_id) -> dict:
    return {x["name"]: x["value"] for x in con.execute(
        "SELECT name, value FROM metrics WHERE run_id = ? AND value IS NOT NULL", (run_id,))}


def _f(v, fmt="{:.2f}") -> str:
    return "-" if v is None else fmt.format(v)


def render_common(con, run_id, w) -> None:
    """Sanity, kswapd share and lock contention: every reproducer has them."""
    m = _m(con, run_id)
    peak = next((v for k, v in m.items() if k.endswith(".kswapd_share_peak")), None)
    mean = next((v for k, v in m.items() if k.endswith(".kswapd_share_mean")), None)
    if peak is not None:
        w(f"kswapd:  CPU share over the run {mean:.3f} (all nodes' kswapds; 1.0 = one CPU), "
          f"busiest node's peak interval {peak:.3f}")
    locks = con.execute("SELECT * FROM repro_lockstat WHERE run_id = ? ORDER BY phase, rank", (run_id,)).fetchall()
    if locks:
        w("\nlock_stat, most contended classes (/proc/lock_stat, cleared at the start):")
        w(f"  {'class':<44} {'contentions':>11} {'wait us':>12} {'max us':>9} {'acquisitions':>12}")
        for x in locks:
            w(f"  {x['class'][:44]:<44} {x['contentions']:>11} {x['wait_total_us']:>12.1f} "
              f"{x['wait_max_us']:>9.1f} {x['acquisitions']:>12}")
    checks = con.execute("SELECT * FROM repro_sanity WHERE run_id = ? ORDER BY rowid", (run_id,)).fetchall()
    if checks:
        ok = all(c["ok"] for c in checks)
        w(f"\nsanity:  {'PASSED' if ok else 'FAILED'} ("
          + "; ".join(f"{c['check_name']} {'ok' if c['ok'] else 'FAILED'}: {_f(c['value'], '{:g}')}, expected "
                      f"{c['expect']}" for c in checks) + ")")
    else:
        w("\nsanity:  no sanity record (the reproducer did not finish)")


def render_mlockchurn(con, run_id, r, params, w) -> None:
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
    m = _m(con, run_id)
    first = [x["mlock_ms"] for x in rows[:params.get("slots", 1)]]
    later = [x["mlock_ms"] for x in rows[params.get("slots", 1):]]
    if first and later:
        w(f"  first {len(first)} chunk(s) (free memory) {statistics.mean(first) / 1e3:.2f} s per mlock, "
          f"the {len(later)} after (recycling) {statistics.mean(later) / 1e3:.2f} s")
    w(f"  reclaim: {_f(m.get('mlockchurn.pgscan'), '{:.0f}')} pages scanned, "
      f"{_f(m.get('mlockchurn.pgsteal'), '{:.0f}')} reclaimed (efficiency "
      f"{_f(m.get('mlockchurn.reclaim_efficiency'))}); kswapd CPU over the chunks "
      f"{_f(m.get('mlockchurn.kswapd_cpu_share'), '{:.3f}')} CPUs, all {r['nodes']} nodes' kswapds together "
      f"(the seed's storm: its one kswapd at 100 %, 1.0; per node see the peak below)")


def render_kvio(con, run_id, r, params, w) -> None:
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
                _f(x["kswapd_efficiency"]), _f(x["kswapd_velocity"], "{:.0f}"), x["pgscan_direct"],
                x["pgsteal_direct"]]
        w("  " + " ".join(f"{'-' if v is None else v:>12}" for v in vals))


def render_forkstorm(con, run_id, r, params, w) -> None:
    done = con.execute("SELECT body FROM records WHERE run_id = ? AND type = 'forkstorm_done'", (run_id,)).fetchone()
    if not done:
        w("storm:   no forkstorm_done record")
        return
    import json
    b = json.loads(done["body"])
    v = b.get("vmstat", {})
    busy = (b.get("user_s") or 0) + (b.get("sys_s") or 0)
    w(f"\nfork storm: {params.get('workers')} workers x {params.get('children')} children over "
      f"{params.get('region_mib')} MiB regions each, {b.get('elapsed_ms', 0) / 1e3:.1f} guest s:")
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


def render_qsbench(con, run_id, r, params, w) -> None:
    rows = con.execute("SELECT * FROM qsbench_procs WHERE run_id = ? ORDER BY proc", (run_id,)).fetchall()
    if not rows:
        w("qsbench: no process records")
        return
    m = _m(con, run_id)
    text = dict(con.execute("SELECT name, text FROM metrics WHERE run_id = ? AND text IS NOT NULL", (run_id,)).fetchall())
    w(f"\nqsbench: {params.get('array_mib')} MiB of random ints in {params.get('procs')} process(es), "
      f"seed {params.get('qs_seed')}:")
    w(f"  {'proc':>4} {'elements':>10} {'fill s':>7} {'sort s':>8} {'user s':>7} {'sys s':>7} {'majflt':>7} checksum")
    for x in rows:
        w(f"  {x['proc']:>4} {x['elements']:>10} {x['fill_ms'] / 1e3:>7.2f} {x['sort_ms'] / 1e3:>8.2f} "
          f"{x['user_ms'] / 1e3:>7.2f} {x['sys_ms'] / 1e3:>7.2f} {x['majflt']:>7} {x['checksum']}")
    w(f"  elapsed {_f(m.get('qsbench.elapsed_s'))} s guest clock (host wall {_f(m.get('qsbench.host_wall_s'), '{:.1f}')}"
      f" s), user {_f(m.get('qsbench.user_s'))} s, system {_f(m.get('qsbench.sys_s'))} s, "
      f"{_f(m.get('qsbench.majflt'), '{:.0f}')} major faults, kswapd {_f(m.get('qsbench.kswapd_s'))} s; "
      f"checksum {text.get('qsbench.checksum')}")


RENDER = {"mlockchurn": render_mlockchurn, "kvio": render_kvio, "forkstorm": render_forkstorm,
          "qsbench": render_qsbench}
