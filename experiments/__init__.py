"""Workload stage: an experiment is one folder, experiments/<name>/.

- manifest.toml: the static programs to build, the guest command, its
  parameters (typed, with defaults, help, and bounds: `min`, and `max` as a
  number or an expression such as "max_procs") and how sizes derive from the
  topology (small expressions over node_mib, total_mib, nodes, cpus,
  cpus_per_node, clock_ghz, max_procs and the parameters), so a reproducer
  keeps its shape when the machine is scaled. Checked against MANIFEST below
  when loaded; resolve() refuses values the guest or the run could not take
  (see "Limits" below).
- <program>.c: the guest programs, linked with the guest library (lib/).
- results.py (optional): the experiment's own tables (SCHEMA, versioned,
  applied by analysis/db.py), their ingest from records, its part of the run
  summary and its comparison figures. See experiments/memeater/results.py.
"""
from __future__ import annotations

import ast
import importlib
import math
import operator
import re
import shlex
import string
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
LIB = HERE / "lib"  # the guest library: vmlab.h, vmlab_facts.h and the .c files of libvmlab.a
COMMON = HERE / "common.toml"
TYPES = {"int": int, "float": float, "str": str}
# A knob parameter set to this keeps the kernel's own default: /init leaves
# the file alone (a patched kernel may change the default, e.g.
# zone-reclaim-auto), and the guest reports the value it had.
KERNEL_DEFAULT = "kernel"


class ExperimentError(ValueError):
    pass


# What a manifest may hold: key -> accepted types, and for tables the keys
# of each entry. A misspelt key or section is an error, not ignored.
_EXPR = (str, int, float)
MANIFEST = {
    "name": (str,), "seed": (str,), "summary": (str,), "programs": (list,), "command": (str,), "timeout_s": _EXPR,
    "params": (dict,), "derived": (dict,), "checks": (dict,), "progress": (dict,),
}
PARAM = {"type": (str,), "default": (str, int, float), "help": (str,), "choices": (list,), "min": (int, float),
         "max": (int, float, str), "knob": (str,), "pattern": (str,)}
PROGRESS = {"record": (str,), "total": _EXPR, "label": (str,)}
REQUIRED = ("name", "command", "programs")

# --- Limits: what the guest or the run cannot take, refused by resolve() -------
# The longest run: the bound --timeout has (pipeline/execute.py MAX_TIMEOUT_S,
# run.py); a manifest's timeout_s past it means a count or size is absurd.
MAX_TIMEOUT_S = 1e7
# The guest programs read every number with strtol into a C long (64-bit on
# x86_64 and alpha; experiments/lib/util.c vl_opt_long), which saturates
# silently past this.
GUEST_LONG_MAX = 2**63 - 1
# Processes the guest kernel can hold at once (Linux 6.1), the name
# `max_procs` in manifests: pid_max = max(PID_MAX_DEFAULT, PIDS_PER_CPU_DEFAULT
# x CPUs) (include/linux/threads.h, CONFIG_BASE_SMALL=0; kernel/pid.c
# pid_idr_init) and threads-max = RAM / (8 x THREAD_SIZE) (kernel/fork.c
# set_max_threads; THREAD_SIZE is 16 KiB on x86_64 without KASAN and on
# alpha), so 8 per MiB; fork fails with EAGAIN past either.
GUEST_PID_MAX_DEFAULT = 0x8000
GUEST_PIDS_PER_CPU = 1024
GUEST_THREADS_PER_MIB = 8
# Swap the guest can enable: swapon keeps one byte per swap page in memory
# (mm/swapfile.c: swap_map = vzalloc(maxpages)), zram 16 more (drivers/block/
# zram/zram_drv.h struct zram_table_entry: handle and flags; no
# ZRAM_MEMORY_TRACKING), so past page / bytes-per-page times guest memory the
# swap's own tables need more than all of it.
GUEST_PAGE_BYTES = {"x86_64": 4096, "alpha": 8192}
SWAP_MAP_BYTES_PER_PAGE = 1
ZRAM_TABLE_BYTES_PER_PAGE = 16


def max_procs(topo) -> int:
    """The most processes the guest kernel can hold at once (see above)."""
    return min(max(GUEST_PID_MAX_DEFAULT, GUEST_PIDS_PER_CPU * topo.cpus), GUEST_THREADS_PER_MIB * topo.total_memory_mib)


def max_swap_frac(guest_isa: str, swap: str) -> float:
    """The largest swap_frac whose swap tables fit the guest's memory."""
    per_page = SWAP_MAP_BYTES_PER_PAGE + (ZRAM_TABLE_BYTES_PER_PAGE if swap == "zram" else 0)
    return GUEST_PAGE_BYTES.get(guest_isa, 4096) / per_page


def _names(types) -> str:
    return " or ".join({str: "a string", int: "an integer", float: "a number", list: "a list",
                        dict: "a table"}[t] for t in types)


def check_manifest(data: dict, path: Path, common: bool = False) -> None:
    """One line naming the file and the key for anything MANIFEST does not allow."""
    def keys(table: dict, allowed: dict, where: str):
        for k, v in table.items():
            field_ = f"{where}{k}"
            if k not in allowed:
                raise ExperimentError(f"{path}: field '{field_}': unknown key; expected one of "
                                      f"{', '.join(sorted(allowed))}")
            if not isinstance(v, allowed[k]) or isinstance(v, bool):
                raise ExperimentError(f"{path}: field '{field_}': expected {_names(allowed[k])}, got {v!r}")
    keys(data, {"params": (dict,)} if common else MANIFEST, "")
    for f in () if common else REQUIRED:
        if f not in data:
            raise ExperimentError(f"{path}: field '{f}': missing")
    for name, spec in data.get("params", {}).items():
        if not isinstance(spec, dict):
            raise ExperimentError(f"{path}: field 'params.{name}': expected a table, got {spec!r}")
        keys(spec, PARAM, f"params.{name}.")
    for k, v in data.get("derived", {}).items():
        if not isinstance(v, _EXPR) or isinstance(v, bool):
            raise ExperimentError(f"{path}: field 'derived.{k}': expected an expression (a string), got {v!r}")
    for k, v in data.get("checks", {}).items():
        if not (isinstance(v, list) and len(v) == 2 and all(isinstance(x, str) for x in v)):
            raise ExperimentError(f"{path}: field 'checks.{k}': expected [expression, what is expected], got {v!r}")
    keys(data.get("progress", {}), PROGRESS, "progress.")
    if not all(isinstance(p, str) for p in data.get("programs", [])):
        raise ExperimentError(f"{path}: field 'programs': expected a list of file names")


def lib_sources() -> list[Path]:
    """The guest library's C files, which every guest program links (as
    libvmlab.a, built per arch by scons-wrapper/SConstruct)."""
    return sorted(LIB.glob("*.c"))


# --- a small, safe expression language for sizes ----------------------------
_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_CMP = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
        ast.Eq: operator.eq, ast.NotEq: operator.ne}
_FUNCS = {"min": min, "max": max, "round": round, "ceil": math.ceil, "floor": math.floor, "int": int}


def evaluate(expr: str, names: dict):
    def ev(n):
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant) and isinstance(n.value, (int, float)):
            return n.value
        if isinstance(n, ast.Name):
            if n.id not in names:
                raise ExperimentError(f"unknown name {n.id!r} in {expr!r}")
            return names[n.id]
        if isinstance(n, ast.BinOp) and type(n.op) in _BIN:
            return _BIN[type(n.op)](ev(n.left), ev(n.right))
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            return -ev(n.operand)
        if isinstance(n, ast.Compare) and len(n.ops) == 1 and type(n.ops[0]) in _CMP:
            return _CMP[type(n.ops[0])](ev(n.left), ev(n.comparators[0]))
        if isinstance(n, ast.IfExp):
            return ev(n.body) if ev(n.test) else ev(n.orelse)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in _FUNCS and not n.keywords:
            return _FUNCS[n.func.id](*[ev(a) for a in n.args])
        raise ExperimentError(f"unsupported expression {ast.dump(n)[:60]} in {expr!r}")
    try:
        return ev(ast.parse(expr, mode="eval"))
    except SyntaxError as e:
        raise ExperimentError(f"bad expression {expr!r}: {e.msg}") from None


def _shown(raw: str) -> str:
    """An override as a one-line error shows it."""
    return raw if len(raw) <= 40 else f"{raw[:20]}...({len(raw)} characters)"


@dataclass
class Param:
    name: str
    type: str
    default: object
    help: str
    choices: list | None = None
    min: float | None = None
    knob: str | None = None  # guest file /init writes the value to (a sysctl, a sysfs switch)
    pattern: str | None = None  # a str parameter's shape (regular expression, whole value)
    max: float | str | None = None  # a number, or an expression over the topology's names (resolve checks it)

    def convert(self, raw: str, source: str):
        if self.knob and raw == KERNEL_DEFAULT:
            return KERNEL_DEFAULT
        try:
            v = TYPES[self.type](raw)
        except ValueError:
            raise ExperimentError(f"{source}: parameter '{self.name}': expected {self.type}, "
                                  f"got {_shown(raw)!r}") from None
        self.check(v, source)
        return v

    def check(self, v, source: str):
        """Everything but an expression max, which needs the topology (resolve)."""
        if self.knob and v == KERNEL_DEFAULT:
            return
        if isinstance(v, float) and not math.isfinite(v):
            raise ExperimentError(f"{source}: parameter '{self.name}': expected a finite number, got {v!r}")
        if self.choices is not None and v not in self.choices:
            raise ExperimentError(f"{source}: parameter '{self.name}': expected one of "
                                  f"{', '.join(map(str, self.choices))}, got {v!r}")
        if self.pattern is not None and not re.fullmatch(self.pattern, str(v)):
            raise ExperimentError(f"{source}: parameter '{self.name}': expected {self.help.split(';')[0]} "
                                  f"(matching {self.pattern}), got {v!r}")
        if self.min is not None and v < self.min:
            raise ExperimentError(f"{source}: parameter '{self.name}': expected >= {self.min}, got {v!r}")
        if self.max is not None and not isinstance(self.max, str) and v > self.max:
            raise ExperimentError(f"{source}: parameter '{self.name}': expected <= {self.max}, got {v!r}")


@dataclass
class Experiment:
    name: str
    dir: Path
    manifest: dict
    params: dict[str, Param] = field(default_factory=dict)

    @property
    def programs(self) -> list[Path]:
        return [self.dir / p for p in self.manifest.get("programs", [])]

    @property
    def summary(self) -> str:
        return self.manifest.get("summary", "")

    @property
    def results(self) -> ModuleType | None:
        """experiments/<name>/results.py, or None if the experiment keeps
        only the core's tables."""
        return results_module(self.name)

    def resolve(self, topo, overrides: dict[str, str], source: str = "--param") -> "Plan":
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
        given = ", ".join(f"{k}={_shown(overrides[k])}" for k in overrides) or "the defaults"
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
        self._check_limits(topo, values, names, overrides, source, mpath, given)
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

    def _check_limits(self, topo, values: dict, names: dict, overrides: dict, source: str, mpath: Path,
                      given: str) -> None:
        """What the guest cannot take whatever the manifest says (see Limits)."""
        for field_ in {f for _, f, _, _ in string.Formatter().parse(self.manifest["command"]) if f}:
            v = names.get(field_)
            if isinstance(v, int) and not isinstance(v, bool) and abs(v) > GUEST_LONG_MAX:
                what = "derived value" if field_ in self.manifest.get("derived", {}) else "parameter"
                where = f"{source}: parameters {given}" if overrides else f"{mpath}: field '{field_}'"
                raise ExperimentError(f"{where}: expected the {what} {field_} of the guest command within "
                                      f"{GUEST_LONG_MAX} (the guest program reads it as a C long), got {v:.3g}")
        swap, frac = values.get("swap"), values.get("swap_frac")  # the core's swap (pipeline/execute.py)
        if swap in ("disk", "zram") and isinstance(frac, (int, float)) and frac > max_swap_frac(topo.guest_isa, swap):
            page = GUEST_PAGE_BYTES.get(topo.guest_isa, 4096)
            where = source if "swap_frac" in overrides else mpath
            raise ExperimentError(f"{where}: parameter 'swap_frac': expected at most "
                                  f"{max_swap_frac(topo.guest_isa, swap):.4g} with swap={swap} (the guest keeps "
                                  f"{page / max_swap_frac(topo.guest_isa, swap):g} byte(s) per {page}-byte swap page "
                                  f"in memory: a larger swap's tables need more than all of it), got {frac!r}")


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


def _params(table: dict, path: Path) -> dict[str, Param]:
    out = {}
    for name, spec in table.items():
        t = spec.get("type")
        if t not in TYPES:
            raise ExperimentError(f"{path}: field 'params.{name}.type': expected one of {', '.join(TYPES)}, got {t!r}")
        if "default" not in spec:
            raise ExperimentError(f"{path}: field 'params.{name}.default': missing")
        default = spec["default"]
        if default == KERNEL_DEFAULT and not spec.get("knob"):
            raise ExperimentError(f"{path}: field 'params.{name}.default': {KERNEL_DEFAULT!r} needs a 'knob' "
                                  f"(it means: leave the kernel's default in that file)")
        try:
            default = default if default == KERNEL_DEFAULT else TYPES[t](default)
        except ValueError:
            raise ExperimentError(f"{path}: field 'params.{name}.default': expected {t}, got {default!r}") from None
        p = Param(name, t, default, spec.get("help", ""), spec.get("choices"), spec.get("min"), spec.get("knob"),
                  spec.get("pattern"), spec.get("max"))
        for bound in ("min", "max"):
            if bound in spec and t == "str":
                raise ExperimentError(f"{path}: field 'params.{name}.{bound}': expected only on an int or float "
                                      f"parameter (use choices or pattern for a str)")
        if isinstance(p.max, str):
            try:
                ast.parse(p.max, mode="eval")
            except SyntaxError as e:
                raise ExperimentError(f"{path}: field 'params.{name}.max': expected a number or an expression, "
                                      f"got {p.max!r} ({e.msg})") from None
        elif p.max is not None and p.min is not None and p.max < p.min:
            raise ExperimentError(f"{path}: field 'params.{name}.max': expected >= min = {p.min}, got {p.max!r}")
        try:
            p.check(default, "")
        except ExperimentError as e:
            raise ExperimentError(f"{path}: field 'params.{name}.default': {str(e).split(': ', 2)[-1]}") from None
        out[name] = p
    return out


def available() -> list[str]:
    return sorted(p.parent.name for p in HERE.glob("*/manifest.toml"))


def results_module(name: str) -> ModuleType | None:
    """experiments/<name>/results.py, or None: no such experiment (a name
    read back from a database may be one this checkout lacks) or one with
    only the core's tables."""
    if not name.isidentifier() or not (HERE / name / "manifest.toml").is_file() \
            or not (HERE / name / "results.py").is_file():
        return None
    return importlib.import_module(f"experiments.{name}.results")


def all_results() -> dict[str, ModuleType]:
    """Every experiment's results module: the schema machinery applies
    their SCHEMA to every database."""
    return {n: m for n in available() if (m := results_module(n)) is not None}


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
    exp.params = {**_params(common.get("params", {}), COMMON), **_params(data.get("params", {}), path)}
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
