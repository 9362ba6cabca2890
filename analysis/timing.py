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
from experiments import facts

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
    w(f"\ntiming model ({t['mode']}): {tot['i'] or 0:,} instructions"
      + (f"; address map: {t['address_map']}" if t["address_map"] else ""))
    if t["mode"] != "detailed" or not tot["acc"]:
        return
    m = tot["m"] or 0
    w(f"  {tot['acc']:,} data accesses, {m:,} L2 misses ({100.0 * m / tot['acc']:.2f} %), "
      f"remote share of misses {100.0 * (tot['r'] or 0) / max(m, 1):.1f} %, "
      f"average miss latency {(tot['mp'] or 0) / max(m, 1) / 1000:.1f} ns, "
      f"{tot['c2c'] or 0:,} cache-to-cache transfers")
    hops = con.execute("SELECT hops, misses, lat_ps, lock_xfers, lock_ps FROM timing_hops WHERE run_id = ? "
                       "ORDER BY hops", (run_id,)).fetchall()
    if hops:
        w("  by hop count:   " + "  ".join(f"{h['hops']}: {h['misses']:,} misses @ {h['lat_ps'] / max(h['misses'], 1) / 1000:.0f} ns"
                                           for h in hops if h["misses"]))
        locks = [h for h in hops if h["lock_xfers"]]
        if locks:
            w("  lock-line transfers: " + "  ".join(
                f"{h['hops']} hops: {h['lock_xfers']:,} @ {h['lock_ps'] / h['lock_xfers'] / 1000:.0f} ns" for h in locks))
    kinds = con.execute("SELECT kind, insns, misses, remote, stall_ps FROM timing_kind WHERE run_id = ? "
                        "ORDER BY kind", (run_id,)).fetchall()
    w("  user vs kernel: " + "  ".join(
        f"{k['kind']} {k['insns']:,} insns, {k['misses']:,} misses ({100.0 * k['remote'] / max(k['misses'], 1):.0f} % remote), "
        f"stall {k['stall_ps'] / 1e9:.1f} ms" for k in kinds if k["insns"]))
    syms = con.execute("SELECT symbol, misses, remote, stall_ps, lock_xfers FROM timing_symbols WHERE run_id = ? "
                       "ORDER BY stall_ps DESC LIMIT 8", (run_id,)).fetchall()
    if syms:
        w("  top symbols by modeled memory stall:")
        for s in syms:
            w(f"    {s['symbol']:<32} {s['stall_ps'] / 1e9:>9.2f} ms  {s['misses']:>10,} misses "
              f"({100.0 * s['remote'] / max(s['misses'], 1):3.0f} % remote)"
              + (f", {s['lock_xfers']:,} lock transfers" if s["lock_xfers"] else ""))


# --- latprobe: the model against the topology ---------------------------------------
def latprobe_rows(con, run_id: int):
    """Per distance class: the model's time per load in the pointer chase and
    per lock transfer in the ping-pong, beside what the topology configures
    (memory: local + hops x hop; transfer: the model's cache-to-cache formula)."""
    import json
    from pathlib import Path

    import topologies
    r = con.execute("SELECT topology, topology_toml FROM runs WHERE id = ?", (run_id,)).fetchone()
    topo = topologies.parse(r["topology_toml"], Path(f"{r['topology']}.toml"))
    phases = {(p["phase_id"], p["instance"], p["cpu"]): p for p in
              con.execute("SELECT * FROM timing_phases WHERE run_id = ?", (run_id,))}
    chase_id, pingpong_id = facts.phase_id("latprobe.chase"), facts.phase_id("latprobe.pingpong")
    chase, pingpong = [], []
    for rec in con.execute("SELECT type, body FROM records WHERE run_id = ? AND type IN ('chase', 'pingpong') "
                           "ORDER BY lineno", (run_id,)):
        b = json.loads(rec["body"])
        home, node = b["home"], b["node"]
        hops = topo.hops[home][node]
        if rec["type"] == "chase":
            p = phases.get((chase_id, node, b["cpu"]))
            model = (p["end_ps"] - p["begin_ps"]) / 1000.0 / b["loads"] if p else None
            want = timing.memory_ns(topo, home, node)
            chase.append({"node": node, "hops": hops, "slit": b["distance"], "loads": b["loads"],
                          "on_node": b["on_node"], "configured_ns": want, "model_ns": model,
                          "guest_ns": b["guest_ms"] * 1e6 / b["loads"] if b.get("guest_ms") else None,
                          "error_pct": 100.0 * (model - want) / want if model else None})
        else:
            mine, theirs = phases.get((pingpong_id, node, b["cpu"])), phases.get((pingpong_id, node, b["partner"]))
            if not (mine and theirs):
                pingpong.append({"node": node, "hops": hops, "partner": b["partner"], "model_ns": None})
                continue
            xfers = mine["lock_xfers"] + theirs["lock_xfers"]
            ps = mine["lock_ps"] + theirs["lock_ps"]
            pnode = b["partner"] // topo.cpus_per_node
            cnode = b["cpu"] // topo.cpus_per_node
            want = timing.c2c_ns(topo, pnode, home, cnode)
            model = ps / 1000.0 / xfers if xfers else None
            pingpong.append({"node": node, "hops": topo.hops[cnode][pnode], "partner": b["partner"],
                             "increments": b["increments"], "transfers": xfers,
                             "per_increment": xfers / b["increments"], "model_ns": model, "formula_ns": want,
                             # the prober's own clock around its loop: one round trip = two hand-offs
                             "guest_rtt_ns": b.get("rtt_ns") or None,
                             "error_pct": 100.0 * (model - want) / want if model else None})
    return chase, pingpong


def render_latprobe(con, run_id: int, w) -> None:
    if not con.execute("SELECT 1 FROM timing_run WHERE run_id = ? AND mode = 'detailed'", (run_id,)).fetchone():
        w("\nlatprobe: run with --timing detailed to compare the model with the topology")
        return
    chase, pingpong = latprobe_rows(con, run_id)
    w("\nlatprobe: pointer chase, ns per load: the topology (local + hops x hop), the model, and the guest's own "
      "clock (clock_gettime around the chase)")
    w("  node hops SLIT  on node   loads   topology ns   model ns   error   guest ns   error")
    for c in chase:
        if c["model_ns"] is None:
            w(f"  {c['node']:>4} {c['hops']:>4} {c['slit']:>4}   (no phase record)")
            continue
        g = c["guest_ns"]
        w(f"  {c['node']:>4} {c['hops']:>4} {c['slit']:>4} {100 * c['on_node']:>7.0f} % {c['loads']:>8,} "
          f"{c['configured_ns']:>12.1f} {c['model_ns']:>10.1f} {c['error_pct']:>+7.2f} % "
          + (f"{g:>9.1f} {100 * (g - c['configured_ns']) / c['configured_ns']:>+7.2f} %" if g else "        -"))
    if pingpong:
        w("lock ping-pong (compare-and-swap, counter homed on the prober's node): modeled cost per lock-line "
          "transfer vs the model's formula (requester -> home -> owner -> requester), and the guest's round "
          "trip (two hand-offs) against twice the formula")
        w("  node hops partner  transfers/increment   model ns   formula ns   error   guest RTT ns   vs 2x formula")
        for p in pingpong:
            if p["model_ns"] is None:
                w(f"  {p['node']:>4} {p['hops']:>4} {p['partner']:>7}   (no phase records)")
                continue
            g = p["guest_rtt_ns"]
            w(f"  {p['node']:>4} {p['hops']:>4} {p['partner']:>7} {p['per_increment']:>20.2f} {p['model_ns']:>10.1f} "
              f"{p['formula_ns']:>12.1f} {p['error_pct']:>+7.2f} % "
              + (f"{g:>13.1f} {100 * (g - 2 * p['formula_ns']) / (2 * p['formula_ns']):>+9.2f} %" if g else ""))
