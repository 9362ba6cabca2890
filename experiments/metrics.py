"""Metrics declared once, in the manifest (mmtests' shellpack.yaml way).

A manifest's `[metrics."NAME"]` tables (and common.toml's, for what every
reproducer reports) say, for each figure the experiment stores in the
`metrics` table: its unit, which direction is better, how a study's repeats
aggregate, whether it is a headline figure, and what it means. NAME may be a
pattern (`*` for a level, a node or a lock: fnmatch). Everything generic
reads these: the kernel comparison marks each change better or worse, the
report's headline table aggregates repeats as declared, the ingest flags a
figure the guest sent that no manifest declares (or in another unit), and
docs/reference/metrics.md is generated from them. Adding a metric is its
guest program's `vl_metric(...)` call and these lines, nothing else.
"""
from __future__ import annotations

import fnmatch
import statistics
from dataclasses import dataclass
from pathlib import Path

from experiments.errors import ExperimentError

BETTER = ("lower", "higher", "neither")
AGGREGATES = {"mean": statistics.fmean, "median": statistics.median, "min": min, "max": max, "sum": sum}
FIELDS = {"unit": str, "better": str, "aggregate": str, "headline": bool, "help": str}
REQUIRED = ("unit", "better", "help")


@dataclass(frozen=True)
class Metric:
    pattern: str
    unit: str
    better: str               # lower, higher or neither (a setting, a checksum, host time)
    aggregate: str = "mean"   # over a study's repeats
    headline: bool = False    # shown first, and in the report's headline table
    help: str = ""

    def matches(self, name: str) -> bool:
        return fnmatch.fnmatchcase(name, self.pattern)

    def judge(self, base: float | None, value: float | None, noise: float = 0.01) -> str:
        """'better', 'worse' or '' (no direction, no base, or within noise of it)."""
        if self.better == "neither" or base is None or value is None:
            return ""
        if base == value or (base and abs(value - base) / abs(base) < noise):
            return ""
        return "better" if (value < base) == (self.better == "lower") else "worse"

    def combine(self, values: list[float]) -> float | None:
        vals = [v for v in values if v is not None]
        return float(AGGREGATES[self.aggregate](vals)) if vals else None


def parse_metrics(table: dict, path: Path) -> tuple[Metric, ...]:
    """A [metrics] table -> its Metrics; one line naming the file and field otherwise."""
    out = []
    for name, spec in table.items():
        where = f"{path}: field 'metrics.{name}"
        if not isinstance(spec, dict):
            raise ExperimentError(f"{where}': expected a table, got {spec!r}")
        for k, v in spec.items():
            if k not in FIELDS:
                raise ExperimentError(f"{where}.{k}': unknown key; expected one of {', '.join(sorted(FIELDS))}")
            if not isinstance(v, FIELDS[k]) or (FIELDS[k] is not bool and isinstance(v, bool)):
                raise ExperimentError(f"{where}.{k}': expected {'true or false' if FIELDS[k] is bool else 'a string'}"
                                      f", got {v!r}")
        for k in REQUIRED:
            if k not in spec:
                raise ExperimentError(f"{where}.{k}': missing")
        if spec["better"] not in BETTER:
            raise ExperimentError(f"{where}.better': expected one of {', '.join(BETTER)}, got {spec['better']!r}")
        agg = spec.get("aggregate", "mean")
        if agg not in AGGREGATES:
            raise ExperimentError(f"{where}.aggregate': expected one of {', '.join(AGGREGATES)}, got {agg!r}")
        out.append(Metric(name, spec["unit"], spec["better"], agg, spec.get("headline", False), spec["help"]))
    return tuple(out)


def find(declared: tuple[Metric, ...], name: str) -> Metric | None:
    """The declaration a stored figure falls under: an exact name first, then the first pattern."""
    return next((m for m in declared if m.pattern == name), None) or next(
        (m for m in declared if m.matches(name)), None)
