"""The report's figures (matplotlib, Agg). Each builder reads its data with
plain SQL, keeps the statements SQLite ran for it (the report prints them
under the figure), and writes a PNG and an SVG of it into the report folder.
The data functions are apart from the drawing, so tests can check the numbers
without looking at pixels. What every builder uses is in analysis/plot_kit.py."""
from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display on a build machine; must precede pyplot
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import experiments  # noqa: E402
import timing  # noqa: E402
from analysis.plot_kit import (Figure, batches, hops_from_cpu, id_list, kernel_colours,  # noqa: E402
                               kernel_label, kernel_lines, lines, save, sql_log, topology)

# --- memeater: guest ms per chunk, coloured by hops -------------------------------
CHUNKS_SQL = ("SELECT run_id, cycle, chunk, wall_ms, main_node, swap_used_kib FROM chunk_times "
              "WHERE run_id IN ({ids}) ORDER BY run_id, cycle, chunk")


def chunk_series(con, runs) -> dict[int, dict]:
    """Per run: each chunk's place in the sequence over cycles, guest ms, hops
    of its main node from the CPU's node (None: unknown), swap used (MiB), and
    where each cycle starts."""
    out = {r["id"]: {"seq": [], "ms": [], "hops": [], "swap_mib": [], "cycle_starts": []} for r in runs}
    hops = {r["id"]: hops_from_cpu(r) for r in runs}
    last = {}
    for x in con.execute(CHUNKS_SQL.format(ids=id_list(out))):
        s, h = out[x["run_id"]], hops[x["run_id"]]
        n = len(s["seq"])
        if last.get(x["run_id"]) != x["cycle"]:
            s["cycle_starts"].append(n)
            last[x["run_id"]] = x["cycle"]
        s["seq"].append(n)
        s["ms"].append(x["wall_ms"])
        node = x["main_node"]
        s["hops"].append(h[node] if h is not None and node is not None and node < len(h) else None)
        s["swap_mib"].append(None if x["swap_used_kib"] is None else x["swap_used_kib"] / 1024)
    return out


def memeater_chunks(con, runs, out: Path) -> list[Figure]:
    figs = []
    for part, batch in enumerate(batches(runs), 1):
        with sql_log(con) as log:
            series = chunk_series(con, batch)
        maxhop = max([h for s in series.values() for h in s["hops"] if h is not None], default=0)
        # viridis without its pale yellow end, which vanishes on white
        colour = lambda h: plt.get_cmap("viridis")(0.85 * h / max(maxhop, 1))
        fig, axes = plt.subplots(len(batch), 1, figsize=(11, 3.4 * len(batch)), squeeze=False)
        for ax, r in zip(axes[:, 0], batch):
            s = series[r["id"]]
            for h in sorted(set(s["hops"]), key=lambda v: (v is None, v or 0)):
                pts = [(x, y) for x, y, hh in zip(s["seq"], s["ms"], s["hops"]) if hh == h]
                ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=16, zorder=3,
                           color="0.6" if h is None else colour(h),
                           label="hops unknown" if h is None else f"{h} hop{'' if h == 1 else 's'}")
            for c in s["cycle_starts"][1:]:
                ax.axvline(c - 0.5, color="0.55", lw=0.8, ls=":")
            if not s["seq"]:
                ax.text(0.5, 0.5, "no chunk_times rows", transform=ax.transAxes, ha="center")
            ms = [v for v in s["ms"] if v and v > 0]
            if ms and max(ms) / min(ms) > 30:
                ax.set_yscale("log")  # first touch vs swapping spans decades
            else:
                ax.set_ylim(bottom=0)
            ax.set_xlabel("chunk (sequence over cycles; dotted lines: cycle starts)")
            ax.set_ylabel("guest ms per chunk")
            ax2 = ax.twinx()
            if any(v is not None for v in s["swap_mib"]):
                ax2.plot(s["seq"], [np.nan if v is None else v for v in s["swap_mib"]], color="tab:red",
                         lw=1.4, label="swap used")
            ax2.set_ylabel("swap used (MiB)", color="tab:red")
            ax2.set_ylim(bottom=0)
            ax.set_zorder(ax2.get_zorder() + 1)  # the chunks in front of the swap line
            ax.patch.set_visible(False)
            h1, l1 = ax.get_legend_handles_labels()
            h2, l2 = ax2.get_legend_handles_labels()
            ax.legend(h1 + h2, l1 + l2, loc="upper left", fontsize=8, title="main node: hops from CPU",
                      title_fontsize=8)
            ax.set_title(f"run {r['id']}: memeater on {r['topology']}, {kernel_label(r)}"
                         + ("" if hops_from_cpu(r) else " (unpinned: hops unknown)"), fontsize=10)
        fig.tight_layout()
        save(fig, out, name := f"fig-memeater-chunks-{part}")
        figs.append(Figure(name, "memeater: guest time per chunk", (
            "Guest milliseconds to memset each chunk (guest clock), chunk after chunk over all cycles; colour: "
            "hops from the pinned CPU's node to the node that held most of the chunk's sampled pages (hop "
            "matrix from runs.topology_toml); red line: swap in use after the chunk."), [r["id"] for r in batch], log))
    return figs


# --- memeater: free memory per node ---------------------------------------------
FREE_SQL = ("SELECT run_id, seq, cycle, chunk, node, free_kib FROM node_free "
            "WHERE run_id IN ({ids}) ORDER BY run_id, seq, node")


def free_matrix(rows, nodes: int) -> tuple[np.ndarray, list]:
    """node x chunk-sequence matrix of free MiB (NaN: not sampled) from one
    run's node_free rows, and each column's (cycle, chunk)."""
    seqs = sorted({r["seq"] for r in rows})
    col = {s: i for i, s in enumerate(seqs)}
    nodes = max([nodes] + [r["node"] + 1 for r in rows])  # a guest that saw more nodes still fits
    m = np.full((nodes, len(seqs)), np.nan)
    where = [None] * len(seqs)
    for r in rows:
        m[r["node"], col[r["seq"]]] = r["free_kib"] / 1024
        where[col[r["seq"]]] = (r["cycle"], r["chunk"])
    return m, where


def memeater_free(con, runs, out: Path) -> list[Figure]:
    figs = []
    for part, batch in enumerate(batches(runs), 1):
        with sql_log(con) as log:
            rows = con.execute(FREE_SQL.format(ids=id_list(r["id"] for r in batch))).fetchall()
        heights = [max(2.6, 0.2 * r["nodes"] + 1.4) for r in batch]
        fig, axes = plt.subplots(len(batch), 1, figsize=(11, sum(heights)), squeeze=False,
                                 gridspec_kw={"height_ratios": heights})
        for ax, r in zip(axes[:, 0], batch):
            m, where = free_matrix([x for x in rows if x["run_id"] == r["id"]], r["nodes"])
            hops = hops_from_cpu(r)
            if not where:
                ax.text(0.5, 0.5, f"run {r['id']}: no node_free rows", transform=ax.transAxes, ha="center")
                ax.set_axis_off()
                continue
            # rows in hop order from the CPU's node: the fill shows as a staircase
            order = sorted(range(m.shape[0]), key=lambda n: (hops[n] if hops and n < len(hops) else 0, n))
            im = ax.imshow(m[order], aspect="auto", interpolation="nearest", cmap="viridis", vmin=0,
                           vmax=max(r["memory_mib_per_node"], np.nanmax(m)))
            ax.set_yticks(range(len(order)))
            ax.set_yticklabels([f"{n} ({hops[n]})" if hops and n < len(hops) else str(n) for n in order],
                               fontsize=7 if len(order) > 16 else 8)
            ax.set_ylabel("node (hops from CPU)" if hops else "node")
            ax.set_xlabel("chunk (sequence over cycles; white lines: cycle starts)")
            starts = [i for i, w in enumerate(where) if i == 0 or w[0] != where[i - 1][0]]
            for c in starts[1:]:
                ax.axvline(c - 0.5, color="white", lw=1)
            fig.colorbar(im, ax=ax, pad=0.01).set_label("free memory (MiB)")
            ax.set_title(f"run {r['id']}: free memory per node after each chunk, {r['topology']}, "
                         f"{kernel_label(r)}", fontsize=10)
        fig.tight_layout()
        save(fig, out, name := f"fig-memeater-free-{part}")
        figs.append(Figure(name, "memeater: free memory per node", (
            "MemFree of every node after each chunk (node_free), nodes sorted by hops from the pinned CPU's "
            "node: memory fills the CPU's node first, then the nearer nodes."), [r["id"] for r in batch], log))
    return figs


# --- latprobe: load latency and lock-line transfers by hops --------------------------
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
            add(r, "xfer", "topology", hops, timing.c2c_ns(topo, owner, b["home"], req))
            # the prober's round trip is two hand-offs of the line
            add(r, "xfer", "guest", hops, b["rtt_ns"] / 2 if b.get("rtt_ns") else None)
    lat = experiments.results_module("latprobe")
    for x in con.execute(DETAILED_SQL.format(ids=id_list(byid))).fetchall():
        chase, pingpong = lat.rows(con, x["run_id"])
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


# --- kvio and forkstorm: one line per kernel ---------------------------------------
KVIO_SQL = ("SELECT k.run_id, r.topology, r.patch_set, r.kernel_flavor, k.level, k.io_frac, k.ops_per_s "
            "FROM kvio_levels k JOIN runs r ON r.id = k.run_id WHERE k.run_id IN ({ids}) "
            "ORDER BY r.topology, r.patch_set, k.level")
FORKSTORM_SQL = ("SELECT r.id AS run_id, r.cpus, r.topology, r.patch_set, r.kernel_flavor, m.value AS jobs_per_min, "
                 "(SELECT SUM(l.contentions) FROM repro_lockstat l WHERE l.run_id = r.id AND l.phase = 'run') "
                 "AS contentions FROM runs r LEFT JOIN metrics m ON m.run_id = r.id "
                 "AND m.name = 'forkstorm.jobs_per_min' WHERE r.id IN ({ids}) ORDER BY r.cpus, r.id")


def kvio(con, runs, out: Path) -> list[Figure]:
    with sql_log(con) as log:
        rows = con.execute(KVIO_SQL.format(ids=id_list(r["id"] for r in runs))).fetchall()
    topos = sorted({r["topology"] for r in rows})
    if not topos:
        return []
    ncols = min(3, len(topos))  # a row of at most three topologies, then the next row
    nrows = -(-len(topos) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(max(7, 5.5 * ncols), 4.4 * nrows), squeeze=False)
    for ax in axes.flat[len(topos):]:
        ax.set_axis_off()
    per_topo = {t: lines([r for r in rows if r["topology"] == t], "io_frac", "ops_per_s") for t in topos}
    colours = kernel_colours(*per_topo.values())
    for ax, t in zip(axes.flat, topos):
        kernel_lines(ax, per_topo[t], colours)
        ax.set_xlabel("background IO level: dd writes (x guest RAM)")
        ax.set_ylabel("key-value ops/s (guest clock)")
        ax.set_ylim(bottom=0)
        ax.set_title(f"kvio on {t}", fontsize=10)
    fig.tight_layout()
    save(fig, out, "fig-kvio")
    return [Figure("fig-kvio", "kvio: throughput against background IO", (
        "Key-value store operations per second at each background-IO level (kvio_levels), one line per "
        "kernel; runs of the same kernel and level are averaged."), sorted({r["run_id"] for r in rows}), log)]


def forkstorm(con, runs, out: Path) -> list[Figure]:
    with sql_log(con) as log:
        rows = con.execute(FORKSTORM_SQL.format(ids=id_list(r["id"] for r in runs))).fetchall()
    jobs, locks = lines(rows, "cpus", "jobs_per_min"), lines(rows, "cpus", "contentions")
    if not jobs and not locks:
        return []
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6))
    colours = kernel_colours(jobs, locks)
    kernel_lines(axes[0], jobs, colours)
    axes[0].set_ylabel("jobs per minute (guest clock)")
    axes[0].set_title("fork storm throughput", fontsize=10)
    kernel_lines(axes[1], locks, colours, marker="s")
    axes[1].set_ylabel("lock contentions (count; lock_stat, top classes)")
    axes[1].set_title("lock contention" + ("" if locks else " (needs --flavor lockstat)"), fontsize=10)
    # CPU count comes with the topology: name the machines under each count
    topos: dict[int, set] = {}
    for r in rows:
        topos.setdefault(r["cpus"], set()).add(r["topology"])
    for ax in axes:
        ax.set_xlabel("CPUs (runs.cpus; the topologies below)")
        ax.set_xticks(sorted(topos), ["\n".join([str(c), *sorted(topos[c])]) for c in sorted(topos)], fontsize=8)
        ax.set_ylim(bottom=0)
    fig.tight_layout()
    save(fig, out, "fig-forkstorm")
    return [Figure("fig-forkstorm", "forkstorm: throughput and lock contention against CPUs", (
        "Jobs per minute (metric forkstorm.jobs_per_min) and lock_stat contentions summed over the top classes "
        "the guest reported (repro_lockstat, phase 'run'; lockstat kernels only), one line per kernel; runs of "
        "the same kernel and CPU count are averaged."), [r["run_id"] for r in rows], log)]


# (experiment, builder), in the report's order; the compare tables go between latprobe and kvio
BEFORE_COMPARE = (("memeater", memeater_chunks), ("memeater", memeater_free), ("latprobe", latprobe))
AFTER_COMPARE = (("kvio", kvio), ("forkstorm", forkstorm))


def build(con, runs, out: Path, builders) -> list[Figure]:
    """Run each builder on the ok runs of its experiment."""
    figs = []
    for exp, fn in builders:
        mine = [r for r in runs if r["experiment"] == exp and r["status"] == "ok"]
        if mine:
            figs += fn(con, mine, out)
    return figs
