"""What an experiment's own results.py may declare: the protocol between it
and the results stage, written once. Every hook is optional; an experiment
without results.py keeps only the core's tables.

    SCHEMA           list of SQL scripts: its tables' versioned steps (append, never edit)
    SANITY           True if its guest program sends a `sanity` record (the summary says when one is missing)
    QUERY_TABLE      the table `./run.py show` points a researcher at (default: records)
    ingest(con, run_id, parsed, topo)            its records into its tables, inside the run's transaction
    figures(con, run_id, run_row, params, w)     its part of the summary, before the per-node table
    verdict(con, run_id, run_row, params, w)     its conclusion, after the reclaim counters
    compare_figures(con, run_id) -> {name: (value, unit)}   figures only its tables hold, for comparisons

`hooks()` checks a module against this when it is loaded (types, and each
function's parameters), so a misshapen hook is one error naming the file,
not a TypeError in the middle of a summary. Its figures' meanings (unit,
direction, aggregation) are declared in the manifest, not here
(experiments/metrics.py).
"""
from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

from experiments.errors import ExperimentError

# hook -> its parameters, as the results stage calls it
FUNCTIONS = {"ingest": ("con", "run_id", "parsed", "topo"), "figures": ("con", "run_id", "r", "params", "w"),
             "verdict": ("con", "run_id", "r", "params", "w"), "compare_figures": ("con", "run_id")}
CONSTANTS = {"SCHEMA": list, "SANITY": bool, "QUERY_TABLE": str}


def _none(*_a) -> None:
    return None


@dataclass(frozen=True)
class ResultsHooks:
    name: str
    SCHEMA: tuple[str, ...] = ()
    SANITY: bool = False
    QUERY_TABLE: str = "records"
    ingest: Callable = _none
    figures: Callable = _none
    verdict: Callable = _none
    compare_figures: Callable = lambda con, run_id: {}


def hooks(name: str, module: ModuleType | None) -> ResultsHooks:
    """The hooks module declares (defaults for the rest); ExperimentError if one is misshapen."""
    if module is None:
        return ResultsHooks(name)
    where = getattr(module, "__file__", name)
    found = {}
    for k, typ in CONSTANTS.items():
        if hasattr(module, k):
            v = getattr(module, k)
            if not isinstance(v, typ) or (typ is list and not all(isinstance(s, str) for s in v)):
                want = "a list of SQL scripts" if typ is list else typ.__name__
                raise ExperimentError(f"{where}: {k}: expected {want}, got {v!r}")
            found[k] = tuple(v) if typ is list else v
    for k, params in FUNCTIONS.items():
        if hasattr(module, k):
            f = getattr(module, k)
            if not callable(f):
                raise ExperimentError(f"{where}: {k}: expected a function, got {f!r}")
            try:
                inspect.signature(f).bind(*params)
            except TypeError:
                raise ExperimentError(f"{where}: {k}: expected a function of ({', '.join(params)})") from None
            found[k] = f
    return ResultsHooks(name, **found)
