"""The seeds' own tables, rendered (seeds/page.py prints them for
`./run.py seeds --table-only [SEED ...]` and writes the results page).

Per seed, the seed's table rebuilt from our database: its row names and
units, one column per kernel with % against the first (as mmtests'
compare-kernels and the seed print it), then the seed's PUBLISHED figures
for the kernels ours stand for, with their % for the same pair, and a line
that says whether our direction is the seed's. Our machines are scaled down,
so ratios are what compare, not sizes. The rows and how our runs give them
are in seeds/tables.py; which runs, in seeds/runs.py."""
from __future__ import annotations

import json
import math
import sqlite3
import statistics

from analysis import pages
from analysis.compare import _fmt, pct
from seeds.kit import Reading, Row, column, disk, run_of
from seeds.published import PUBLISHED, Pub
from seeds.runs import seed_of
from timing import modes

FLAT = 0.01  # a change under 1 % shows no direction
MGLRU = "mglru"  # the kernel flavor with the multi-generational LRU on (images/kernel/mglru.config)


# --- the table ----------------------------------------------------------------------------
def _stands_as(col) -> str:
    """A column's kernel as the seed's stands_for names it: the patch set and
    its own parameters (004: "vanilla, zone_reclaim_mode=5"), the flavor apart."""
    return col[5][1] + "".join(f", {p}" for p in col[5][2])


def _kernel(col) -> str:
    """A column's kernel: _stands_as and a flavor other than the default."""
    return _stands_as(col) + (f" ({col[2]})" if col[2] != "default" else "")


def _label(col) -> str:
    return _kernel(col) + (f" [timing {col[4]}]" if modes.get(col[4]).loads_plugin else "")


def _machine(col) -> str:
    return f"{col[0][2]}, {col[0][0]} CPUs{', ' + col[0][3] if col[0][3] else ''}" if col[0] else ""


class Agg(tuple):
    """(value, min, max, runs) over a column's runs, keeping the runs' values
    (`values`) and how they were combined (`how`) for the power estimate."""
    def __new__(cls, vals: list, how: str):
        a = super().__new__(cls, (sum(vals) if how == "sum" else statistics.mean(vals), min(vals), max(vals),
                                  len(vals)))
        a.values, a.how = tuple(vals), how
        return a


def _agg(vals: list, how: str):
    """Agg over a column's runs; None when no run has it."""
    vals = [v for v in vals if v is not None]
    return Agg(vals, how) if vals else None


# runs a side before a pair has a spread to judge by: the power estimate, the ranges' overlap
# and the verdict all start there (one run says nothing of the noise)
JUDGED_FROM = 2


def spread_on_both(a, z) -> bool:
    """Both aggregates come from JUDGED_FROM runs or more."""
    return min(a[3], z[3]) >= JUDGED_FROM


# a two-sided test at 5 % with 80 % power: (z_0.975 + z_0.8)^2
POWER_Z2 = (1.959964 + 0.841621) ** 2


def repeats_needed(a, z) -> int | None:
    """Runs a kernel for a two-sample test to tell a's mean from z's at 5 %
    with 80 % power, from these runs' pooled spread (normal approximation,
    2 (z_a/2 + z_b)^2 s^2 / d^2); None when either side has fewer than two
    runs or is a sum, or when the means are equal."""
    if not isinstance(a, Agg) or not isinstance(z, Agg) or a.how != "mean" or z.how != "mean" or \
            not spread_on_both(a, z) or a[0] == z[0]:
        return None
    s2 = ((a[3] - 1) * statistics.variance(a.values) + (z[3] - 1) * statistics.variance(z.values)) / (a[3] + z[3] - 2)
    return max(2, math.ceil(2 * POWER_Z2 * s2 / (a[0] - z[0]) ** 2))


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
    if spread_on_both(a, z) and a[1] <= z[2] and z[1] <= a[2]:
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
    text = _render(Reading(con), s, run_ids)
    lines = [f"failed, not in the table: run {r['id']} ({r['patch_set']} on {r['topology']}"
             f"{', ' + disk(r) if disk(r) else ''}): {r['reason']}"
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


WORK = ("topology_sha256", "params_json", "seed", "qemu_mode", "guest_isa")   # what a run was
MADE = ("engine_version", "timing_plugin", "start")                             # how it was priced


def _render(con, s, run_ids) -> str:
    runs = [run_of(con, i) for i in run_ids]
    cols: dict = {}
    for r in sorted(runs, key=lambda r: (column(s, r), r["id"])):
        cols.setdefault(column(s, r), []).append(r)
    keys = list(cols)
    # % against the first kernel on the same machine, flavor and timing: runs that differ only in the kernel
    base = {k: next(b for b in keys if b[:5] == k[:5]) for k in keys}
    for k in keys:  # the MGLRU flavor is today's answer to the seed: its % are against the default flavor's vanilla
        dflt = [b for b in keys if k[2] == MGLRU and b[0] == k[0] and b[2] == "default" and b[3:5] == k[3:5]]
        if dflt:
            base[k] = dflt[0]
    seedcol = {_stands_as(k): s.stands_for[_stands_as(k)] for k in sorted(keys, key=lambda k: k[5])
               if _stands_as(k) in s.stands_for}
    out = [f"seed {s.id}: {s.title}  [{s.doc}]",
           f"ours: {s.experiment} on {', '.join(dict.fromkeys(r['topology'] for r in runs))}; " + "; ".join(
               f"{_label(k)}{' on ' + _machine(k) if k[0] else ''}: run{'s' if len(v) > 1 else ''} "
               + ", ".join(str(r["id"]) for r in v) for k, v in cols.items()),
           "kernels: " + " ".join(filter(None, ["; ".join(f"{k} stands for the seed's {c}" for k, c in seedcol.items()),
                                                f"({s.pairing})"]))]

    def warn(who, fields, group):
        bad = [c for c in fields if len({_same(s, r, c) for r in group}) > 1]
        if bad:
            out.append(f"WARNING: {who} differ in {', '.join(bad)}: this compares more than the kernels")

    # a machine's columns are the same work (machine, parameters, guest) whatever block asked for them;
    # how each was made (engine, model, start) need agree only within a comparison, the columns whose %
    # share a base: a machine's functional and detailed columns are two comparisons, and _made says so
    for m in dict.fromkeys(k[0] for k in keys):
        warn(f"the runs{' on ' + _machine((m,)) if m else ''}", WORK,
             [r for kk, v in cols.items() if kk[0] == m for r in v])
    for b in dict.fromkeys(base.values()):
        warn(f"the runs compared with {_label(b)}{' on ' + _machine(b) if b[0] else ''}", MADE,
             [r for kk, v in cols.items() if base[kk] == b for r in v])
    out += _made(cols)
    tables = []
    for t in s.tables:
        tables += ["", t.title, *_table(con, s, t, run_ids, cols, base, seedcol)]
    notes = s.notes(con, run_ids) if s.notes else []
    return "\n".join(out + [verdict(tables)] + tables + [""] * bool(notes) + notes) + "\n"


def _made(cols) -> list[str]:
    """How each column's runs were made (timing mode, model, engine series,
    start): one line when every column shares it, else a line per column."""
    how = {k: "; ".join(dict.fromkeys(f"timing {r['timing_mode']}, {pages.plugin(r)}, series {pages.series_of(r)}, "
                                      f"{r['start']}" for r in v)) for k, v in cols.items()}
    if len(set(how.values())) == 1:
        return [f"every column made with: {next(iter(how.values()))}"]
    return [f"columns made differently: {_label(k)}{' on ' + _machine(k) if k[0] else ''}: {h}"
            for k, h in how.items()]


def _table(con, s, t, run_ids, cols, base, seedcol) -> list[str]:
    keys, pubs = list(cols), PUBLISHED.get(s.id, {})
    rows = t.rows if isinstance(t.rows, tuple) else t.rows(con, run_ids)
    ours = {row.key: {k: _agg([row.value(con, r["id"]) for r in cols[k]], row.agg) if row.value else None
                      for k in keys} for row in rows}
    # two of our kernels may stand for one seed column (002's period set, blocking and spinning): shown once
    shown = list(dict.fromkeys(c for c in seedcol.values() if any(c in pubs.get(row.key, {}) for row in rows)))
    # the seed's column for our first kernel that stands for one (vanilla 6.1 may be ours alone)
    pbase = next((seedcol[_stands_as(k)] for k in sorted(keys, key=lambda k: k[5]) if _stands_as(k) in seedcol), None)
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
    col = lambda k: s.stands_for.get(_stands_as(k))
    for b in keys:
        for k in keys:
            if b[:5] == k[:5] and base[k] not in (b, k) and col(b) and col(k) and \
                    s.columns.index(col(b)) < s.columns.index(col(k)):
                out.append((b, k))
    return out


def _direction(s, h, row: Row, ours: dict, keys, base, pub: dict) -> list[str]:
    out = []
    # the disk joins a pair's place only where one machine has columns on several (003's two swap disks)
    disks: dict = {}
    for k in keys:
        if k[0]:
            disks.setdefault(k[0][:3], set()).add(k[0][3])
    for b, k in _pairs(s, keys, base):
        disk = f", {k[0][3]}" if k[0] and k[0][3] and len(disks[k[0][:3]]) > 1 else ""
        where = f" at {k[0][0]} CPUs ({k[0][2]}{disk})" if k[0] else ""
        pair = f"{_label(b)}→{_label(k)}"
        c0, c1 = (None, None) if b[2] != k[2] else (s.stands_for.get(_stands_as(b)), s.stands_for.get(_stands_as(k)))
        p0, p1 = _pub(pub.get(c0)), _pub(pub.get(c1))
        if b[2] != k[2]:  # another flavor of the same kernel: MGLRU, which no seed's kernel had
            want, seed = None, f"seed: no such kernel (the {k[2]} flavor is today's reclaim, not the seed's)"
        elif c0 is not None and c0 == c1:  # two of ours for one seed column (002: blocking and spinning)
            want, seed = None, f"seed: both stand for its {c0}"
        elif p0 and p1:
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
        outcome = (None if want is None or want == 0 else "flat" if got == 0 else
                   "same" if got == want else "opposite")
        verdict = ("no seed direction to compare" if want is None else
                   "the seed shows no clear change (under 1 % or within its runs' spread)" if want == 0 else
                   "ours shows no clear change (under 1 % or within the runs' spread): not the seed's direction"
                   if got == 0 else
                   "same direction as the seed" if got == want else "OPPOSITE to the seed")
        if h.aside:  # shown, so a reader can audit the verdict's choice of row, not counted
            outcome, verdict = None, f"{verdict}; not counted in the verdict: {h.aside}"
        if outcome and not spread_on_both(a, z):
            # one run has no spread to tell a change from noise by (003's NVMe pair read +6 % on its
            # first repeat and -9 % on three): said, and kept out of the verdict until repeats land
            outcome, verdict = "unjudged", f"{verdict}, from one run on a side: not judged yet"
        n = repeats_needed(a, z)
        power = "" if n is None else f" (repeats a kernel to tell these two apart at 5 % with 80 % power, from " \
            f"their spread: {n}; {min(a[3], z[3])} here)"
        out.append(Direction(f"direction, {h.label}: ours {pct(a[0], z[0]) or '0.00%'} {pair}{where}; {seed}: "
                             f"{verdict}{power}", outcome, f"{h.label}, {_kernel(b)}→{_kernel(k)}{where}"))
    return out


class Direction(str):
    """A direction line, with what it found against the seed: "same",
    "opposite", "flat" (ours no clear change where the seed moved),
    "unjudged" (one of those from one run on a side), or None (nothing of
    the seed's to compare); `what`: the figure and machine."""
    def __new__(cls, text: str, outcome: str | None, what: str):
        d = super().__new__(cls, text)
        d.outcome, d.what = outcome, what
        return d


def verdict(lines) -> str:
    """The seed's verdict from its tables' direction lines: reproduced (every
    direction compared is the seed's), partly (some), not (none), or not yet
    compared; with the directions counted and named."""
    ds = [d for d in lines if isinstance(d, Direction) and d.outcome and d.outcome != "unjudged"]
    thin = [d.what for d in lines if isinstance(d, Direction) and d.outcome == "unjudged"]
    later = f"; from one run on a side, not judged yet: {'; '.join(thin)}" if thin else ""
    if not ds:
        return ("verdict: not compared yet (no pair of kernels with a seed direction has runs here"
                + (f", {JUDGED_FROM} a side or more" if thin else "") + f"){later}")
    same = [d.what for d in ds if d.outcome == "same"]
    word = "reproduced" if len(same) == len(ds) else "partly reproduced" if same else "not reproduced"
    rest = [f"{d.what} ({'opposite' if d.outcome == 'opposite' else 'no clear change'})"
            for d in ds if d.outcome != "same"]
    return (f"verdict: {word}: {len(same)} of {len(ds)} directions the seed's"
            + (f" ({'; '.join(same)})" if same else "") + (f"; not: {'; '.join(rest)}" if rest else "") + later)
