"""The seeds' own tables: `./run.py seeds --table-only [SEED ...]`.

Per seed, the seed's table rebuilt from our database: its row names and
units, one column per kernel with % against the first (as mmtests'
compare-kernels and the seed print it), then the seed's PUBLISHED figures
for the kernels ours stand for, with their % for the same pair, and a line
that says whether our direction is the seed's. Our machines are scaled down,
so ratios are what compare, not sizes. The rows and how our runs give them
are in analysis/seed_tables.py."""
from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import tomllib
from pathlib import Path

from analysis import db, studyfile
from analysis.compare import _fmt, pct
from analysis.seed_published import PUBLISHED, Pub
from analysis.seed_tables import SEEDS, Row, forget, run_of

REPO = Path(__file__).resolve().parent.parent
SEEDS_STUDY = REPO / "studies" / "seeds.toml"
FLAT = 0.01  # a change under 1 % shows no direction


class SeedError(ValueError):
    """Bad input: one line."""


# --- which runs ---------------------------------------------------------------------------
def seed_of(seed: str):
    if seed not in SEEDS:
        raise SeedError(f"unknown seed {seed!r} (the seeds: {' '.join(SEEDS)})")
    return SEEDS[seed]


def blocks(toml_text: str, seed: str) -> list[dict]:
    """The seed's [[matrix]] blocks of a study file: the one named after it and
    any named "<seed>-..." (004's zone_reclaim_mode=5 runs on vanilla only),
    read as the study runner reads them (analysis/studyfile.py: the top
    level's axes, params and repeats under each block's own); [] if none, or
    if the text is no study file the runner would take."""
    try:
        gs = studyfile.groups("study file", tomllib.loads(toml_text))
    except (tomllib.TOMLDecodeError, ValueError):
        return []
    return [g for g in gs if g["name"] is not None
            and (str(g["name"]) == seed or str(g["name"]).startswith(seed + "-"))]


def block_names(toml_text: str, seed: str) -> list[str]:
    return [str(g["name"]) for g in blocks(toml_text, seed)]


def _axis(block: dict, name: str) -> list:
    v = block.get("axes", {}).get(name)
    return [] if v is None else [Path(str(x)).stem if str(x).endswith(".toml") else str(x)
                                 for x in (v if isinstance(v, list) else [v])]


def _params_match(block: dict, r) -> bool:
    """The run has the parameters the seed's block sets (a list there: one of them)."""
    have = json.loads(r["params_json"])
    same = lambda a, b: a == b or (isinstance(a, (int, float)) and isinstance(b, (int, float)) and  # noqa: E731
                                   float(a) == float(b))
    return all(any(same(have.get(k), x) for x in (v if isinstance(v, list) else [v]))
               for k, v in block.get("params", {}).items())


def _column(s, r) -> tuple:
    """A column, in display order: the machine (when the seed varies it), flavor and timing mode, then the
    kernel (the seed's order first)."""
    rank = list(dict.fromkeys(["vanilla", *s.stands_for]))  # vanilla 6.1 first: the % are against it
    have = json.loads(r["params_json"]) if s.param_columns else {}
    # a parameter that differs from the kernel's own setting is part of the column (004: zone_reclaim_mode=5)
    own = tuple(f"{n}={have[n]}" for n in s.param_columns if have.get(n, "kernel") != "kernel")
    kern = (rank.index(r["patch_set"]) if r["patch_set"] in rank else len(rank), r["patch_set"], own)
    machine = (r["cpus"], r["nodes"], r["topology"], _disk(r)) if s.by_machine else ()
    return (machine, r["kernel_flavor"] != "default", r["kernel_flavor"], r["timing_mode"] != "off",
            r["timing_mode"], kern)


def _disk(r) -> str:
    """A run's disk model by name ("cheetah-15k4: 5500/6000 us ..." -> cheetah-15k4); '' if none."""
    return (r["disk_model"] or "").split(":")[0]


def _matching(con, seed: str, study_id: int | None, status: str) -> list:
    """Runs of the seed's experiment with this status, on the machines and
    parameters of the seed's blocks: in a study, those its seed blocks asked
    for; else, per run key, the newest (a repeat has its own key)."""
    s = seed_of(seed)
    ours = blocks(SEEDS_STUDY.read_text(), seed) if SEEDS_STUDY.exists() else []
    if study_id is None:
        bs = ours or [{}]
        latest: dict = {}
        for r in con.execute("SELECT * FROM runs WHERE experiment = ? AND status = ? ORDER BY id DESC",
                             (s.experiment, status)):
            if (r["run_key"] or r["id"]) not in latest and any(
                    (not _axis(b, "topology") or r["topology"] in _axis(b, "topology")) and _params_match(b, r)
                    for b in bs):
                latest[r["run_key"] or r["id"]] = r
        return list(latest.values())
    st = con.execute("SELECT toml FROM studies WHERE id = ?", (study_id,)).fetchone()
    if st is None:
        raise SeedError(f"no study {study_id} in the database")
    theirs = blocks(st["toml"], seed)
    by_name = {str(b["name"]): b for b in theirs or ours}  # a study without the seed's blocks: ours
    bs = theirs or ours or [{}]
    out = []
    for r in con.execute("SELECT r.*, s.axes_json FROM study_runs s JOIN runs r ON r.id = s.run_id "
                         "WHERE s.study_id = ? AND r.status = ? AND r.experiment = ? ORDER BY r.id",
                         (study_id, status, s.experiment)):
        axes = json.loads(r["axes_json"])
        if theirs and "block" in axes:  # the block that asked for the run, if it is one of the seed's
            if axes["block"] not in by_name:
                continue
            mine = [by_name[axes["block"]]]
        else:
            mine = bs
        if any(all(not _axis(b, k) or str(axes.get(k, r[col])) in _axis(b, k)
                   for k, col in (("topology", "topology"), ("kernel", "patch_set"))) for b in mine):
            out.append(r)
    return out


def select_runs(con, seed: str, study_id: int | None = None) -> list[int]:
    """The latest ok runs per column among runs of the seed's experiment and
    machines (as many per column as its block repeats), or exactly the ok
    runs of the seed's blocks in a study."""
    s = seed_of(seed)
    ours = blocks(SEEDS_STUDY.read_text(), seed) if SEEDS_STUDY.exists() else []
    picked = _matching(con, seed, study_id, "ok")
    if study_id is None:
        cols: dict = {}
        for r in picked:
            cols.setdefault(_column(s, r), []).append(r)
        reps = max(int(b.get("repeats", 1)) for b in ours or [{}])
        picked = [r for c in cols.values() for r in c[:reps]]
    if not picked:
        where = f"study {study_id}" if study_id is not None else "the database"
        topos = "/".join(dict.fromkeys(t for b in (ours or [{}]) for t in _axis(b, "topology"))) or "any machine"
        raise SeedError(f"seed {seed}: no ok {s.experiment} runs on {topos} in {where} (run ./run.py seeds {seed})")
    return [r["id"] for r in sorted(picked, key=lambda r: (_column(s, r), r["id"]))]


def failed_runs(con, seed: str, study_id: int | None = None, ok_ids: list[int] | None = None) -> list:
    """The seed's runs that failed (a guest that panicked, hung, or whose
    reproducer died: e.g. OOM-killed) and have no ok run of the same key:
    a kernel missing from a column is said, with the reason, not hidden.
    ok_ids: the ok runs already selected (select_runs), so they are not looked up again."""
    ok_rows = ([run_of(con, i) for i in ok_ids] if ok_ids is not None else _matching(con, seed, study_id, "ok"))
    ok = {r["run_key"] for r in ok_rows if r["run_key"]}
    return [r for r in _matching(con, seed, study_id, "failed") if not r["run_key"] or r["run_key"] not in ok]


# --- the table ----------------------------------------------------------------------------
def _label(col) -> str:
    flavor, timing, kernel = col[2], col[4], col[5][1]
    return (kernel + "".join(f", {p}" for p in col[5][2]) + (f" ({flavor})" if flavor != "default" else "")
            + (f" [timing {timing}]" if timing != "off" else ""))


def _machine(col) -> str:
    return f"{col[0][2]}, {col[0][0]} CPUs{', ' + col[0][3] if col[0][3] else ''}" if col[0] else ""


def _agg(vals: list, how: str):
    """(value, min, max) over a column's runs; None when no run has it."""
    vals = [v for v in vals if v is not None]
    if not vals:
        return None
    return (sum(vals) if how == "sum" else statistics.mean(vals), min(vals), max(vals), len(vals))


def _cell(a, how="mean") -> str:
    if a is None:
        return "-"
    v, lo, hi, n = a
    return _fmt(v) + (f" ({_fmt(lo)}-{_fmt(hi)})" if n > 1 and how == "mean" else "")


def _pub(p: Pub | None):
    return None if p is None else (statistics.mean(p.values), min(p.values), max(p.values), len(p.values))


def _sign(a, z) -> int:
    """+1 / -1 from aggregate a to z; 0 under 1 %, or when repeats' ranges overlap (no clear change)."""
    if a is None or z is None:
        return 0
    base, v = a[0], z[0]
    if a[3] > 1 and z[3] > 1 and a[1] <= z[2] and z[1] <= a[2]:
        return 0
    d = (v - base) / abs(base) if base else (1 if v > base else -1 if v < base else 0)
    return 0 if abs(d) < FLAT else (1 if d > 0 else -1)


def _grid(heads: list[list[str]], rows: list[list[str]]) -> list[str]:
    w = [max(len(r[i]) for r in [*heads, *rows]) for i in range(len(heads[-1]))]
    def fmt(cells):
        return "  ".join(c.ljust(w[i]) if i == 0 else c.rjust(w[i]) for i, c in enumerate(cells)).rstrip()
    return [*(fmt(h) for h in heads), fmt(["-" * x for x in w]), *(fmt(r) for r in rows)]


def render(con, seed: str, run_ids: list[int], failed: list = ()) -> str:
    s = seed_of(seed)
    forget()
    try:
        text = _render(con, s, run_ids)
    finally:
        forget()
    lines = [f"failed, not in the table: run {r['id']} ({r['patch_set']} on {r['topology']}"
             f"{', ' + _disk(r) if _disk(r) else ''}): {r['reason']}"
             + (f"; the guest's OOM killer killed {n:g} process{'es' * (n != 1)}" if (n := _oom_kills(con, r['id']))
                else "") for r in failed]
    return text + ("\n" + "\n".join(lines) + "\n" if lines else "")


def _oom_kills(con, rid) -> float:
    try:
        row = con.execute("SELECT delta FROM v_vmstat_delta WHERE run_id = ? AND counter = 'oom_kill'",
                          (rid,)).fetchone()
    except sqlite3.DatabaseError:
        return 0
    return row[0] if row and row[0] else 0


def _same(s, r, col):
    """What must agree across a machine's columns: the parameters that make
    columns of their own (004's zone_reclaim_mode) are left out."""
    if col != "params_json" or not s.param_columns:
        return r[col]
    have = json.loads(r[col])
    return json.dumps({k: v for k, v in have.items() if k not in s.param_columns}, sort_keys=True)


def _render(con, s, run_ids) -> str:
    runs = [run_of(con, i) for i in run_ids]
    cols: dict = {}
    for r in sorted(runs, key=lambda r: (_column(s, r), r["id"])):
        cols.setdefault(_column(s, r), []).append(r)
    keys = list(cols)
    # % against the first kernel on the same machine, flavor and timing: runs that differ only in the kernel
    base = {k: next(b for b in keys if b[:5] == k[:5]) for k in keys}
    seedcol = {k[5][1]: s.stands_for[k[5][1]] for k in sorted(keys, key=lambda k: k[5]) if k[5][1] in s.stands_for}
    out = [f"seed {s.id}: {s.title}  [{s.doc}]",
           f"ours: {s.experiment} on {', '.join(dict.fromkeys(r['topology'] for r in runs))}; " + "; ".join(
               f"{_label(k)}{' on ' + _machine(k) if k[0] else ''}: run{'s' if len(v) > 1 else ''} "
               + ", ".join(str(r["id"]) for r in v) for k, v in cols.items()),
           "kernels: " + "; ".join(f"{k} stands for the seed's {c}" for k, c in seedcol.items()) + f" ({s.pairing})"]
    for k in keys:
        group = [r for kk, v in cols.items() if kk[0] == k[0] for r in v]
        bad = [c for c in ("topology_sha256", "params_json", "seed", "qemu_mode", "guest_isa")
               if len({_same(s, r, c) for r in group}) > 1]
        if bad and k == base[k]:
            out.append(f"WARNING: the runs{' on ' + _machine(k) if k[0] else ''} differ in {', '.join(bad)}: "
                       "this compares more than the kernels")
    for t in s.tables:
        out += ["", t.title, *_table(con, s, t, run_ids, cols, base, seedcol)]
    notes = s.notes(con, run_ids) if s.notes else []
    return "\n".join(out + [""] * bool(notes) + notes) + "\n"


def _table(con, s, t, run_ids, cols, base, seedcol) -> list[str]:
    keys, pubs = list(cols), PUBLISHED.get(s.id, {})
    rows = t.rows if isinstance(t.rows, tuple) else t.rows(con, run_ids)
    ours = {row.key: {k: _agg([row.value(con, r["id"]) for r in cols[k]], row.agg) if row.value else None
                      for k in keys} for row in rows}
    shown = [c for c in seedcol.values() if any(c in pubs.get(row.key, {}) for row in rows)]
    # the seed's column for our first kernel that stands for one (vanilla 6.1 may be ours alone)
    pbase = next((seedcol[k[5][1]] for k in sorted(keys, key=lambda k: k[5]) if k[5][1] in seedcol), None)
    pbase = pbase if pbase in shown else None  # the seed's % only when the baseline's column was published
    head = ["row [unit]"] + [h for k in keys for h in ([_label(k)] if k == base[k] else [_label(k), "%"])]
    head += [h for c in shown for h in ([f"seed: {c}"] if c == pbase or not pbase else [f"seed: {c}", "%"])]
    heads = [head]
    if s.by_machine:  # the machine above its group of columns (002: kernel x CPU count)
        first = {k[0]: k for k in reversed(keys)}
        machines = ["machine"] + [h for k in keys for h in [_machine(k) if first[k[0]] == k else ""]
                                  + ([] if k == base[k] else [""])]
        heads = [machines + [""] * (len(head) - len(machines)), head]
    lines, unmeasured, missing = [], [], {}
    for row in rows:
        p = pubs.get(row.key, {})
        if row.value is None:
            unmeasured.append(f"{row.name} ({row.why})")
        elif all(a is None for a in ours[row.key].values()):
            if row.why:
                missing.setdefault(row.why, []).append(row.name)
            if not any(c in p for c in shown):
                continue  # e.g. a hop distance no chunk landed at
        cells = [f"{row.name} [{row.unit}]"]
        for k in keys:
            a, b = ours[row.key][k], ours[row.key][base[k]]
            cells += ["n/a" if row.value is None else _cell(a, row.agg)] + (
                [pct(b[0], a[0]) if a and b else ""] if k != base[k] else [])
        for c in shown:
            b, a = _pub(p.get(pbase)), _pub(p.get(c))
            cells += [_cell(a)] + ([pct(b[0], a[0]) if a and b else ""] if pbase and c != pbase else [])
        lines.append(cells)
    out = _grid(heads, lines)
    for h in t.headlines:
        row = next(r for r in rows if r.key == h.key)
        out += _direction(s, h, row, ours[h.key], keys, base, pubs.get(h.key, {})) or [
            f"direction, {h.label}: no two kernels on the same machine, flavor and timing here; nothing to compare"]
    notes = [f"{row.name} ({c}): {p.note}" for row in rows for c in shown
             if (p := pubs.get(row.key, {}).get(c)) and p.note]
    if notes:
        out.append("about the seed's figures: " + "; ".join(notes))
    if unmeasured:
        out.append("not measured by us: " + "; ".join(unmeasured))
    out += [f"not in these runs ({why}): " + "; ".join(names) for why, names in missing.items()]
    return out


def _pairs(s, keys, base) -> list[tuple]:
    """Each kernel against the first on its machine; and, where the seed's
    own before/after is re-enacted (000: period set -> period set + fix),
    the two kernels that stand for the seed's columns, in the seed's order."""
    out = [(base[k], k) for k in keys if k != base[k]]
    col = lambda k: s.stands_for.get(k[5][1]) if not k[5][2] else None  # noqa: E731
    for b in keys:
        for k in keys:
            if b[:5] == k[:5] and base[k] not in (b, k) and col(b) and col(k) and \
                    s.columns.index(col(b)) < s.columns.index(col(k)):
                out.append((b, k))
    return out


def _direction(s, h, row: Row, ours: dict, keys, base, pub: dict) -> list[str]:
    out = []
    for b, k in _pairs(s, keys, base):
        where = f" at {k[0][0]} CPUs ({k[0][2]})" if k[0] else ""
        pair = f"{_label(b)}→{_label(k)}"
        c0, c1 = (None, None) if b[5][2] or k[5][2] else (s.stands_for.get(b[5][1]), s.stands_for.get(k[5][1]))
        p0, p1 = _pub(pub.get(c0)), _pub(pub.get(c1))
        if p0 and p1:
            want = _sign(p0, p1)
            seed = f"seed {pct(p0[0], p1[0])} for the same pair ({c0}→{c1})"
            if s.columns.index(c0) > s.columns.index(c1):
                seed += f", in the seed's order {pct(p1[0], p0[0])} {c1}→{c0}"
        elif h.expect:
            # h.expect is the sign from fixed to pathological: a pair from the
            # seed's pathological column to its fix goes the other way, vanilla
            # (the fixed side, ours alone) to the pathological column this way,
            # and vanilla to the fix is no pair the seed spoke of
            seed = f"seed: no figure for both sides; it says {h.claim}"
            if c0 and c1:
                want = h.expect if s.columns.index(c0) > s.columns.index(c1) else -h.expect
            else:
                want = h.expect if c1 == s.columns[0] and not c0 else None
        else:
            want, seed = None, "seed: no figure for this pair"
        a, z = ours.get(b), ours.get(k)
        if a is None or z is None:
            why = row.why or "no value in these runs"
            out.append(f"direction, {h.label}: ours not measured{where} ({why}); {seed}")
            continue
        got = _sign(a, z)
        verdict = ("no seed direction to compare" if want is None else
                   "the seed shows no clear change (under 1 % or within its runs' spread)" if want == 0 else
                   "ours shows no clear change (under 1 % or within the runs' spread): not the seed's direction"
                   if got == 0 else
                   "same direction as the seed" if got == want else "OPPOSITE to the seed")
        out.append(f"direction, {h.label}: ours {pct(a[0], z[0]) or '0.00%'} {pair}{where}; {seed}: {verdict}")
    return out


# --- CLI ----------------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    def error(self, message):  # bad input is one line and exit 2, as everywhere in vmlab
        print(f"error: {self.prog}: {message}", file=sys.stderr)
        raise SystemExit(2)


def main(argv: list[str]) -> int:
    p = _Parser(prog="./run.py seeds", description=(
        "Print each seed's own table from the database: its rows and units, a column per kernel with % against "
        "the first, and the seed's published figures and % beside ours."))
    p.add_argument("seeds", nargs="*", metavar="SEED", help=f"{' '.join(SEEDS)} (default: all five)")
    p.add_argument("--db", default="results.db", help="results database (default ./results.db)")
    p.add_argument("--study", type=int, metavar="N", help="exactly the runs of study N's seed groups")
    try:
        a = p.parse_args(argv)
    except SystemExit as x:
        return int(x.code or 0)
    try:
        wanted = [seed_of(x).id for x in a.seeds] or list(SEEDS)
        con = db.connect(a.db, readonly=True)
        picked, missing = {}, []
        for x in wanted:  # every seed checked before anything prints
            try:
                picked[x] = select_runs(con, x, a.study)
            except SeedError as err:
                if a.seeds or "no study" in str(err):
                    raise
                missing.append(x)
        if missing:
            raise SeedError(f"no ok runs for seed{'s' * (len(missing) > 1)} {' '.join(missing)} in "
                            + (f"study {a.study}" if a.study is not None else a.db)
                            + (f"; name the seeds that have runs ({' '.join(picked)})" if picked else
                               " (run ./run.py seeds)"))
        text = "\n\n".join(render(con, x, ids, failed_runs(con, x, a.study, ids)) for x, ids in picked.items())
    except (SeedError, db.SchemaError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except sqlite3.DatabaseError as err:
        print(f"error: {a.db}: {err}", file=sys.stderr)
        return 2
    print(text, end="")
    return 0
