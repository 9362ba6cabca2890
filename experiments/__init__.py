"""Workload stage: an experiment is one folder, experiments/<name>/.

- manifest.toml: the static programs to build, the guest command, its
  parameters (typed, with defaults, help, and bounds: `min`, and `max` as a
  number or an expression such as "max_procs") and how sizes derive from the
  topology (small expressions over node_mib, total_mib, nodes, cpus,
  cpus_per_node, clock_ghz, max_procs and the parameters), so a reproducer
  keeps its shape when the machine is scaled. Checked against the schema
  (manifest.py) when loaded; resolve() refuses values the guest or the run
  could not take (limits.py).
- <program>.c: the guest programs, linked with the guest library (lib/).
- results.py (optional): the experiment's own tables (declared with
  analysis/kit.py: TABLES, and their versioned SCHEMA steps, applied by
  analysis/db.py), their ingest from records, its part of the run summary
  and its comparison figures. See experiments/memeater/results.py.
- plots.py (optional): its figures in the HTML report (FIGURES, PLACE,
  ORDER; read by analysis/plots.py). See experiments/memeater/plots.py.
Those two are results-stage code kept in the experiment's folder: this
package never imports them; analysis/experiment_results.py loads them by
name and states results.py's protocol.

The modules here, lowest first (each imports only modules above it):
- errors.py: ExperimentError (a leaf, raised by all the others)
- expr.py: the expression language of sizes, bounds and checks
- limits.py: what the guest or the run cannot take
- manifest.py: the manifest's schema and its typed parameters (Param)
- metrics.py: the figures a manifest declares (unit, direction, aggregation)
- this file: the registry (available, load), an Experiment resolved against
  a topology into a Plan, and the names callers use as experiments.X
"""
from __future__ import annotations

import math
import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from experiments.errors import ExperimentError
from experiments.expr import evaluate
from experiments.limits import (  # noqa: F401  (re-exported)
    GUEST_LONG_MAX,
    GUEST_PAGE_BYTES,
    GUEST_PID_MAX_DEFAULT,
    GUEST_PIDS_PER_CPU,
    GUEST_THREADS_PER_MIB,
    MAX_TIMEOUT_S,
    SWAP_MAP_BYTES_PER_PAGE,
    ZRAM_TABLE_BYTES_PER_PAGE,
    check_guest,
    max_procs,
    max_swap_frac,
)
from experiments.manifest import (  # noqa: F401  (re-exported)
    KERNEL_DEFAULT,
    MANIFEST,
    PARAM,
    PROGRESS,
    REQUIRED,
    TYPES,
    Param,
    check_manifest,
    parse_params,
    shown,
)
from experiments.metrics import Metric, find, parse_metrics

HERE = Path(__file__).resolve().parent
LIB = HERE / "lib"  # the guest library: vmlab.h, vmlab_facts.h and the .c files of libvmlab.a
COMMON = HERE / "common.toml"


def lib_sources() -> list[Path]:
    """The guest library's C files, which every guest program links (as
    libvmlab.a, built per arch by build/SConstruct)."""
    return sorted(LIB.glob("*.c"))


@dataclass
class Experiment:
    name: str
    dir: Path
    manifest: dict
    params: dict[str, Param] = field(default_factory=dict)
    metrics: tuple[Metric, ...] = ()   # the manifest's, then common.toml's (experiments/metrics.py)

    def own_params(self) -> dict[str, Param]:
        """The parameters its manifest declares (common.toml's, unless the
        manifest declares one again, left out)."""
        return {k: p for k, p in self.params.items() if k in self.manifest.get("params", {})}

    def metric(self, name: str) -> Metric | None:
        """The declaration a stored figure of this experiment falls under, or None."""
        return find(self.metrics, name)

    @property
    def programs(self) -> list[Path]:
        return [self.dir / p for p in self.manifest.get("programs", [])]

    @property
    def summary(self) -> str:
        return self.manifest.get("summary", "")

    def resolve(self, topo, overrides: dict[str, str], source: str = "--param") -> Plan:
        """Parameters + topology -> the concrete values the guest gets."""
        for k in overrides:
            if k not in self.params:
                raise ExperimentError(f"{source}: unknown parameter '{k}' for {self.name}; expected one of "
                                      f"{', '.join(sorted(self.params))}")
        values = {k: (p.convert(overrides[k], source) if k in overrides else p.default) for k, p in self.params.items()}
        names = {"nodes": topo.nodes, "cpus": topo.cpus, "cpus_per_node": topo.cpus_per_node,
                 "node_mib": topo.memory_mib, "total_mib": topo.total_memory_mib, "clock_ghz": topo.clock_ghz,
                 "max_procs": max_procs(topo), **values}
        mpath = self.dir / "manifest.toml"
        given = ", ".join(f"{k}={shown(overrides[k])}" for k in overrides) or "the defaults"
        for k, p in self.params.items():  # an expression max needs the topology
            if isinstance(p.max, str) and values[k] != KERNEL_DEFAULT:
                where = mpath if k in self.manifest.get("params", {}) else COMMON
                try:
                    bound = evaluate(p.max, names)
                except (ExperimentError, ZeroDivisionError, TypeError) as e:
                    raise ExperimentError(f"{where}: field 'params.{k}.max': {e}") from None
                if values[k] > bound:
                    raise ExperimentError(f"{source if k in overrides else where}: parameter '{k}': expected <= "
                                          f"{bound} ({p.max} on {topo.name}), got {values[k]!r}")
        for k, expr in self.manifest.get("derived", {}).items():
            try:
                names[k] = evaluate(expr, names)
            except (ExperimentError, ZeroDivisionError, TypeError) as e:
                raise ExperimentError(f"{mpath}: field 'derived.{k}': {e}") from None
            except (OverflowError, ValueError) as e:  # an absurd value: ceil(1e308 * 10) and the like
                raise ExperimentError(f"{source}: parameters {given}: expected values for which derived.{k} = "
                                      f"{expr!r} is a finite number ({e})") from None
            v = names[k]
            if not isinstance(v, (int, float)) or isinstance(v, float) and not math.isfinite(v):
                raise ExperimentError(f"{source}: parameters {given}: expected values for which derived.{k} = "
                                      f"{expr!r} is a finite number, got {v!r}")
        for k, (expr, expected) in self.manifest.get("checks", {}).items():
            if not evaluate(expr, names):
                raise ExperimentError(f"{source}: parameter '{k}': expected {expected}, got {names.get(k)!r}")
        check_guest(self.manifest, topo, values, names, overrides, source, mpath, given)
        try:
            command = self.manifest["command"].format(**{k: shlex.quote(str(v)) for k, v in names.items()})
        except KeyError as e:
            raise ExperimentError(f"{mpath}: field 'command': unknown name {e}") from None
        expr = str(self.manifest.get("timeout_s", 600))
        try:
            timeout = float(evaluate(expr, names))
        except OverflowError:
            timeout = math.inf
        if not 0 < timeout <= MAX_TIMEOUT_S:  # nan fails too
            where = f"{source}: parameters {given}" if overrides else f"{mpath}: field 'timeout_s'"
            raise ExperimentError(f"{where}: expected a run within {MAX_TIMEOUT_S:g} s (the bound --timeout has), "
                                  f"but timeout_s = {expr!r} gives {timeout:.3g} s on {topo.name}")
        derived = {k: names[k] for k in self.manifest.get("derived", {})}
        return Plan(self, values, derived, command, timeout)


@dataclass
class Plan:
    experiment: Experiment
    params: dict
    derived: dict
    command: str
    timeout_s: float

    @property
    def all_values(self) -> dict:
        return {**self.params, **self.derived}

    def knobs(self) -> list[tuple[str, str, object]]:
        """(parameter, guest file, value) for every parameter that sets a knob."""
        ps = self.experiment.params
        return [(k, ps[k].knob, v) for k, v in self.params.items() if ps[k].knob and v != KERNEL_DEFAULT]


def available() -> list[str]:
    return sorted(p.parent.name for p in HERE.glob("*/manifest.toml"))


def common_params() -> dict[str, Param]:
    """common.toml's parameters, which every experiment takes (a manifest
    may declare one again, with its own default)."""
    try:
        common = tomllib.loads(COMMON.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ExperimentError(f"{COMMON}: not valid TOML ({e})") from None
    check_manifest(common, COMMON, common=True)
    return parse_params(common.get("params", {}), COMMON)


def load(name: str) -> Experiment:
    path = HERE / name / "manifest.toml"
    if "/" in name or not path.is_file():
        raise ExperimentError(f"--exp: expected one of {', '.join(available())}, got {name!r}")
    try:
        data = tomllib.loads(path.read_text())
        common = tomllib.loads(COMMON.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ExperimentError(f"{path}: not valid TOML ({e})") from None
    check_manifest(data, path)
    check_manifest(common, COMMON, common=True)
    exp = Experiment(data["name"], path.parent, data)
    exp.params = {**parse_params(common.get("params", {}), COMMON), **parse_params(data.get("params", {}), path)}
    # common.toml's patterns ({exp}.sanity_ok ...) are written with the experiment's name in them
    common_metrics = {k.replace("{exp}", exp.name): v for k, v in common.get("metrics", {}).items()}
    exp.metrics = parse_metrics(data.get("metrics", {}), path) + parse_metrics(common_metrics, COMMON)
    for prog in exp.programs:
        if not prog.is_file():
            raise ExperimentError(f"{path}: field 'programs': {prog.name} not found")
    return exp


def parse_overrides(items: list[str]) -> dict[str, str]:
    """`--param a=1 --param b=2` or `--param a=1,b=2`."""
    out = {}
    for item in items:
        for part in item.split(","):
            if not part:
                continue
            if "=" not in part:
                raise ExperimentError(f"--param: expected NAME=VALUE, got {part!r}")
            k, v = part.split("=", 1)
            out[k.strip()] = v.strip()
    return out
