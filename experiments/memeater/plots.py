"""memeater's report figures (analysis/plots.py runs them on its ok runs):
guest ms per chunk coloured by hops, and free memory per node after each
chunk. chunk_series and free_matrix are the data, apart from the drawing."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display on a build machine; must precede pyplot
import matplotlib.pyplot as plt
import numpy as np

from analysis.plot_kit import Figure, batches, hops_from_cpu, id_list, kernel_label, save, sql_log

# --- guest ms per chunk, coloured by hops -------------------------------
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
        colour = lambda h: plt.get_cmap("viridis")(0.85 * h / max(maxhop, 1))  # noqa: B023 (used in this batch only)
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


# --- free memory per node ---------------------------------------------
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


FIGURES = (memeater_chunks, memeater_free)
PLACE = "before"  # in the report: before the kernel-comparison tables
ORDER = 10  # among the experiments of its PLACE, lower first
