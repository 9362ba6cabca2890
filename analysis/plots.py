"""The report's figures. Each experiment draws its own, in
experiments/<name>/plots.py (found through analysis/experiment_results.py's plots_module());
this module runs them, each on the ok runs of its experiment, in the
report's order. What such a module declares:

    FIGURES  its builders, in the order drawn: each (con, runs, out) -> list[Figure]
             reads its data with plain SQL inside plot_kit.sql_log (the report prints
             the statements under the figure) and writes a PNG and an SVG of each
             figure into the report folder out (plot_kit.save)
    PLACE    "before" or "after" the report's kernel-comparison tables
    ORDER    an int: its turn among the experiments of the same PLACE, lower first
             (ties by name)

Keep the data functions apart from the drawing, so tests can check the
numbers without looking at pixels (experiments/memeater/plots.py's
chunk_series and free_matrix). What every builder uses is in
analysis/plot_kit.py."""
from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import experiments
from analysis import experiment_results
from analysis.plot_kit import Figure
from experiments.errors import ExperimentError

PLACES = ("before", "after")
# what report.write() asks for around its kernel-comparison tables
BEFORE_COMPARE, AFTER_COMPARE = PLACES


def declared(module: ModuleType) -> tuple[tuple[Callable, ...], str, int]:
    """A plots module's FIGURES, PLACE and ORDER; ExperimentError, naming the
    file, if one is missing or misshapen."""
    where = getattr(module, "__file__", module.__name__)
    figs, place, order = (getattr(module, k, None) for k in ("FIGURES", "PLACE", "ORDER"))
    if not isinstance(figs, (tuple, list)) or not figs or not all(callable(f) for f in figs):
        raise ExperimentError(f"{where}: FIGURES: expected a tuple of figure builders, got {figs!r}")
    for f in figs:
        try:
            inspect.signature(f).bind("con", "runs", "out")
        except TypeError:
            raise ExperimentError(f"{where}: FIGURES: {f.__name__}: expected a function of (con, runs, out)") from None
    if place not in PLACES:
        raise ExperimentError(f"{where}: PLACE: expected one of {', '.join(map(repr, PLACES))}, got {place!r}")
    if not isinstance(order, int) or isinstance(order, bool):
        raise ExperimentError(f"{where}: ORDER: expected an int, got {order!r}")
    return tuple(figs), place, order


def builders(place: str) -> list[tuple[str, Callable]]:
    """(experiment, builder) for every experiment's figures at place, in the
    report's order: by ORDER, then name, then as its FIGURES lists them."""
    found = []
    for name in experiments.available():
        if (module := experiment_results.plots_module(name)) is not None:
            figs, where, order = declared(module)
            if where == place:
                found.append((order, name, figs))
    return [(name, fn) for _, name, figs in sorted(found, key=lambda x: x[:2]) for fn in figs]


def build(con, runs, out: Path, place: str) -> list[Figure]:
    """Run each builder at place on the ok runs of its experiment."""
    if place not in PLACES:
        raise ValueError(f"place: expected one of {PLACES}, got {place!r}")
    figs = []
    for exp, fn in builders(place):
        mine = [r for r in runs if r["experiment"] == exp and r["status"] == "ok"]
        if mine:
            figs += fn(con, mine, out)
    return figs
