"""latprobe's report figure (analysis/plots.py runs it on its ok runs): load
latency and lock-line transfer cost by hops, as the topology configures
them, as the guest's clock measured them and as the timing model charged
them. latency_by_hops is the data, apart from the drawing."""
from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display on a build machine; must precede pyplot
import matplotlib.pyplot as plt

import timing
from analysis.plot_kit import Figure, id_list, save, sql_log, topology
from experiments.latprobe import results

# --- load latency and lock-line transfers by hops --------------------------
LAT_SQL = ("SELECT run_id, type, body FROM records WHERE run_id IN ({ids}) AND type IN ('chase', 'pingpong') "
           "ORDER BY run_id, lineno")
DETAILED_SQL = "SELECT run_id FROM timing_run WHERE run_id IN ({ids}) AND mode = 'detailed'"


def latency_by_hops(con, runs) -> dict[str, dict]:
    """topology -> {"runs": ids, "load"/"xfer": {source: {hops: [ns, ...]}}}:
    ns per load of the pointer chase and per lock-line transfer of the
    ping-pong, as the topology configures them (timing.memory_ns / c2c_ns),
    as the guest's clock measured them, and as the timing model charged them
    (latprobe's own rows, runs with --timing detailed only)."""
    byid = {r["id"]: r for r in runs}
    out: dict[str, dict] = {}

    def add(r, kind, source, hops, ns):
        if ns is None:
            return
        t = out.setdefault(r["topology"], {"runs": [], "load": {}, "xfer": {}})
        if r["id"] not in t["runs"]:
            t["runs"].append(r["id"])
        t[kind].setdefault(source, {}).setdefault(hops, []).append(ns)

    for x in con.execute(LAT_SQL.format(ids=id_list(byid))):
        r, b = byid[x["run_id"]], json.loads(x["body"])
        topo = topology(r)
        if topo is None:
            continue
        if x["type"] == "chase":
            hops = topo.hops[b["home"]][b["node"]]
            add(r, "load", "topology", hops, timing.memory_ns(topo, b["home"], b["node"]))
            add(r, "load", "guest", hops, b["guest_ms"] * 1e6 / b["loads"] if b.get("guest_ms") else None)
        else:
            req, owner = b["cpu"] // topo.cpus_per_node, b["partner"] // topo.cpus_per_node
            hops = topo.hops[req][owner]
            add(r, "xfer", "topology", hops, timing.pingpong_ns(topo, owner, b["home"], req))
            # the prober's round trip is two hand-offs of the line
            add(r, "xfer", "guest", hops, b["rtt_ns"] / 2 if b.get("rtt_ns") else None)
    for x in con.execute(DETAILED_SQL.format(ids=id_list(byid))).fetchall():
        chase, pingpong = results.rows(con, x["run_id"])
        for c in chase:
            add(byid[x["run_id"]], "load", "timing model", c["hops"], c["model_ns"])
        for p in pingpong:
            add(byid[x["run_id"]], "xfer", "timing model", p["hops"], p["model_ns"])
    return out


STYLE = {"topology": ("-", "o"), "timing model": (":", "^"), "guest": ("--", "s")}
LEGEND = {"topology": "topology (modeled)", "timing model": "timing model", "guest": "guest clock"}


def latprobe(con, runs, out: Path) -> list[Figure]:
    with sql_log(con) as log:
        data = latency_by_hops(con, runs)
    if not data:
        return []
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6))
    colours = plt.get_cmap("tab10")
    for i, (name, t) in enumerate(sorted(data.items())):
        for ax, kind in zip(axes, ("load", "xfer")):
            for source, (ls, mk) in STYLE.items():
                pts = t[kind].get(source)
                if pts:
                    hs = sorted(pts)
                    ax.plot(hs, [sum(pts[h]) / len(pts[h]) for h in hs], ls=ls, marker=mk, color=colours(i % 10),
                            label=f"{name}: {LEGEND[source]}")
    for ax, what, unit in zip(axes, ("pointer chase: load latency", "lock ping-pong: lock-line transfer cost"),
                              ("latency (ns per load)", "cost (ns per transfer)")):
        ax.set_xlabel("hops (from the probing CPU's node)")
        ax.set_ylabel(unit)
        ax.set_title(what, fontsize=10)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set_ylim(bottom=0)
        if ax.has_data():
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "no records", transform=ax.transAxes, ha="center")
    fig.tight_layout()
    save(fig, out, "fig-latprobe")
    ids = [i for t in data.values() for i in t["runs"]]
    return [Figure("fig-latprobe", "latprobe: latency and lock transfers by hops", (
        "Mean over the runs of each topology, per hop count. Solid: what the topology configures (local + hops x "
        "hop latency; a transfer requester -> home -> owner -> requester). Dashed: the guest's own clock "
        "(chase time / loads; half the ping-pong round trip). Dotted: the timing model's charge (runs with "
        "--timing detailed)."), sorted(ids), log)]


FIGURES = (latprobe,)
PLACE = "before"  # in the report: before the kernel-comparison tables
ORDER = 20  # among the experiments of its PLACE, lower first
