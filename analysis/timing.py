"""The timing model's results in SQLite, and their part of the summary.

The plugin writes one JSON file at QEMU's exit (timing/model_report.c,
vm_write_results); this stores it in typed tables (schema migration 3)
inside the run's final transaction, and renders what a researcher looks at
first: remote share, miss latency by hop count, lock-line transfers, the
kernel symbols that stall most, user vs kernel.
"""
from __future__ import annotations

import timing
from analysis.rows import insert

# the model's per-CPU counters, read from timing/model_int.h (COUNTER_FIELDS)
COUNTERS = timing.COUNTERS
# what timing_phases keeps of a phase's counters
PHASE_COUNTERS = ("insns", "loads", "stores", "atomics", "misses", "remote", "stall_ps", "mem_ps", "lock_xfers",
                  "lock_ps")


def ingest(con, run_id: int, res: dict, address_map: str = "") -> None:
    """res: the results JSON (format timing.RESULTS_FORMAT), whose objects
    name their fields as the tables name their columns."""
    insert(con, "timing_run", {"run_id": run_id, "mode": res["mode"],
                               **{k: res.get(k) for k in ("cycle_ps", "l2_ps", "ctrl_ps", "half_hop_ps",
                                                          "state_bytes", "windows", "unmapped")},
                               "address_map": address_map})
    if res.get("warmup_insns"):  # the model's figures count from the end of its warm-up
        insert(con, "metrics", [{"run_id": run_id, "name": "timing.warmup_insns", "value": res["warmup_insns"],
                                 "unit": "insns"},
                                {"run_id": run_id, "name": "timing.warmup_end_ps", "value": res["warmup_end_ps"],
                                 "unit": "ps"}])
    insert(con, "timing_cpu", [{"run_id": run_id, "cpu": c["cpu"], "node": c["node"],
                                **{k: c.get(k, 0) for k in COUNTERS}} for c in res["cpus"]])
    insert(con, "timing_kind", [{"run_id": run_id, **k} for k in res.get("kinds", [])])
    insert(con, "timing_matrix", [{"run_id": run_id, **m} for m in res.get("matrix", [])])
    for h in res.get("hops", []):
        insert(con, "timing_hops", {"run_id": run_id, **{k: h[k] for k in ("hops", "misses", "lat_ps", "c2c",
                                                                          "lock_xfers", "lock_ps")}})
        insert(con, "timing_latency_hist", [{"run_id": run_id, "hops": h["hops"], **b} for b in h.get("hist", [])])
    # System.map repeats some names (static functions of several files): one row per name
    syms: dict[str, dict] = {}
    for s in res.get("symbols", []):
        acc = syms.setdefault(s["symbol"], {"run_id": run_id, "symbol": s["symbol"]})
        for k, v in s.items():
            if k != "symbol":
                acc[k] = acc.get(k, 0) + v
    insert(con, "timing_symbols", list(syms.values()))
    insert(con, "timing_resources", [{"run_id": run_id, **r} for r in res.get("resources", [])])
    wk = res.get("walks") or {}
    if wk.get("translation"):
        insert(con, "timing_walks", [{"run_id": run_id, **r} for r in wk.get("reads", [])])
        insert(con, "metrics", [{"run_id": run_id, "name": f"timing.walk_leaves_{s}", "value": wk.get(f"leaf_{s}", 0),
                                 "unit": "walks"} for s in ("4k", "2m", "1g")]
               + [{"run_id": run_id, "name": "timing.walk_faults", "value": wk.get("faults", 0), "unit": "walks"}])
    insert(con, "timing_phases", [{"run_id": run_id, "cpu": p["cpu"], "phase_id": p["id"],
                                   "phase": timing.PHASES.get(p["id"]), "instance": p["instance"],
                                   "begin_ps": p["begin_ps"], "end_ps": p["end_ps"],
                                   **{k: p[k] for k in PHASE_COUNTERS}} for p in res.get("phases", [])])


def render(con, run_id: int, w) -> None:
    t = con.execute("SELECT * FROM timing_run WHERE run_id = ?", (run_id,)).fetchone()
    if not t:
        return
    tot = con.execute("SELECT SUM(insns) i, SUM(time_ps) t, SUM(misses) m, SUM(remote) r, SUM(mem_ps) mp, "
                      "SUM(lock_xfers) lx, SUM(lock_ps) lp, SUM(c2c) c2c, SUM(loads + stores + atomics) acc "
                      "FROM timing_cpu WHERE run_id = ?", (run_id,)).fetchone()
    warm = con.execute("SELECT value FROM metrics WHERE run_id = ? AND name = 'timing.warmup_insns'",
                       (run_id,)).fetchone()
    w(f"\ntiming model ({t['mode']}): {tot['i'] or 0:,} instructions"
      + (f" after a warm-up of {int(warm[0]):,} (caches, directory and streams warm; nothing of it counted)"
         if warm else "")
      + (f"; address map: {t['address_map']}" if t["address_map"] else ""))
    if not tot["acc"]:  # the plugin's fast mode prices no access
        return
    m = tot["m"] or 0
    l3 = con.execute("SELECT SUM(l3_hits) FROM timing_cpu WHERE run_id = ?", (run_id,)).fetchone()[0]
    w(f"  {tot['acc']:,} data accesses, {m:,} L2 misses ({100.0 * m / tot['acc']:.2f} %"
      + (f"; {l3:,} lines from the socket's L3, misses and prefetches" if l3 else "") + "), "
      f"remote share of misses {100.0 * (tot['r'] or 0) / max(m, 1):.1f} %, "
      f"average miss latency {(tot['mp'] or 0) / max(m, 1) / 1000:.1f} ns, "
      f"{tot['c2c'] or 0:,} cache-to-cache transfers")
    core = con.execute("SELECT SUM(stall_ps) s, SUM(prefetches) pf, SUM(dep_stall_ps) dep, SUM(fb_stall_ps) fb, "
                       "SUM(rob_stall_ps) rob, SUM(sb_stall_ps) sb, SUM(fence_stall_ps) fence, "
                       "SUM(mispredict_ps) mp, SUM(branches) br, SUM(mispredicts) miss, SUM(unknown_insns) unk "
                       "FROM timing_cpu WHERE run_id = ?", (run_id,)).fetchone()
    if core["br"]:
        # model 4's core: its clock is the dispatch clock; what held dispatch back beyond width a cycle
        w(f"  the cores' dispatch waited {core['s'] / 1e9:.1f} ms beyond their best case: " + ", ".join(
            f"{name} {100.0 * (core[k] or 0) / max(core['s'], 1):.0f} %" for k, name in (
                ("rob", "with the window full (behind a miss or a long operation)"),
                ("mp", "after mispredicted branches"), ("sb", "with the store buffer full"),
                ("fence", "at barriers and lock operations")))
          + f" (the rest: dispatch at its width, fetch); {core['br']:,} branches, "
          f"{100.0 * (core['miss'] or 0) / core['br']:.2f} % mispredicted; {core['pf'] or 0:,} lines prefetched"
          + (f"; {core['unk']:,} instructions the decoder did not know (priced as one ALU cycle)" if core["unk"]
             else ""))
    elif core["s"] and (core["dep"] or core["fb"] or core["rob"] or core["sb"] or core["fence"] or core["pf"]):
        # models 2-3's access stream: what the CPUs waited for (the rest: L2 hits and misses of a blocking core)
        w(f"  the cores waited {core['s'] / 1e9:.1f} ms: " + ", ".join(
            f"{name} {100.0 * (core[k] or 0) / core['s']:.0f} %" for k, name in (
                ("dep", "for a value still arriving"), ("fb", "for a fill buffer"), ("rob", "with the window full"),
                ("sb", "with the store buffer full"), ("fence", "in lock operations")))
          + f"; {core['pf'] or 0:,} lines prefetched")
    _translation(con, run_id, tot["acc"], w)
    hops = con.execute("SELECT hops, misses, lat_ps, lock_xfers, lock_ps FROM timing_hops WHERE run_id = ? "
                       "ORDER BY hops", (run_id,)).fetchall()
    if hops:
        w("  by hop count (misses and prefetches): " + "  ".join(
            f"{h['hops']}: {h['misses']:,} misses @ {h['lat_ps'] / max(h['misses'], 1) / 1000:.0f} ns"
            for h in hops if h["misses"]))
        locks = [h for h in hops if h["lock_xfers"]]
        if locks:
            w("  lock-line transfers: " + "  ".join(
                f"{h['hops']} hops: {h['lock_xfers']:,} @ {h['lock_ps'] / h['lock_xfers'] / 1000:.0f} ns"
                for h in locks))
    kinds = con.execute("SELECT kind, insns, misses, remote, stall_ps FROM timing_kind WHERE run_id = ? "
                        "ORDER BY kind", (run_id,)).fetchall()
    w("  user vs kernel: " + "  ".join(
        f"{k['kind']} {k['insns']:,} insns, {k['misses']:,} misses "
        f"({100.0 * k['remote'] / max(k['misses'], 1):.0f} % remote), "
        f"stall {k['stall_ps'] / 1e9:.1f} ms" for k in kinds if k["insns"]))
    from analysis import profile_report
    share = profile_report.shares(con, run_id)
    if share:  # the profile on the guest clock: where the CPUs' time went, not only their memory stall
        idle = share.pop(("[idle]", "-")) + share.pop(("[drift]", "-"))
        busy = max(100.0 - idle, 1e-9)
        w(f"  top symbols by share of the CPUs' busy time ({100.0 - idle:.2f} % of their modeled time; "
          f"./run.py profile {run_id} for the columns, callers and phases):")
        for (sym, dso), pct in sorted(share.items(), key=lambda kv: -kv[1])[:8]:
            w(f"    {sym:<32} {dso:<14} {100.0 * pct / busy:6.2f} %")
        return
    syms = con.execute("SELECT symbol, misses, remote, stall_ps, lock_xfers FROM timing_symbols WHERE run_id = ? "
                       "ORDER BY stall_ps DESC LIMIT 8", (run_id,)).fetchall()
    if syms:
        w("  top symbols by modeled memory stall:")
        for s in syms:
            w(f"    {s['symbol']:<32} {s['stall_ps'] / 1e9:>9.2f} ms  {s['misses']:>10,} misses "
              f"({100.0 * s['remote'] / max(s['misses'], 1):3.0f} % remote)"
              + (f", {s['lock_xfers']:,} lock transfers" if s["lock_xfers"] else ""))


def _translation(con, run_id: int, accesses: int, w) -> None:
    """Model 3's TLBs, page walks (where their entry reads were served) and instruction fetch."""
    t = con.execute("SELECT SUM(dtlb_misses) d, SUM(itlb_misses) i, SUM(walks) n, SUM(walk_ps) ps, "
                    "SUM(walk_loads) loads, SUM(walk_remote) remote, SUM(tlb_flushes) fl, SUM(l1i_misses) im, "
                    "SUM(fetch_stall_ps) fs FROM timing_cpu WHERE run_id = ?", (run_id,)).fetchone()
    if not (t["d"] or t["i"] or t["im"]):
        return
    n = t["n"] or 0
    w(f"  translation: {t['d']:,} L1 DTLB misses ({1000.0 * t['d'] / max(accesses, 1):.2f} per 1000 accesses), "
      f"{t['i']:,} L1 ITLB misses, {n:,} page walks"
      + (f" of {t['ps'] / n / 1000:.1f} ns on average, {t['loads'] / n:.2f} entry reads each "
         f"({100.0 * (t['remote'] or 0) / max(t['loads'], 1):.1f} % of them from a remote node)" if n else "")
      + f"; {t['fl']:,} TLB flushes")
    reads = con.execute("SELECT served, hops, loads, lat_ps FROM timing_walks WHERE run_id = ? "
                        "ORDER BY served, hops", (run_id,)).fetchall()
    if any(r["loads"] for r in reads):
        w("  page-walk reads served by: " + "  ".join(
            (f"{r['served'].upper()} {r['loads']:,}" if r["hops"] is None else
             f"memory {r['hops']} hop{'s' if r['hops'] != 1 else ''} {r['loads']:,} "
             f"@ {r['lat_ps'] / r['loads'] / 1000:.0f} ns")
            for r in reads if r["loads"]))
    leaves = {r[0]: int(r[1]) for r in con.execute(
        "SELECT name, value FROM metrics WHERE run_id = ? AND name LIKE 'timing.walk_leaves_%'", (run_id,))}
    if any(leaves.values()):
        size = lambda k: k.rsplit("_", 1)[1].upper().replace("K", " KiB").replace("M", " MiB").replace("G", " GiB")
        w("  walks ended in " + ", ".join(f"{v:,} {size(k)} pages" for k, v in sorted(leaves.items()) if v))
    if t["im"]:
        w(f"  instruction fetch: {t['im']:,} L1I misses, the front end waited {t['fs'] / 1e9:.2f} ms")
