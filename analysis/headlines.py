"""Each experiment's headline figures over a set of runs, generic over the
`metrics` table: the figures a manifest declares `headline = true`
(experiments/metrics.py), one row per configuration (machine, kernel,
parameters, seed, flavor, timing mode, booted or restored), each a study's repeats aggregated
as the manifest declares (mean, median, min, max or sum) with the repeats'
range and count beside it. The report shows it; nothing here knows an
experiment by name."""
from __future__ import annotations

import json
from dataclasses import dataclass

import experiments
from analysis.compare import _fmt

# runs that repeat one configuration (a study's repeats have their own keys)
# (a booted and a restored run are different runs of a machine: runs.start)
CONFIG = ("topology", "topology_sha256", "patch_set", "kernel_flavor", "params_json", "seed", "timing_mode", "start")


@dataclass
class Cell:
    value: float | None
    low: float | None
    high: float | None
    n: int

    def text(self) -> str:
        """The aggregate, and with several runs their range and count."""
        num = lambda v: "-" if v is None else _fmt(round(v, 4))
        return num(self.value) + (f" ({num(self.low)} to {num(self.high)}, n={self.n})" if self.n > 1 else "")


@dataclass
class Table:
    experiment: str
    figures: list[str]               # stored names, sorted (a pattern can stand for several)
    units: dict[str, str]
    aggregates: dict[str, str]
    rows: list[tuple[dict, list[int], list[Cell]]]   # (configuration, run ids, a cell per figure)


def tables(con, runs) -> list[Table]:
    """One Table per experiment of the ok runs that has headline figures."""
    out = []
    by_exp: dict[str, list] = {}
    for r in runs:
        if r["status"] == "ok":
            by_exp.setdefault(r["experiment"], []).append(r)
    for name in sorted(by_exp):
        try:
            exp = experiments.load(name)
        except experiments.ExperimentError:
            continue
        ids = [r["id"] for r in by_exp[name]]
        stored: dict[int, dict[str, float]] = {i: {} for i in ids}
        q = ("SELECT run_id, name, value FROM metrics WHERE value IS NOT NULL "
             f"AND run_id IN ({','.join('?' * len(ids))})")
        for rid, fig, v in con.execute(q, ids):
            m = exp.metric(fig)
            if m is not None and m.headline:
                stored[rid][fig] = v
        figs = sorted({f for d in stored.values() for f in d})
        if not figs:
            continue
        decl = {f: exp.metric(f) for f in figs}
        groups: dict[tuple, list] = {}
        for r in by_exp[name]:
            groups.setdefault(tuple(r[c] for c in CONFIG), []).append(r)
        rows = []
        for key, rs in sorted(groups.items(), key=lambda kv: min(r["id"] for r in kv[1])):
            cells = []
            for f in figs:
                vals = [stored[r["id"]][f] for r in rs if f in stored[r["id"]]]
                cells.append(Cell(decl[f].combine(vals), min(vals, default=None), max(vals, default=None), len(vals)))
            conf = dict(zip(CONFIG, key))
            conf["params"] = json.loads(conf.pop("params_json") or "{}")
            rows.append((conf, [r["id"] for r in rs], cells))
        out.append(Table(name, figs, {f: decl[f].unit for f in figs}, {f: decl[f].aggregate for f in figs}, rows))
    return out
