"""What the report's figures are built with (each experiment's figures are in
its folder, experiments/<name>/plots.py; analysis/plots.py finds them): the
Figure a builder returns, the log of the SQL it ran (the report prints it
under the figure), saving a PNG and an SVG, a run's kernel label and hops
from its pinned CPU, and one line per kernel."""
from __future__ import annotations

import contextlib
import functools
import json
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display on a build machine; must precede pyplot
import matplotlib.pyplot as plt

import topologies

PANELS = 6  # runs per figure file: a big study gets several files, each still readable


@dataclass
class Figure:
    name: str            # file stem in the report folder
    title: str
    caption: str
    run_ids: list[int]
    sql: list[str]       # the statements that produced its data, as SQLite ran them


@contextlib.contextmanager
def sql_log(con):
    """Every distinct statement run on con inside the block, with its bound
    values filled in: the caption shows what really ran, not a paraphrase."""
    log: list[str] = []
    con.set_trace_callback(lambda s: log.append(s) if s not in log else None)
    try:
        yield log
    finally:
        con.set_trace_callback(None)


def id_list(ids) -> str:
    return ", ".join(str(int(i)) for i in ids)


def batches(runs, n=PANELS):
    return [runs[i:i + n] for i in range(0, len(runs), n)]


def save(fig, out: Path, name: str) -> None:
    fig.savefig(out / f"{name}.png", dpi=100, bbox_inches="tight")
    fig.savefig(out / f"{name}.svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)


def kernel_label(run) -> str:
    return run["patch_set"] + ("" if run["kernel_flavor"] == "default" else f" ({run['kernel_flavor']})")


@functools.lru_cache(maxsize=64)
def _topology(name: str, text: str):
    try:
        return topologies.parse(text, Path(f"{name}.toml"))
    except topologies.TopologyError:
        return None  # a topology file this vmlab no longer accepts: hops unknown, not a crash


def topology(run):
    return _topology(run["topology"], run["topology_toml"])


def hops_from_cpu(run) -> list[int] | None:
    """Hops from the node of the CPU the run was pinned to (param cpu) to each
    node, from the run's own topology; None when unpinned or unparsable."""
    topo = topology(run)
    cpu = json.loads(run["params_json"]).get("cpu")
    if topo is None or not isinstance(cpu, int) or not 0 <= cpu < topo.cpus:
        return None
    return list(topo.hops[cpu // topo.cpus_per_node])


# --- one line per kernel (experiments' figures that compare kernels: kvio, forkstorm) ---------------
def lines(rows, x: str, y: str) -> dict[str, dict]:
    """kernel -> {"runs": ids, "x": [...], "y": [mean y at each x]}."""
    acc: dict[str, dict] = {}
    for r in rows:
        if r[y] is None or r[x] is None:
            continue
        k = acc.setdefault(kernel_label(r), {"runs": [], "pts": {}})
        if r["run_id"] not in k["runs"]:
            k["runs"].append(r["run_id"])
        k["pts"].setdefault(r[x], []).append(r[y])
    return {name: {"runs": k["runs"], "x": sorted(k["pts"]),
                   "y": [sum(k["pts"][v]) / len(k["pts"][v]) for v in sorted(k["pts"])]} for name, k in acc.items()}


def kernel_colours(*by_kernel) -> dict[str, tuple]:
    """One colour per kernel for the whole figure, so panels read alike."""
    names = sorted(set().union(*by_kernel))
    return {n: plt.get_cmap("tab10")(i % 10) for i, n in enumerate(names)}


def kernel_lines(ax, by_kernel, colours, marker="o") -> None:
    for name, ln in sorted(by_kernel.items()):
        runs = ", ".join(map(str, ln["runs"]))
        ax.plot(ln["x"], ln["y"], marker=marker, color=colours[name],
                label=f"{name} (run{'s' if len(ln['runs']) > 1 else ''} {runs})")
    if by_kernel:
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center")
