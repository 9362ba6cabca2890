"""The profile on the guest clock: where every CPU's modeled time went, per
symbol (the kernel's and the guest programs'), per phase and per sampled
call path, as `perf report` would show it on the machine modeled.

The timing plugin writes `profile.json` in the run's folder (format 1,
timing/plugin_prof.c). ingest() stores it in profile_cpus, profile_symbols
and profile_stacks (schema migration 17) inside the run's final
transaction, with each vCPU's clock at exit from vcpu_clocks: the stretch
after the plugin's last look at a clock is idle if the vCPU ended halted,
else drift. check() sets each CPU's columns + idle + drift against its
clock (analysis/profile_check.py; docs/timing.md, "The profile"). render(), call_paths() and folded() are
`./run.py profile` (analysis/profilecli.py); analysis/profile_report.py
gives the HTML report its profiles (flame graphs: analysis/flamegraph.py)
and `./run.py compare` the symbols that moved most.
"""
from __future__ import annotations

import json
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import timing
from analysis.flamegraph import flamegraph_svg
from analysis.kit import text_table
from analysis.profile_check import TOLERANCE, CpuCheck, check
from analysis.rows import insert, metric

__all__ = ["ProfileError", "ingest", "check", "CpuCheck", "TOLERANCE", "select", "symbols", "render", "call_paths",
           "folded", "flamegraph_svg"]

FORMAT = 1
# the DSO profile_symbols gives the kernel's symbols (the plugin's own name, timing/plugin_prof.c)
KERNEL = "[kernel]"
# a symbol's time is the sum of these (time_ps); their headings in the table
COLUMNS = {"insn_ps": "insns", "core_ps": "core", "mem_ps": "memory", "lock_ps": "lock", "fetch_ps": "fetch",
           "pause_ps": "PAUSE"}


class ProfileError(ValueError):
    pass


# --- ingest ----------------------------------------------------------------------------------
def _int(d: dict, k: str) -> int:
    v = d.get(k, 0) if k == "lock_ps" else d[k]  # lock hand-offs: once a part of mem_ps, then a column
    if not isinstance(v, int) or isinstance(v, bool):
        raise ValueError(f"{k}: expected an integer, got {v!r}")
    return v


def rows(run_id: int, prof: dict, clocks: dict[int, int]) -> tuple[list, list, list]:
    """profile_cpus, profile_symbols and profile_stacks rows of a parsed
    profile.json; clocks: cpu -> its clock at exit (ps). ValueError,
    KeyError or TypeError on anything not of format 1."""
    if prof.get("format") != FORMAT:
        raise ValueError(f"format {prof.get('format')!r}, expected {FORMAT}")
    phases = {0: (None, None)}
    for p in prof["phases"]:
        pid = _int(p, "id")
        phases[_int(p, "index")] = (timing.PHASES.get(pid, f"phase id {pid}"), _int(p, "instance"))
    syms: dict[tuple, dict] = {}
    for s in prof["symbols"]:
        key = (_int(s, "cpu"), _int(s, "phase"), str(s["symbol"]), str(s["dso"]))
        if key[1] not in phases:
            raise ValueError(f"symbol {key[2]!r}: phase {key[1]} is not in the profile's phases")
        row = syms.setdefault(key, {"run_id": run_id, "cpu": key[0], "phase": key[1], "phase_name": phases[key[1]][0],
                                    "phase_instance": phases[key[1]][1], "symbol": key[2], "dso": key[3],
                                    **{k: 0 for k in ("insns", *COLUMNS, "pauses")}})
        for k in ("insns", *COLUMNS, "pauses"):  # System.map repeats names (static functions): one row per name
            row[k] += _int(s, k)
    for row in syms.values():
        row["time_ps"] = sum(row[k] for k in COLUMNS)
    cpus = []
    for c in prof["cpus"]:
        cpu, started, halted = _int(c, "cpu"), _int(c, "started"), _int(c, "halted_at_exit")
        start, idle, drift = _int(c, "start_ps"), _int(c, "idle_ps"), _int(c, "drift_ps")
        clock = clocks.get(cpu)
        if not started:  # it ran nothing under the profile: an empty stretch
            start = clock if clock is not None else start
        elif clock is not None:
            tail = clock - start - _int(c, "accounted_ps")  # after the plugin's last look at the clock
            if halted and tail >= 0:
                idle += tail
            else:
                drift += tail
        cpus.append({"run_id": run_id, "cpu": cpu, "started": started, "halted_at_exit": halted, "start_ps": start,
                     "clock_ps": clock, "idle_ps": idle, "drift_ps": drift, "insns": _int(c, "insns"),
                     "samples": _int(c, "samples"), "sample_failures": _int(c, "sample_failures")})
    stacks: dict[tuple, dict] = {}
    for s in prof["stacks"]:
        key = (_int(s, "cpu"), _int(s, "phase"), str(s["stack"]))
        if key[1] not in phases:
            raise ValueError(f"stack {key[2]!r}: phase {key[1]} is not in the profile's phases")
        row = stacks.setdefault(key, {"run_id": run_id, "cpu": key[0], "phase": key[1],
                                      "phase_name": phases[key[1]][0], "stack": key[2], "ps": 0, "samples": 0})
        row["ps"] += _int(s, "ps")
        row["samples"] += _int(s, "samples")
    return cpus, list(syms.values()), list(stacks.values())


def ingest(con, run_id: int, path, vcpu_clocks=None) -> bool:
    """Store the run's profile.json (path) in the profile tables; vcpu_clocks:
    the engine's rows (cpu, insns, stall_ps, clock_ps) at exit (None: read
    the run's vcpu_clocks table). No file: nothing stored, False. A file not
    of format 1: a warning on stderr, nothing stored, False (the run's other
    results are kept). Runs no transaction of its own."""
    path = Path(path)
    if not path.is_file():
        return False
    if vcpu_clocks is None:
        vcpu_clocks = con.execute("SELECT cpu, insns, stall_ps, clock_ps FROM vcpu_clocks WHERE run_id = ?",
                                  (run_id,)).fetchall()
    clocks = {int(c[0]): int(c[3]) for c in vcpu_clocks}
    try:
        prof = json.loads(path.read_text())
        cpus, syms, stacks = rows(run_id, prof, clocks)
        sample_ps, pause_ps = _int(prof, "sample_ps"), _int(prof, "pause_extra_ps")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        print(f"warning: {path}: not a profile of format {FORMAT} ({type(err).__name__}: {err}); not stored",
              file=sys.stderr)
        return False
    insert(con, "profile_cpus", cpus)
    insert(con, "profile_symbols", syms)
    insert(con, "profile_stacks", stacks)
    metric(con, run_id, "profile.sample_ps", sample_ps, "ps")
    metric(con, run_id, "profile.pause_extra_ps", pause_ps, "ps")
    return True


# --- what a command looks at ---------------------------------------------------------------
@dataclass
class Selection:
    """A run's profile, narrowed to a CPU and a phase (None: all)."""
    run_id: int
    cpu: int | None
    phases: list[int] | None
    label: str

    def cpu_where(self) -> tuple[str, list]:
        """The WHERE clause and arguments of its CPUs' rows."""
        if self.cpu is None:
            return "run_id = ?", [self.run_id]
        return "run_id = ? AND cpu = ?", [self.run_id, self.cpu]

    def where(self) -> tuple[str, list]:
        """... and of its symbols' and stacks' rows."""
        sql, args = self.cpu_where()
        if self.phases is not None:
            sql += f" AND phase IN ({', '.join('?' * len(self.phases))})"
            args += self.phases
        return sql, args


def phase_list(con, run_id: int) -> list[tuple[int, str | None, int | None]]:
    """(index, name, instance) of the phases the run's profile holds."""
    return [tuple(r) for r in con.execute(
        "SELECT DISTINCT phase, phase_name, phase_instance FROM profile_symbols WHERE run_id = ? ORDER BY phase",
        (run_id,))]


def present(con) -> bool:
    """Whether the database has the profile's tables (a read-only one may predate them: schema < 17)."""
    return con.execute("SELECT 1 FROM sqlite_master WHERE name = 'profile_cpus'").fetchone() is not None


def select(con, run_id: int, cpu: int | None = None, phase: str | int | None = None) -> Selection:
    """The selection, or ProfileError naming what does not exist."""
    if not con.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone():
        raise ProfileError(f"no run {run_id}")
    if not present(con):
        raise ProfileError(f"run {run_id} has no profile (the database predates profiles: schema < 17)")
    cpus = [r[0] for r in con.execute("SELECT cpu FROM profile_cpus WHERE run_id = ? ORDER BY cpu", (run_id,))]
    if not cpus:
        mode = con.execute("SELECT timing_mode FROM runs WHERE id = ?", (run_id,)).fetchone()[0]
        raise ProfileError(f"run {run_id} has no profile (timing {mode}; runs whose timing mode loads the plugin, "
                           "under per-vCPU clocks, write one)")
    if cpu is not None and cpu not in cpus:
        raise ProfileError(f"--cpu {cpu}: run {run_id}'s profile has CPUs {cpus[0]}-{cpus[-1]}")
    phases, what = None, "all phases"
    if phase is not None:
        have = phase_list(con, run_id)
        text = str(phase).strip()
        if text.isdigit():
            found = [(i, name) for i, name, _ in have if i == int(text)]
            phases = [i for i, _ in found]
            what = f"phase {text} ({found[0][1] or 'outside every phase'})" if found else ""
        else:
            phases = [i for i, name, _ in have if name == text]
            what = f"phase {text} ({len(phases)} instance{'s' if len(phases) != 1 else ''})"
        if not phases:
            names = sorted({n for _, n, _ in have if n})
            raise ProfileError(f"--phase {phase}: run {run_id}'s profile has no such phase (indexes 0-"
                               f"{have[-1][0] if have else 0}"
                               + (f"; names: {', '.join(names)}" if names else "; no named phase") + ")")
    label = f"{'CPU ' + str(cpu) if cpu is not None else f'all CPUs ({len(cpus)})'}, {what}"
    return Selection(run_id, cpu, phases, label)


def totals(con, sel: Selection) -> dict:
    """The selection's symbols' time, idle and drift (these two: not per phase, so 0 with a phase), and
    their sum: the share's denominator."""
    where, args = sel.where()
    sym = con.execute(f"SELECT COALESCE(SUM(time_ps), 0) FROM profile_symbols WHERE {where}", args).fetchone()[0]
    idle = drift = 0
    if sel.phases is None:
        cw, cargs = sel.cpu_where()
        idle, drift = con.execute(f"SELECT COALESCE(SUM(idle_ps), 0), COALESCE(SUM(drift_ps), 0) FROM profile_cpus "
                                  f"WHERE {cw}", cargs).fetchone()
    return {"symbols": sym, "idle": idle, "drift": drift, "total": sym + idle + drift}


def _stacks(con, sel: Selection) -> dict[str, list[int]]:
    """stack -> [ps, samples], summed over the selection's CPUs and phases."""
    where, args = sel.where()
    return {r[0]: [r[1], r[2]] for r in con.execute(
        f"SELECT stack, SUM(ps), SUM(samples) FROM profile_stacks WHERE {where} GROUP BY stack ORDER BY stack", args)}


def split(stack: str) -> tuple[str, list[str]]:
    """A sampled path's DSO and frames, root first: a user sample is its
    program in brackets, then its symbol ("[memeater];memset"); the rest are
    the kernel's."""
    frames = stack.split(";")
    if len(frames) > 1 and frames[0].startswith("[") and frames[0].endswith("]"):
        return frames[0][1:-1], frames[1:]
    return KERNEL, frames


def has_stacks(con, run_id: int) -> bool:
    return con.execute("SELECT 1 FROM profile_stacks WHERE run_id = ? LIMIT 1", (run_id,)).fetchone() is not None


def _ms(ps) -> str:
    return f"{ps / 1e9:,.3f}"


def _pct(part, whole) -> str:
    return f"{100.0 * part / whole:.2f}" if whole else "-"


def _header(con, sel: Selection, tot: dict) -> list[str]:
    r = con.execute("SELECT experiment, topology, patch_set, timing_mode FROM runs WHERE id = ?",
                    (sel.run_id,)).fetchone()
    out = [f"# run {sel.run_id}: {r['experiment']} on {r['topology']}, kernel {r['patch_set']}, timing "
           f"{r['timing_mode']}; {sel.label}",
           f"# CPU time {_ms(tot['total'])} ms (modeled, on the guest clock)"]
    if sel.phases is None:
        out[-1] += f": symbols {_pct(tot['symbols'], tot['total'])} %, idle {_pct(tot['idle'], tot['total'])} %, " \
                   f"drift {_pct(tot['drift'], tot['total'])} %"
    else:
        out[-1] += " in the phase's symbols (idle and drift are per CPU, not per phase)"
    names: dict[str, list[int]] = defaultdict(list)
    for i, name, _ in phase_list(con, sel.run_id):
        if name:
            names[name].append(i)
    if names:
        out.append("# phases: " + "; ".join(f"{n} ({len(ix)} instance{'s' if len(ix) > 1 else ''}, index "
                                             f"{ix[0]}{'-' + str(ix[-1]) if len(ix) > 1 else ''})"
                                             for n, ix in names.items()) + "; 0: outside every phase")
    cw, cargs = sel.cpu_where()
    n, failed = con.execute(f"SELECT SUM(samples), SUM(sample_failures) FROM profile_cpus WHERE {cw}", cargs).fetchone()
    every = con.execute("SELECT value FROM metrics WHERE run_id = ? AND name = 'profile.sample_ps'",
                        (sel.run_id,)).fetchone()
    out.append(f"# call paths: {n or 0:,} samples" + (f", every {every[0] / 1e6:g} us of a vCPU's busy time"
                                                      if every and every[0] else "")
               + (f" ({failed:,} of them the leaf alone: the stack was unreadable)" if failed else "")
               + ("" if n else ": no children column (stacks are sampled in detailed mode)"))
    return out


def symbols(con, sel: Selection, sort: str = "self") -> tuple[list[dict], bool]:
    """The selection's symbols summed over its CPUs and phases, ranked by
    their own time (sort "children": by their children's, then their own),
    each with `children`: the time of the sampled paths through it (None
    when the selection has none); and whether it has sampled paths."""
    where, args = sel.where()
    syms = {(r["symbol"], r["dso"]): dict(r) for r in con.execute(
        f"SELECT symbol, dso, SUM(insns) insns, {', '.join(f'SUM({k}) {k}' for k in COLUMNS)}, SUM(time_ps) time_ps "
        f"FROM profile_symbols WHERE {where} GROUP BY symbol, dso", args)}
    stacks = _stacks(con, sel)
    children: dict[str, int] = defaultdict(int)
    for stack, (ps, _) in stacks.items():
        dso, frames = split(stack)
        for frame in set(frames):
            children[(frame, dso)] += ps
    for name, dso in children:  # a caller with no time of its own still has its children's
        syms.setdefault((name, dso), {"symbol": name, "dso": dso, "insns": 0, "time_ps": 0, **{k: 0 for k in COLUMNS}})
    for s in syms.values():
        s["children"] = children.get((s["symbol"], s["dso"]), 0) if stacks else None
    key = (lambda s: (-(s["children"] or 0), -s["time_ps"], s["symbol"])) if sort == "children" else \
        (lambda s: (-s["time_ps"], s["symbol"]))
    return sorted(syms.values(), key=key), bool(stacks)


def render(con, run_id: int, cpu: int | None = None, phase=None, callers: str | None = None, limit: int = 40,
           sort: str = "self", percent: bool = False) -> str:
    """The perf-report-style table of the selection (or, with callers, the
    call paths through that symbol: call_paths()): self and children share
    of the CPU time, the symbol, its DSO, its time, instructions and the
    five columns in ms (percent: as % of the symbol's time), then idle and
    drift."""
    if callers is not None:
        return call_paths(con, run_id, callers, cpu, phase, limit)
    sel = select(con, run_id, cpu, phase)
    tot = totals(con, sel)
    ranked, stacks = symbols(con, sel, sort)
    head = ["self %"] + (["children %"] if stacks else []) + ["symbol", "dso", "time ms", "instructions"] + \
        [f"{h} {'%' if percent else 'ms'}" for h in COLUMNS.values()]
    table = []
    for s in ranked[:limit]:
        cols = [_pct(s[k], s["time_ps"]) if percent else _ms(s[k]) for k in COLUMNS]
        kids = [_pct(s["children"], tot["total"]) if s["children"] is not None else "-"] if stacks else []
        table.append([_pct(s["time_ps"], tot["total"]), *kids, s["symbol"], s["dso"], _ms(s["time_ps"]),
                      f"{s['insns']:,}", *cols])
    if sel.phases is None:
        for name, ps in (("[idle]", tot["idle"]), ("[drift]", tot["drift"])):
            table.append([_pct(ps, tot["total"])] + ([""] if stacks else []) + [name, "-", _ms(ps)]
                         + [""] * (1 + len(COLUMNS)))
    out = _header(con, sel, tot) + ["#"] + text_table(head, table, {1 + stacks, 2 + stacks})
    rest = ranked[limit:]
    if rest:
        out.append(f"({len(rest)} more symbols: {_pct(sum(s['time_ps'] for s in rest), tot['total'])} % of the CPU "
                   f"time; --limit N shows more)")
    return "\n".join(out) + "\n"


def call_paths(con, run_id: int, symbol: str, cpu: int | None = None, phase=None, limit: int = 40) -> str:
    """The sampled call paths that end in symbol or pass through it, each
    cut at it (its callers up to the root), with their share of the CPU time:
    total (every path through it) and self (it was the leaf)."""
    sel = select(con, run_id, cpu, phase)
    if not has_stacks(con, run_id):
        raise ProfileError(f"run {run_id} has no call paths (they are sampled in detailed mode only)")
    tot = totals(con, sel)
    paths: dict[tuple, list[int]] = defaultdict(lambda: [0, 0, 0])  # total ps, self ps, samples
    for stack, (ps, n) in _stacks(con, sel).items():
        frames = stack.split(";")
        if symbol not in frames:
            continue
        cut = len(frames) - 1 - frames[::-1].index(symbol)
        p = paths[tuple(frames[:cut + 1])]
        p[0] += ps
        p[2] += n
        if cut == len(frames) - 1:
            p[1] += ps
    if not paths:
        raise ProfileError(f"--callers {symbol}: in no sampled call path of run {run_id} ({sel.label})")
    all_ps, self_ps, n = (sum(p[i] for p in paths.values()) for i in range(3))
    out = [f"# call paths through {symbol}: run {run_id}, {sel.label}",
           f"# in {_pct(all_ps, tot['total'])} % of the CPU time ({n:,} samples), as the leaf "
           f"{_pct(self_ps, tot['total'])} %; {len(paths)} distinct caller chains",
           "#"]
    ranked = sorted(paths.items(), key=lambda kv: (-kv[1][0], kv[0]))
    rows = [[_pct(p[0], tot["total"]), _pct(p[1], tot["total"]), f"{p[2]:,}", " <- ".join(reversed(chain))]
            for chain, p in ranked[:limit]]
    out += text_table(["total %", "self %", "samples", f"call path ({symbol}, then its callers to the root)"],
                      rows, {3})
    if len(ranked) > limit:
        out.append(f"({len(ranked) - limit} more chains; --limit N shows more)")
    return "\n".join(out) + "\n"


def folded(con, run_id: int, cpu: int | None = None, phase=None) -> list[str]:
    """Folded lines ("root;...;leaf weight_ps") of the selection's sampled
    call paths (the kernel's; a user sample's symbol under its program in
    brackets); a run without any (no detailed mode): every symbol under its
    DSO ("[dso];symbol time_ps")."""
    sel = select(con, run_id, cpu, phase)
    if has_stacks(con, run_id):
        return [f"{stack} {ps}" for stack, (ps, _) in _stacks(con, sel).items() if ps and stack]
    where, args = sel.where()
    dso = lambda d: d if d.startswith("[") else f"[{d}]"
    return [f"{dso(r[0])};{r[1]} {r[2]}" for r in con.execute(
        f"SELECT dso, symbol, SUM(time_ps) t FROM profile_symbols WHERE {where} GROUP BY dso, symbol "
        "HAVING t > 0 ORDER BY dso, symbol", args)]
