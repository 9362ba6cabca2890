"""A study file (studies/*.toml): a matrix of runs.

    name = "numa-cost"
    description = "..."
    repeats = 1                        # runs of each combination (own keys)

    [axes]                             # the product of these lists
    topology = ["gs1280-8", "x86-2s"]
    experiment = ["latprobe", "memeater"]
    kernel = ["vanilla"]
    seed = [0]

    [run]                              # RunSpec fields fixed for every run
    timing = "detailed"

    [params]                           # every run's experiment parameters;
    swap = "none"                      # a list is an axis too

    [experiment.latprobe.params]       # parameters for one experiment only
    laps = 1

    [[matrix]]                         # optional: several products, each with its
    axes.topology = ["x86-4s"]         # own axes/run/params over the top level's

Every combination is checked like a single run (pipeline.execute.prepare)
before anything runs, so a bad study starts nothing. Keys dedupe: the same
run named twice runs once.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import math
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path

from analysis import studyfile
from pipeline.execute import prepare
from pipeline.spec import InputError, RunSpec

MAX_RUNS = 5000          # a study past this is a typo, not a plan (one host runs ~20 an hour)
MAX_AXIS = 500
MAX_REPEATS = 100
AXES = ("topology", "experiment", "kernel", "seed", "timing", "flavor", "quantum_ns", "disk", "qemu_mode")
RUN_FIELDS = {f.name for f in fields(RunSpec)} - {"params", "repeat"}


@dataclass
class PlannedRun:
    position: int
    key: str
    spec: RunSpec
    axes: dict        # what varies, for the report and progress lines
    prep: object      # pipeline.execute.Prepared


@dataclass
class Study:
    name: str
    description: str
    path: Path
    text: str
    sha256: str
    runs: list[PlannedRun]


def _err(path, field, expected, got=None) -> InputError:
    return studyfile.err(path, field, expected, got, InputError)


def _table(path, data, field, allowed=None) -> dict:
    return studyfile.table(path, data, field, allowed, InputError)


def _scalar(v) -> bool:
    return isinstance(v, (str, int, float, bool))


def _axis(path, field, v) -> list:
    vals = v if isinstance(v, list) else [v]
    if not vals or len(vals) > MAX_AXIS or not all(_scalar(x) for x in vals):
        raise _err(path, field, f"a value or a list of 1 to {MAX_AXIS} values", v)
    return vals


def _beside(path: Path, topology) -> str:
    t = str(topology)
    if "/" in t or t.endswith(".toml"):
        p = path.parent / t
        if p.exists():
            return str(p.resolve())
    return t


def _groups(path: Path, data: dict) -> list[dict]:
    """The file's [[matrix]] blocks over its top level (analysis/studyfile.py,
    the reader seeds/runs.py shares)."""
    return studyfile.groups(path, data, InputError)


def _expand(path: Path, g: dict, planned: dict, total: int) -> int:
    """Check one [[matrix]] block, then add its runs to `planned` (by key);
    returns the running count of combinations named."""
    w = g["where"]
    reps = g["repeats"]
    if isinstance(reps, bool) or not isinstance(reps, int) or not 1 <= reps <= MAX_REPEATS:
        raise _err(path, f"{w}repeats", f"an integer from 1 to {MAX_REPEATS}", reps)
    for k in g["axes"]:
        if k not in AXES:
            raise _err(path, f"{w}axes.{k}", f"one of {', '.join(AXES)}")
    for k, v in g["run"].items():
        if k not in RUN_FIELDS:
            raise _err(path, f"{w}run.{k}", f"a run option ({', '.join(sorted(RUN_FIELDS))})")
        if not _scalar(v):
            raise _err(path, f"{w}run.{k}", "a single value", v)
    axes = {k: _axis(path, f"{w}axes.{k}", v) for k, v in g["axes"].items()}
    if "topology" in axes:  # a topology file named by path is relative to the study file
        axes["topology"] = [_beside(path, t) for t in axes["topology"]]
    if "experiment" not in axes and "experiment" not in g["run"]:
        raise _err(path, f"{w}axes.experiment", "the experiments to run (a list of experiments/ folders)")
    names = list(axes)
    # Count before checking anything: an absurd matrix is refused at once.
    exps = axes.get("experiment", [g["run"].get("experiment")])
    others = math.prod(len(v) for k, v in axes.items() if k != "experiment")
    for e in exps:
        own = g["experiment"].get(str(e), {})
        own = own.get("params", {}) if isinstance(own, dict) else {}
        per = math.prod(len(v) if isinstance(v, list) else 1 for v in {**g["params"], **own}.values())
        total += others * per * reps
    if total > MAX_RUNS:
        raise _err(path, f"{w}axes", f"a study of at most {MAX_RUNS} runs, got {total}")
    for combo in itertools.product(*(axes[n] for n in names)):
        chosen = dict(zip(names, combo))
        exp = chosen.get("experiment", g["run"].get("experiment"))
        own = _table(path, g["experiment"], str(exp), {"params"}).get("params", {}) if str(exp) in \
            g["experiment"] else {}
        params = {**g["params"], **own}
        p_axes = {k: _axis(path, f"{w}params.{k}", v) for k, v in params.items()}
        for pcombo in itertools.product(*p_axes.values()):
            pvals = dict(zip(p_axes, pcombo))
            for rep in range(reps):
                fields_ = {**g["run"], **chosen, "repeat": rep}
                try:
                    spec = RunSpec(**{k: v for k, v in fields_.items() if k != "params"}).with_params(pvals)
                    prep = prepare(spec)
                except TypeError as e:
                    raise InputError(f"{path}: {e}") from None
                except InputError as e:
                    raise InputError(f"{path}: run {json.dumps({**chosen, **pvals, 'repeat': rep})}: {e}") \
                        from None
                if prep.key not in planned:
                    varied = {**chosen, **{f"param.{k}": v for k, v in pvals.items() if len(p_axes[k]) > 1}}
                    if "topology" in varied:
                        varied["topology"] = prep.topo.name  # a file's name, not its path
                    if reps > 1:
                        varied["repeat"] = rep
                    if g["name"]:  # which [[matrix]] block asked for it (a seed's block in seeds.toml)
                        varied["block"] = g["name"]
                    planned[prep.key] = PlannedRun(len(planned), prep.key, prep.spec, varied, prep)
    return total


def load(path: Path | str, groups: list[str] | None = None, topologies: list[str] | None = None,
         boot: bool = False) -> Study:
    """groups: only the [[matrix]] blocks with these names (e.g. one seed of
    studies/seeds.toml); topologies: only their runs on these machines (by
    topology name), e.g. the x86 columns again after an engine change that
    leaves the Alpha guests' runs as they were. Positions stay the full
    plan's, so a filtered and a whole run of one study order alike.
    boot: every run boots instead of restoring the machine's snapshot
    (`--boot`): another study ("NAME (booted)"), whose runs have their own
    keys, so its tables never mix the two starts."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise InputError(f"{path}: cannot read the study file ({e.strerror})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"{path}: not valid TOML ({e})") from None
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise _err(path, "name", "a non-empty string", name)
    description = data.get("description", "")
    if not isinstance(description, str):
        raise _err(path, "description", "a string", description)
    planned: dict[str, PlannedRun] = {}
    total = 0  # combinations named, duplicates included: bounded before each is checked
    chosen_groups = _groups(path, data)
    if groups is not None:
        names = [g["name"] for g in chosen_groups]
        for want in groups:
            if want not in names:
                raise InputError(f"{path}: no [[matrix]] block named {want!r} (there are: "
                                 f"{', '.join(str(n) for n in names if n) or 'none'})")
        chosen_groups = [g for g in chosen_groups if g["name"] in groups]
    for g in chosen_groups:
        total = _expand(path, {**g, "run": {**g["run"], "boot": True}} if boot else g, planned, total)
    runs = list(planned.values())
    if topologies is not None:
        have = sorted({r.prep.topo.name for r in runs})
        for want in topologies:
            if want not in have:
                raise InputError(f"{path}: no run on topology {want!r} in the chosen blocks (their machines: "
                                 f"{', '.join(have) or 'none'})")
        runs = [r for r in runs if r.prep.topo.name in topologies]
    if boot:
        name, text = f"{name.strip()} (booted)", text + "\n# ./run.py study --boot: every run boots\n"
    return Study(name.strip(), description, path, text, hashlib.sha256(text.encode()).hexdigest(),
                 runs)
