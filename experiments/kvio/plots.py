"""kvio's report figure (analysis/plots.py runs it on its ok runs): key-value
ops/s against the background-IO level, one line per kernel, a panel per
topology."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display on a build machine; must precede pyplot
import matplotlib.pyplot as plt

from analysis.plot_kit import Figure, id_list, kernel_colours, kernel_lines, lines, save, sql_log

KVIO_SQL = ("SELECT k.run_id, r.topology, r.patch_set, r.kernel_flavor, k.level, k.io_frac, k.ops_per_s "
            "FROM kvio_levels k JOIN runs r ON r.id = k.run_id WHERE k.run_id IN ({ids}) "
            "ORDER BY r.topology, r.patch_set, k.level")


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


FIGURES = (kvio,)
PLACE = "after"  # in the report: after the kernel-comparison tables
ORDER = 30  # among the experiments of its PLACE, lower first
