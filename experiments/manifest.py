"""The manifest's schema: which keys a manifest.toml (and common.toml) may
hold and of what type, and its typed parameters (Param) with their bounds.
A misspelt key or a bad default is one line naming the file and the field."""
from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass
from pathlib import Path

from experiments.errors import ExperimentError

TYPES = {"int": int, "float": float, "str": str}
# A knob parameter set to this keeps the kernel's own default: /init leaves
# the file alone (a patched kernel may change the default, e.g.
# zone-reclaim-auto), and the guest reports the value it had.
KERNEL_DEFAULT = "kernel"


# What a manifest may hold: key -> accepted types, and for tables the keys
# of each entry. A misspelt key or section is an error, not ignored.
_EXPR = (str, int, float)
MANIFEST = {
    "name": (str,), "seed": (str,), "summary": (str,), "programs": (list,), "command": (str,), "timeout_s": _EXPR,
    "params": (dict,), "derived": (dict,), "checks": (dict,), "progress": (dict,), "metrics": (dict,),
}
PARAM = {"type": (str,), "default": (str, int, float), "help": (str,), "choices": (list,), "min": (int, float),
         "max": (int, float, str), "knob": (str,), "pattern": (str,)}
PROGRESS = {"record": (str,), "total": _EXPR, "label": (str,)}
REQUIRED = ("name", "command", "programs")


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
    keys(data, {"params": (dict,), "metrics": (dict,)} if common else MANIFEST, "")
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


def shown(raw: str) -> str:
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
                                  f"got {shown(raw)!r}") from None
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


def parse_params(table: dict, path: Path) -> dict[str, Param]:
    """A [params] table -> its Params, each default checked against its own bounds."""
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
