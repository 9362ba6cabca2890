"""forkstorm's report figure (analysis/plots.py runs it on its ok runs): jobs
per minute and lock contention against CPUs, one line per kernel."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display on a build machine; must precede pyplot
import matplotlib.pyplot as plt

from analysis.plot_kit import Figure, id_list, kernel_colours, kernel_lines, lines, save, sql_log

FORKSTORM_SQL = ("SELECT r.id AS run_id, r.cpus, r.topology, r.patch_set, r.kernel_flavor, m.value AS jobs_per_min, "
                 "(SELECT SUM(l.contentions) FROM repro_lockstat l WHERE l.run_id = r.id AND l.phase = 'run') "
                 "AS contentions FROM runs r LEFT JOIN metrics m ON m.run_id = r.id "
                 "AND m.name = 'forkstorm.jobs_per_min' WHERE r.id IN ({ids}) ORDER BY r.cpus, r.id")


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


FIGURES = (forkstorm,)
PLACE = "after"  # in the report: after the kernel-comparison tables
ORDER = 40  # among the experiments of its PLACE, lower first
