"""Kernel comparisons: the same experiment run once per kernel, side by side.

Like mmtests' compare-kernels: one row per figure, one column per kernel,
and each value's difference in % against the first kernel. Figures are
generic, so every reproducer's own `metrics` rows take part without code
here: its numeric metrics, the numeric settings the guest reported
(guest.*), the /proc/vmstat counters that describe reclaim, swap and NUMA
placement (after - before), kswapd CPU time, and each experiment's own
comparison figures (compare_figures in experiments/<name>/results.py).
"""
from __future__ import annotations

import re
import sqlite3
import time
from dataclasses import dataclass

import experiments
from analysis import experiment_results, profile_report
from protocol import facts

# /proc/vmstat counters worth a row (delta after - before): the reclaim
# counters every reproducer reports (vmlab_facts.h), then wider families
# (prefixes end in _) and the placement counters.
VMSTAT = (*facts.RECLAIM_COUNTERS, "pgscan_", "pgsteal_", "allocstall_", "pgrefill", "pgactivate", "pgdeactivate",
          "pageoutrun", "kswapd_", "zone_reclaim_failed", "numa_hit", "numa_miss", "numa_foreign", "numa_local",
          "numa_other", "numa_pages_migrated", "pgmigrate_success", "compact_stall", "workingset_refault_anon",
          "workingset_refault_file", "thp_fault_alloc", "thp_split_page", "thp_swpout")
# Runs must agree on these, or the comparison compares more than kernels.
SAME = ("topology_sha256", "experiment", "params_json", "seed", "kernel_flavor", "kernel_config_sha256",
        "qemu_mode", "timing_mode", "guest_isa",
        # what produced the figures: the engine and its series, the timing model and its build, the start
        "engine_version", "timing_plugin", "start")


class CompareError(ValueError):
    pass


def _vmstat_wanted(counter: str) -> bool:
    return any(counter.startswith(p) if p.endswith("_") else counter == p for p in VMSTAT)


def _number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def figures(con: sqlite3.Connection, run_id: int) -> dict[str, tuple[float, str]]:
    """figure name -> (value, unit) for one run."""
    out: dict[str, tuple[float, str]] = {}
    for r in con.execute("SELECT name, value, text, unit FROM metrics WHERE run_id = ? ORDER BY name", (run_id,)):
        name = r["name"]
        if name.startswith(("init.", "ingest_error_")):
            continue  # guest bookkeeping, not a figure
        v = r["value"] if r["value"] is not None else _number(r["text"])
        if v is None or (name.startswith("guest.") and not re.fullmatch(r"-?\d+", str(r["text"]).strip())):
            continue
        out[name] = (float(v), r["unit"] or "")
    for r in con.execute("SELECT counter, delta FROM v_vmstat_delta WHERE run_id = ? ORDER BY counter", (run_id,)):
        if _vmstat_wanted(r["counter"]):
            out[f"vmstat.{r['counter']}"] = (float(r["delta"]), "")
    k = con.execute("SELECT SUM(a.cpu_s - b.cpu_s) FROM kswapd a JOIN kswapd b ON a.run_id = b.run_id "
                    "AND a.node = b.node WHERE a.run_id = ? AND a.phase = 'after' AND b.phase = 'before'",
                    (run_id,)).fetchone()[0]
    if k is not None:
        out["kswapd.cpu_s"] = (float(k), "s")
    exp = con.execute("SELECT experiment FROM runs WHERE id = ?", (run_id,)).fetchone()
    if exp:
        out.update(experiment_results.results(exp[0]).compare_figures(con, run_id))
    return out


def pct(base: float | None, v: float | None) -> str:
    """Difference against the first kernel, as compare-kernels prints it."""
    if base is None or v is None:
        return ""
    if base == v:
        return "0.00%"
    if base == 0:
        return "new"
    return f"{100.0 * (v - base) / abs(base):+.2f}%"


def _fmt(v: float | None) -> str:
    if v is None:
        return "-"
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    return f"{v:.2f}"


def runs_of(con: sqlite3.Connection, run_ids: list[int]) -> list[sqlite3.Row]:
    rows = []
    for rid in run_ids:
        r = con.execute("SELECT * FROM runs WHERE id = ?", (rid,)).fetchone()
        if r is None:
            raise CompareError(f"no run {rid} in the database")
        rows.append(r)
    return rows


def mismatches(runs: list[sqlite3.Row]) -> list[str]:
    """What differs between the runs besides the kernel (each a void comparison)."""
    out = []
    for col in SAME:
        if col not in runs[0].keys():
            continue
        vals = {r[col] for r in runs}
        if len(vals) > 1:
            out.append(col)
    return out


@dataclass
class Line:
    """One figure across the runs: values, the change of each against the
    first, and whether the manifest's declaration calls it better or worse."""
    name: str
    unit: str
    values: list
    changes: list[str]      # pct() of each run after the first
    verdicts: list[str]     # "better", "worse" or "" (Metric.judge)
    headline: bool

    def change_cells(self) -> list[str]:
        return [f"{c} {v}".strip() if c not in ("", "0.00%") else c for c, v in zip(self.changes, self.verdicts)]


def _declared(experiment: str):
    try:
        return experiments.load(experiment)
    except experiments.ExperimentError:
        return None  # an experiment since removed: its figures keep no direction


def lines(con: sqlite3.Connection, runs: list[sqlite3.Row], all_rows: bool = False) -> list[Line]:
    """The comparison's rows: the experiment's headline figures (declared in
    its manifest) first, then every other figure by name; a figure that is
    0 or missing in every run only with all_rows."""
    figs = [figures(con, r["id"]) for r in runs]
    exp = _declared(runs[0]["experiment"])
    out = []
    for n in sorted(set().union(*figs)):
        vals = [f.get(n, (None, ""))[0] for f in figs]
        if not all_rows and all(v in (None, 0) for v in vals):
            continue
        m = exp.metric(n) if exp else None
        unit = next((f[n][1] for f in figs if n in f and f[n][1]), "") or (m.unit if m else "")
        out.append(Line(n, unit, vals, [pct(vals[0], v) for v in vals[1:]],
                        [m.judge(vals[0], v) if m else "" for v in vals[1:]], bool(m and m.headline)))
    return sorted(out, key=lambda ln: not ln.headline)  # stable: by name within each part


def render(con: sqlite3.Connection, run_ids: list[int], all_rows: bool = False) -> str:
    """The side-by-side table for runs (the first is the baseline)."""
    if len(run_ids) < 2:
        raise CompareError(f"a comparison needs two runs or more, got {len(run_ids)}")
    runs = runs_of(con, run_ids)
    heads = [f"{r['patch_set']} (run {r['id']})" for r in runs]
    out = []
    w = out.append
    r0 = runs[0]
    w(f"comparison: {r0['experiment']} on {r0['topology']} ({r0['topology_shape']}), "
      f"flavor {r0['kernel_flavor']}, seed {r0['seed']}, QEMU {r0['qemu_mode']}")
    for r in runs:
        w(f"  run {r['id']}: {r['patch_set']:<20} {r['kernel_release'] or '?'}  status {r['status']}"
          + (f" ({r['reason']})" if r["reason"] else ""))
    bad = mismatches(runs)
    if bad:
        w(f"  WARNING: the runs differ in {', '.join(bad)}: this compares more than the kernels")
    cols = ["figure"] + [h for i, h in enumerate(heads) for h in ([h] if i == 0 else [h, "%"])]
    table = lines(con, runs, all_rows)
    rows = []
    for ln in table:
        changes = ln.change_cells()
        row = [("* " if ln.headline else "") + ln.name + (f" [{ln.unit}]" if ln.unit else "")]
        for i, v in enumerate(ln.values):
            row.append(_fmt(v))
            if i:
                row.append(changes[i - 1])
        rows.append(row)
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(cols)]
    fmt = lambda cells: "  ".join(c.ljust(wd) if i == 0 else c.rjust(wd)
                                  for i, (c, wd) in enumerate(zip(cells, widths))).rstrip()
    w("")
    w(fmt(cols))
    w(fmt(["-" * wd for wd in widths]))
    for r in rows:
        w(fmt(r))
    if not rows:
        w("(no figures: the runs recorded nothing numeric)")
    elif any(ln.headline for ln in table):
        w("(* the experiment's headline figures; better/worse as its manifest declares each figure, "
          "changes under 1 % unjudged)")
    out += profile_report.moved_lines(con, runs)  # when every run has a profile on the guest clock
    return "\n".join(out) + "\n"


# --- stored comparisons --------------------------------------------------------
def start(con: sqlite3.Connection, label: str) -> int:
    with con:
        cur = con.execute("INSERT INTO compare_sets (created_at, label) VALUES (?, ?)",
                          (time.strftime("%Y-%m-%dT%H:%M:%S%z"), label))
    return cur.lastrowid


def add_run(con: sqlite3.Connection, compare_id: int, position: int, run_id: int) -> None:
    with con:
        con.execute("INSERT INTO compare_runs (compare_id, position, run_id) VALUES (?, ?, ?)",
                    (compare_id, position, run_id))


def runs_in(con: sqlite3.Connection, compare_id: int) -> list[int]:
    ids = [r[0] for r in con.execute("SELECT run_id FROM compare_runs WHERE compare_id = ? ORDER BY position",
                                     (compare_id,))]
    if not ids:
        raise CompareError(f"no comparison {compare_id} in the database")
    return ids
