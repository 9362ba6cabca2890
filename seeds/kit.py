"""What a seed's table is made of (seeds/tables.py gathers the five
seeds' own): the Seed, its Tables, their Rows and Headlines, and the
functions that read a row's value from one of our runs, and the column a run
falls in (seeds/runs.py picks runs per column; seed 002's notes group by it).

A row keeps the seed's name and unit and says how one of our runs gives it:
a function (con, run_id) -> value, None when the run did not record it (a
kernel without LOCK_STAT, a run without --timing detailed), or no function
at all when nothing we record can give it (`why` says so)."""
from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import experiments
import topologies
from analysis import compare, profile_report
from analysis.profile import KERNEL
from timing import modes

# what a row needs that a run may not have (a row's `why`)
NEED_PROFILE = "needs a run with the plugin's profile (every timing mode but off; --no-profile turns it off)"
NEED_LOCKSTAT = "needs --flavor lockstat"


@dataclass(frozen=True)
class Row:
    key: str                          # joins PUBLISHED[seed]
    name: str                         # the seed's row name
    unit: str
    value: Callable | None            # (con, run_id) -> float | None; None: we cannot measure it
    why: str = ""                     # why not, or what a run needs for it
    agg: str = "mean"                 # over repeats: "mean" (with min-max) or "sum"


@dataclass(frozen=True)
class Headline:
    key: str                          # the row whose direction is checked under the table
    label: str
    expect: int = 0                   # the seed's claimed sign (fixed -> pathological) when it published one side only
    claim: str = ""
    aside: str = ""                   # shown but kept out of the verdict, and why (003's tick-split system time)


@dataclass(frozen=True)
class Table:
    title: str
    rows: tuple | Callable            # Rows, or (con, run_ids) -> Rows when they depend on the runs
    headlines: tuple = ()


@dataclass(frozen=True)
class Seed:
    id: str
    title: str
    doc: str                          # the seed document (/work/shared/seeds/)
    experiment: str
    columns: tuple                    # the seed's kernels, in the document's order
    stands_for: dict                  # our patch set -> the seed's column it re-creates
    pairing: str                      # what the pairing means, and where it is loose
    tables: tuple
    by_machine: bool = False          # one column per kernel and machine (002: CPU count; 000, 004: shape)
    param_columns: tuple = ()         # 004: parameters that make a column of their own (zone_reclaim_mode=5)
    notes: Callable | None = None     # (con, run_ids) -> lines under the tables


# --- our figures ----------------------------------------------------------------
class Reading:
    """One table's read of the database: the connection (its execute is
    all the rows' functions use) and each run's figures, profile shares and
    kernel time, asked once however many rows and notes read them.
    seeds.render makes one per seed and passes it as `con`; a plain
    connection works too, uncached."""

    def __init__(self, con):
        self.con = con
        self._once: dict = {}

    def execute(self, *args):
        return self.con.execute(*args)

    def once(self, read: Callable, rid):
        if (read, rid) not in self._once:
            self._once[read, rid] = read(self.con, rid)
        return self._once[read, rid]


def _once(con, read: Callable, rid):
    return con.once(read, rid) if isinstance(con, Reading) else read(con, rid)


def figs(con, rid) -> dict:
    return _once(con, compare.figures, rid)


def shares(con, rid) -> dict:
    """The run's profile as (symbol, dso) -> % of CPU time, read once per table."""
    return _once(con, profile_report.shares, rid)


def _dso_ps(con, rid, dso: str) -> dict[str, tuple[int, int]]:
    rows = con.execute("SELECT symbol, SUM(time_ps), SUM(pause_ps) FROM profile_symbols WHERE run_id = ? AND dso = ? "
                       "GROUP BY symbol", (rid, dso)).fetchall()
    return {r[0]: (r[1] or 0, r[2] or 0) for r in rows}


def _kernel_ps(con, rid) -> dict[str, tuple[int, int]]:
    return _dso_ps(con, rid, KERNEL)


def kernel_ps(con, rid) -> dict[str, tuple[int, int]]:
    """The run's kernel symbols on the guest clock: symbol -> (time, of it
    spin-waiting in PAUSE), in ps, all CPUs and phases; {} without a profile."""
    return _once(con, _kernel_ps, rid)


def dso_s(con, rid, dso: str) -> float | None:
    """Seconds on the guest clock in one DSO (a program: every process
    running its code; or analysis.profile.KERNEL), all CPUs and phases (they
    partition the run); None without a profile or with none of it there."""
    ps = _dso_ps(con, rid, dso)
    return sum(t for t, _ in ps.values()) / 1e12 if ps else None


def disk(r) -> str:
    """A run's disk model by name ("cheetah-15k4: 5500/6000 us ..." -> cheetah-15k4); '' if none."""
    return (r["disk_model"] or "").split(":")[0]


def column(s, r) -> tuple:
    """A column, in display order: the machine (when the seed varies it), flavor and timing mode, then the
    kernel (the seed's order first)."""
    rank = list(dict.fromkeys(["vanilla", *s.stands_for]))  # vanilla 6.1 first: the % are against it
    have = json.loads(r["params_json"]) if s.param_columns else {}
    # a parameter away from its default is part of the column (004: zone_reclaim_mode=5, the page cache filled)
    own = tuple(f"{n}={have[n]}" for n in s.param_columns if n in have and have[n] != _default(s.experiment, n))
    kern = (rank.index(r["patch_set"]) if r["patch_set"] in rank else len(rank), r["patch_set"], own)
    machine = (r["cpus"], r["nodes"], r["topology"], disk(r)) if s.by_machine else ()
    return (machine, r["kernel_flavor"] != "default", r["kernel_flavor"], modes.get(r["timing_mode"]).loads_plugin,
            r["timing_mode"], kern)


@functools.cache
def _default(experiment: str, name: str):
    """The experiment's default for a parameter ("kernel" for a knob left to the kernel)."""
    p = experiments.load(experiment).params.get(name)
    return p.default if p is not None else None


def fig(name: str, scale: float = 1.0) -> Callable:
    def get(con, rid):
        v = figs(con, rid).get(name)
        return None if v is None else v[0] * scale
    return get


def run_of(con, rid):
    return con.execute("SELECT * FROM runs WHERE id = ?", (rid,)).fetchone()


def params(con, rid) -> dict:
    return json.loads(run_of(con, rid)["params_json"])


def delta(counter: str) -> Callable:
    """after - before over the whole run (the snapshots around the experiment)."""
    def get(con, rid):
        r = con.execute("SELECT delta FROM v_vmstat_delta WHERE run_id = ? AND counter = ?", (rid, counter)).fetchone()
        return None if r is None else float(r[0])
    return get


def span_s(con, rid) -> float | None:
    """Guest seconds between the before and after snapshots (their raw records)."""
    t = {}
    for (body,) in con.execute("SELECT body FROM records WHERE run_id = ? AND type = 'vmstat'", (rid,)):
        b = json.loads(body)
        t[b.get("phase")] = b.get("t_ms")
    if t.get("before") is None or t.get("after") is None or t["after"] <= t["before"]:
        return None
    return (t["after"] - t["before"]) / 1e3


def ratio(num: Callable, den: Callable | None, scale: float = 1.0) -> Callable:
    def get(con, rid):
        a, b = num(con, rid), den(con, rid)
        return None if a is None or not b else scale * a / b
    return get


def minus(a: Callable, b: Callable) -> Callable:
    def get(con, rid):
        x, y = a(con, rid), b(con, rid)
        return None if x is None or y is None else x - y
    return get


def kswapd_busiest(con, rid) -> float | None:
    """The busiest node's kswapd CPU share over the sampled span, in % (the
    seed's one kswapd: 2.4 had one, 6.1 has one per node)."""
    rows = con.execute("SELECT MIN(t_ms) AS t0, MAX(t_ms) AS t1, MIN(cpu_s) AS c0, MAX(cpu_s) AS c1 "
                       "FROM repro_kswapd_samples WHERE run_id = ? GROUP BY node", (rid,)).fetchall()
    shares = [(r["c1"] - r["c0"]) / ((r["t1"] - r["t0"]) / 1e3) for r in rows if r["t1"] > r["t0"]]
    return 100 * max(shares) if shares else None


def _busy(con, rid, dso: str | None) -> list[tuple[str, float]]:
    """(symbol, share of all CPU time) of the run's profile, most first, of
    one DSO (analysis.profile.KERNEL) or all (analysis/profile_report.shares: idle and
    drift are not symbols, so left out); [] without a profile."""
    rows = [(sym, pct) for (sym, d), pct in shares(con, rid).items() if d != "-" and (dso is None or d == dso)]
    return sorted(rows, key=lambda r: -r[1])


def cpu_share(*needles: str, dso: str | None = None) -> Callable:
    """Share of the CPUs' busy time on the guest clock (the run's profile) in
    symbols containing a needle: what a sampling profiler's share of samples
    is on the machine modeled. dso=analysis.profile.KERNEL: of the kernel's time only (a
    kernel profiler's view, gprof's in seed 000). None without a profile."""
    def get(con, rid):
        rows = _busy(con, rid, dso)
        total = sum(pct for _, pct in rows)
        if not total:
            return None
        return 100 * sum(pct for sym, pct in rows if any(n in sym for n in needles)) / total
    return get


def top_symbols(con, rid, n: int = 3, dso: str | None = None) -> list[tuple[str, float]]:
    """The run's top symbols by share of the CPUs' busy time (its profile)."""
    rows = _busy(con, rid, dso)
    total = sum(pct for _, pct in rows)
    return [(sym, 100 * pct / total) for sym, pct in rows[:n]] if total else []


def lock_contentions(like: str) -> Callable:
    """Contentions of the lock classes matching `like` among the run's top
    classes (repro_lockstat, LOCK_STAT kernels only: None without)."""
    def get(con, rid):
        if not con.execute("SELECT 1 FROM repro_lockstat WHERE run_id = ? LIMIT 1", (rid,)).fetchone():
            return None
        return float(con.execute("SELECT COALESCE(SUM(contentions), 0) FROM repro_lockstat WHERE run_id = ? "
                                 "AND phase = 'run' AND class LIKE ?", (rid, like)).fetchone()[0])
    return get


def scalar(sql: str, scale: float = 1.0) -> Callable:
    def get(con, rid):
        row = con.execute(sql, (rid,)).fetchone()  # no row: e.g. a cycle this run did not have
        return None if row is None or row[0] is None else float(row[0]) * scale
    return get


@functools.lru_cache(maxsize=32)
def topology_of(name: str, text: str):
    """A run's topology parsed from the copy its row keeps (cached: every row of a table asks)."""
    try:
        return topologies.parse(text, Path(f"{name}.toml"))
    except topologies.TopologyError:
        return None  # a topology file this vmlab no longer accepts: hops unknown
