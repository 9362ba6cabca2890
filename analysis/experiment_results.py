"""Results stage: each experiment's own results-stage modules, kept in its
folder (experiments/<name>/results.py and plots.py), loaded by name here,
and the protocol a results.py follows, written once. Every hook is
optional; an experiment without results.py keeps only the core's tables.

    TABLES           its tables and views, declared with analysis/kit.py (what ./run.py browse describes)
    SCHEMA           list of SQL scripts: its tables' versioned steps (kit.schema(*TABLES); append, never edit)
    SANITY           True if its guest program sends a `sanity` record (the summary says when one is missing)
    QUERY_TABLE      the table `./run.py show` points a researcher at (default: records)
    ingest(con, run_id, parsed, topo)            its records into its tables, inside the run's transaction
    figures(con, run_id, r, params, w)           its part of the summary, before the per-node table
                                                 (r: the run's row, runs.*; w: writes a line)
    verdict(con, run_id, r, params, w)           its conclusion, after the reclaim counters
    compare_figures(con, run_id) -> {name: (value, unit)}   figures only its tables hold, for comparisons

`hooks()` checks a module against this when it is loaded (types, and each
function's parameters), so a misshapen hook is one error naming the file,
not a TypeError in the middle of a summary. Its figures' meanings (unit,
direction, aggregation) are declared in the manifest, not here
(experiments/metrics.py). plots.py's protocol is analysis/plots.py's.

The loader imports each module by name, which tests/test_import_direction.py
counts as an import: such a module may import analysis helpers (kit, rows)
but none that goes through this loader (summary, db, plots, ...).
"""
from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

import experiments
from analysis.kit import Table, View
from experiments.errors import ExperimentError

# hook -> its parameters, as the results stage calls it
FUNCTIONS = {"ingest": ("con", "run_id", "parsed", "topo"), "figures": ("con", "run_id", "r", "params", "w"),
             "verdict": ("con", "run_id", "r", "params", "w"), "compare_figures": ("con", "run_id")}
CONSTANTS = {"TABLES": tuple, "SCHEMA": list, "SANITY": bool, "QUERY_TABLE": str}


def _none(*_a) -> None:
    return None


@dataclass(frozen=True)
class ResultsHooks:
    name: str
    TABLES: tuple[Table | View, ...] = ()
    SCHEMA: tuple[str, ...] = ()
    SANITY: bool = False
    QUERY_TABLE: str = "records"
    ingest: Callable = _none
    figures: Callable = _none
    verdict: Callable = _none
    compare_figures: Callable = lambda con, run_id: {}


def _module(name: str, kind: str) -> ModuleType | None:
    """experiments/<name>/<kind>.py, or None: no such experiment (a name read
    back from a database may be one this checkout lacks, or no name at all)
    or one without that module."""
    d = experiments.HERE / name
    if not name.isidentifier() or not (d / "manifest.toml").is_file() or not (d / f"{kind}.py").is_file():
        return None
    return importlib.import_module(f"experiments.{name}.{kind}")


def results_module(name: str) -> ModuleType | None:
    """experiments/<name>/results.py, or None (no such experiment, or one
    with only the core's tables)."""
    return _module(name, "results")


def plots_module(name: str) -> ModuleType | None:
    """experiments/<name>/plots.py (its report figures, run by
    analysis/plots.py), or None: no such experiment or one without figures
    of its own."""
    return _module(name, "plots")


def all_results() -> dict[str, ModuleType]:
    """Every experiment's results module: the schema machinery applies
    their SCHEMA to every database."""
    return {n: m for n in experiments.available() if (m := results_module(n)) is not None}


@functools.cache  # a module's hooks do not change: checked once, not per figure
def results(name: str) -> ResultsHooks:
    """experiments/<name>/results.py through its declared protocol: every
    hook there, a default for the rest."""
    return hooks(name, results_module(name))


def hooks(name: str, module: ModuleType | None) -> ResultsHooks:
    """The hooks module declares (defaults for the rest); ExperimentError if one is misshapen."""
    if module is None:
        return ResultsHooks(name)
    where = getattr(module, "__file__", name)
    found = {}
    for k, typ in CONSTANTS.items():
        if hasattr(module, k):
            v = getattr(module, k)
            items_ok = {list: lambda x: isinstance(x, str), tuple: lambda x: isinstance(x, (Table, View))}
            if not isinstance(v, typ) or (typ in items_ok and not all(map(items_ok[typ], v))):
                want = {list: "a list of SQL scripts", tuple: "a tuple of analysis.kit Table and View declarations"}
                raise ExperimentError(f"{where}: {k}: expected {want.get(typ, typ.__name__)}, got {v!r}")
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
