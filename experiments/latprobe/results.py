"""latprobe's results: no tables of its own. The guest's chase and pingpong
records and the timing model's phases (timing_phases) give, per distance
class, the load latency and the lock-line transfer cost three ways: as the
topology configures it, as the model charged it, and as the guest's own
clock measured it. That comparison is its part of the summary."""
from __future__ import annotations

import timing
from analysis import kit
from protocol import facts

QUERY_TABLE = "timing_phases"

# Published cache-to-cache figures (Intel MLC --c2c_latency, reader sees the
# line modified in another core's cache; shared/probes/hardware-anchors.md A3):
# Cascade Lake-SP 6252N (FD.io CSIT) and 6240 (KU Leuven), ns.
C2C_PUBLISHED = {"x86_64": {"socket": (48.8, 55.6, "same socket, HITM: 48.8-55.6 ns (CLX 6240, 6252N)"),
                            "writer": (113.2, 115.6, "other socket, homed at the writer: 113-116 ns"),
                            "reader": (178.2, 178.4, "other socket, homed at the reader: 178 ns (CLX 6252N; "
                                                     "the 6240 box shows 114)")}}


def c2c_rows(con, run_id: int, topo) -> list[dict]:
    """The guest's cache-to-cache reads (MLC-style), beside the model's formula."""
    out = []
    for b in kit.bodies(con, run_id, "c2c"):
        r, wn, h = b["node"], b["writer_node"], b["home"]
        case = "socket" if r == wn else "writer" if h == wn else "reader"
        out.append({**b, "case": case, "hops": topo.hops[r][wn], "formula_ns": timing.c2c_ns(topo, r, h, wn)})
    return out


def rows(con, run_id: int):
    """Per distance class: the model's time per load in the pointer chase and
    per lock transfer in the ping-pong, beside what the topology configures
    (memory: local + hops x hop; transfer: the model's cache-to-cache formula)."""
    topo = kit.run_topology(con, run_id)
    phases = {(p["phase_id"], p["instance"], p["cpu"]): p for p in
              con.execute("SELECT * FROM timing_phases WHERE run_id = ?", (run_id,))}
    chase_id, pingpong_id = facts.phase_id("latprobe.chase"), facts.phase_id("latprobe.pingpong")
    chase, pingpong = [], []
    # the index chase (p = a[p]) of each node, on the guest's clock
    ichase = {b["node"]: b["guest_ms"] * 1e6 / b["loads"] for b in kit.bodies(con, run_id, "ichase")
              if b.get("loads")}
    for b in kit.bodies(con, run_id, "chase"):
        home, node = b["home"], b["node"]
        p = phases.get((chase_id, node, b["cpu"]))
        model = (p["end_ps"] - p["begin_ps"]) / 1000.0 / b["loads"] if p else None
        want = timing.memory_ns(topo, home, node)
        chase.append({"node": node, "hops": topo.hops[home][node], "slit": b["distance"], "loads": b["loads"],
                      "on_node": b["on_node"], "configured_ns": want, "model_ns": model,
                      "guest_ns": b["guest_ms"] * 1e6 / b["loads"] if b.get("guest_ms") else None,
                      "index_guest_ns": ichase.get(node),
                      "error_pct": 100.0 * (model - want) / want if model else None})
    for b in kit.bodies(con, run_id, "pingpong"):
        home, node = b["home"], b["node"]
        mine, theirs = phases.get((pingpong_id, node, b["cpu"])), phases.get((pingpong_id, node, b["partner"]))
        if not (mine and theirs):
            pingpong.append({"node": node, "hops": topo.hops[home][node], "partner": b["partner"], "model_ns": None})
            continue
        xfers = mine["lock_xfers"] + theirs["lock_xfers"]
        ps = mine["lock_ps"] + theirs["lock_ps"]
        pnode = b["partner"] // topo.cpus_per_node
        cnode = b["cpu"] // topo.cpus_per_node
        want = timing.pingpong_ns(topo, pnode, home, cnode)
        model = ps / 1000.0 / xfers if xfers else None
        pingpong.append({"node": node, "hops": topo.hops[cnode][pnode], "partner": b["partner"],
                         "increments": b["increments"], "transfers": xfers,
                         "per_increment": xfers / b["increments"], "model_ns": model, "formula_ns": want,
                         # the prober's own clock around its loop: one round trip = two hand-offs
                         "guest_rtt_ns": b.get("rtt_ns") or None,
                         "error_pct": 100.0 * (model - want) / want if model else None})
    return chase, pingpong


def pause_turn(con, run_id: int):
    """(guest ns per spin-loop turn, ns the topology gives a PAUSE) or None."""
    rec = kit.bodies(con, run_id, "pause")
    if not rec:
        return None
    topo = kit.run_topology(con, run_id)
    # the engine's own cycle (rounded to whole ps), not the clock's exact period
    return rec[0]["ns_per_turn"], topo.pause_cycles * topo.cycle_ps / 1000.0


def figures(con, run_id: int, r, params: dict, w) -> None:
    pt = pause_turn(con, run_id)
    if pt:
        w(f"\nlatprobe: a spin-loop turn (cpu_relax(): x86 PAUSE) took {pt[0]:.2f} guest ns; the topology's "
          f"PAUSE is {pt[1]:.2f} ns (pause_cycles at its clock; the loop's own instructions add a few cycles)")
    if not con.execute("SELECT 1 FROM timing_run WHERE run_id = ? AND mode = 'detailed'", (run_id,)).fetchone():
        w("\nlatprobe: run with --timing detailed to compare the model with the topology")
        return
    chase, pingpong = rows(con, run_id)
    w("\nlatprobe: pointer chase, ns per load: the topology (local + hops x hop), the model, and the guest's own "
      "clock (clock_gettime around the chase); then the same lines chased by index (p = a[p]) on the guest's clock")
    w("  node hops SLIT  on node   loads   topology ns   model ns   error   guest ns   error   index ns   error")
    for c in chase:
        if c["model_ns"] is None:
            w(f"  {c['node']:>4} {c['hops']:>4} {c['slit']:>4}   (no phase record)")
            continue
        g = c["guest_ns"]
        w(f"  {c['node']:>4} {c['hops']:>4} {c['slit']:>4} {100 * c['on_node']:>7.0f} % {c['loads']:>8,} "
          f"{c['configured_ns']:>12.1f} {c['model_ns']:>10.1f} {c['error_pct']:>+7.2f} % "
          + (f"{g:>9.1f} {100 * (g - c['configured_ns']) / c['configured_ns']:>+7.2f} %" if g else "        -")
          + (f" {c['index_guest_ns']:>9.1f} "
             f"{100 * (c['index_guest_ns'] - c['configured_ns']) / c['configured_ns']:>+7.2f} %"
             if c.get("index_guest_ns") else "          -"))
    topo = kit.run_topology(con, run_id)
    cc = c2c_rows(con, run_id, topo)
    if cc:
        pub = C2C_PUBLISHED.get(topo.native_isa, {})
        w("cache-to-cache (as MLC --c2c_latency): the prober reads lines another CPU modified, guest ns per load "
          "against the model's formula and the published figure")
        w("  reader writer hops  home at       guest ns   formula ns   published")
        for c in cc:
            p = pub.get(c["case"])
            side = {"socket": "(same socket)", "writer": "the writer", "reader": "the reader"}[c["case"]]
            w(f"  {c['node']:>6} {c['writer_node']:>6} {c['hops']:>4}  {side:<13} {c['ns_per_load']:>8.1f} "
              f"{c['formula_ns']:>12.1f}   "
              + (f"{p[2]} ({100 * (c['ns_per_load'] - (p[0] + p[1]) / 2) / ((p[0] + p[1]) / 2):+.0f} % against "
                 f"{(p[0] + p[1]) / 2:.1f})" if p else "-"))
    if pingpong:
        w("lock ping-pong (compare-and-swap, counter homed on the prober's node): modeled cost per lock-line "
          "transfer vs the model's formula (requester -> home -> owner -> requester, the mean of the two "
          "directions), and the guest's round "
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
