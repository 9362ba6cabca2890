"""tiering's results: each interval's throughput on the guest clock, where
the hot window's pages were and what the kernel's tiering did in it
(tiering_intervals); each run's setting as the kernel had it, its memory
tiers and the windows' placement after the fill (tiering_runs); per phase
(before and after the roles swap) in v_tiering_phases. The summary prints
the intervals as a table and says what promotion achieved."""
from __future__ import annotations

from analysis import kit
from analysis.kit import RUN_ID, Column, Table, View
from analysis.rows import metric

QUERY_TABLE = "tiering_intervals"
SANITY = True

# /proc/vmstat counters the guest reports per interval (tiering.c COUNTERS)
COUNTERS = ("pgpromote_success", "pgpromote_candidate", "pgdemote_kswapd", "pgdemote_direct", "numa_hint_faults",
            "numa_hint_faults_local", "numa_pages_migrated", "numa_pte_updates", "pgmigrate_success", "pswpout")
WHERE = ("hot", "other", "cold")

INTERVALS = Table("tiering_intervals", "tiering: each timed interval's accesses on the guest clock, where the sampled "
                  "pages of the hot window, the other window and the cold rest were, and the kernel's tiering counters "
                  "(deltas; NULL where the kernel has no such counter).", (
    RUN_ID,
    Column("interval", "INTEGER", not_null=True),
    Column("phase", "INTEGER", "0 before the roles swap, 1 after (the hot window at the set's other end)"),
    Column("t_ms", "REAL", "the interval's start, guest ms after the first interval's"),
    Column("ms", "REAL", "its guest ms"),
    Column("accesses", "INTEGER"),
    Column("accesses_per_s", "REAL", "accesses a guest second (one dependent load at a time)"),
    Column("ns_per_access", "REAL"),
    *(Column(f"{w}_dram_share", "REAL", f"share of the {w} pages sampled that were on DRAM (a node with CPUs)")
      for w in WHERE),
    *(Column(f"{w}_absent", "INTEGER", f"{w} pages sampled that were not resident") for w in WHERE),
    Column("sampled", "INTEGER", "pages sampled per region"),
    *(Column(c, "INTEGER") for c in COUNTERS),
    Column("absent_counters", "TEXT", "counters this kernel's /proc/vmstat lacks (comma-separated)"),
    Column("dram_free_kib", "INTEGER", "MemFree of the nodes with CPUs after the interval"),
    Column("slow_free_kib", "INTEGER", "MemFree of the nodes without CPUs (CXL) after the interval"),
), key=("run_id", "interval"))

RUNS = Table("tiering_runs", "tiering: each run's set, the kernel's tiering setting as the guest read it back, its "
             "memory tiers and where the windows were after the fill.", (
    RUN_ID,
    Column("set_mib", "INTEGER"),
    Column("hot_mib", "INTEGER"),
    Column("cold_every", "INTEGER", "one access in this many went to the cold rest (0: none)"),
    Column("swap_at", "INTEGER", "the interval the roles swapped at"),
    Column("fill_ms", "REAL", "guest ms of the first touch of the set"),
    Column("fill_pgdemote", "INTEGER", "pages the kernel demoted while the set was first touched (pgdemote_kswapd + "
                                       "pgdemote_direct; NULL: the kernel has neither)"),
    Column("numa_balancing", "TEXT", "kernel.numa_balancing as the guest read it (2: memory tiering mode)"),
    Column("demotion_enabled", "TEXT", "/sys/kernel/mm/numa/demotion_enabled as read (NULL: no such file)"),
    Column("promote_rate_limit_mbps", "TEXT", "numa_balancing_promote_rate_limit_MBps as read"),
    Column("tiers", "TEXT", "the kernel's memory tiers, fastest first: 'memory_tier4: 0; memory_tier144: 1'"),
    Column("tier_count", "INTEGER"),
    Column("dram_nodes", "TEXT", "the nodes with CPUs"),
    Column("start_a_dram_share", "REAL", "the first hot window's share on DRAM after the fill"),
    Column("start_b_dram_share", "REAL", "the second hot window's (after the swap) share on DRAM after the fill"),
    Column("start_set_dram_share", "REAL", "the whole set's share on DRAM after the fill"),
    Column("accesses_per_s", "REAL", "over every interval"),
    Column("phase0_accesses_per_s", "REAL"),
    Column("phase1_accesses_per_s", "REAL"),
), key=("run_id",))

V_PHASES = View("v_tiering_phases", "tiering: per run and phase (0 before the roles swap, 1 after): mean accesses a "
                "second, the hot window's DRAM share in the phase's first and last interval, promotions, demotions "
                "and hint faults.", """
    SELECT i.run_id, i.phase, COUNT(*) AS intervals, SUM(i.accesses) * 1000.0 / SUM(i.ms) AS accesses_per_s,
           (SELECT f.hot_dram_share FROM tiering_intervals f WHERE f.run_id = i.run_id AND f.phase = i.phase
            ORDER BY f.interval LIMIT 1) AS hot_dram_share_first,
           (SELECT l.hot_dram_share FROM tiering_intervals l WHERE l.run_id = i.run_id AND l.phase = i.phase
            ORDER BY l.interval DESC LIMIT 1) AS hot_dram_share_last,
           SUM(i.pgpromote_success) AS pgpromote_success, SUM(i.pgdemote_kswapd) + SUM(i.pgdemote_direct) AS pgdemote,
           SUM(i.numa_hint_faults) AS numa_hint_faults, SUM(i.numa_pages_migrated) AS numa_pages_migrated
    FROM tiering_intervals i GROUP BY i.run_id, i.phase""")

TABLES = (INTERVALS, RUNS, V_PHASES)
SCHEMA = kit.schema(*TABLES)


def share(where: dict | None) -> float | None:
    """The DRAM share of a region's sampled pages; None if none could be told."""
    if not where or not where.get("sampled"):
        return None
    return where.get("dram", 0) / where["sampled"]


def _free(free: list, dram: list[int], on_dram: bool) -> int | None:
    vals = [v for n, v in enumerate(free or []) if (n in dram) == on_dram and v is not None and v >= 0]
    return sum(vals) if vals else None


def interval_row(b: dict, run_id: int, dram: list[int]) -> dict:
    """A tiering_interval record as a row of tiering_intervals."""
    vm = b.get("vmstat") or {}
    return INTERVALS.from_body(b, run_id=run_id, **{f"{w}_dram_share": share(b.get(w)) for w in WHERE},
                               **{f"{w}_absent": (b.get(w) or {}).get("absent") for w in WHERE},
                               sampled=(b.get("hot") or {}).get("sampled"),
                               **{c: vm.get(c) for c in COUNTERS},
                               absent_counters=",".join(b.get("absent") or []) or None,
                               dram_free_kib=_free(b.get("free_kib"), dram, True),
                               slow_free_kib=_free(b.get("free_kib"), dram, False))


def tier_text(tiers: dict | None) -> str | None:
    """{'memory_tier144': '1', 'memory_tier4': '0'} -> 'memory_tier4: 0; memory_tier144: 1' (fastest first)."""
    if not tiers:
        return None
    order = sorted(tiers, key=lambda k: int(k.removeprefix("memory_tier")) if k[11:].isdigit() else 1 << 30)
    return "; ".join(f"{k}: {tiers[k]}" for k in order)


def run_row(start: dict, done: dict | None, run_id: int) -> dict:
    done = done or {}
    fill = [v for k, v in (start.get("fill_vmstat") or {}).items() if k.startswith("pgdemote_") and v is not None]
    return RUNS.from_body(start, run_id=run_id, tiers=tier_text(start.get("tiers")),
                          fill_pgdemote=sum(fill) if fill else None,
                          tier_count=len(start.get("tiers") or {}),
                          dram_nodes=",".join(map(str, start.get("dram_nodes") or [])),
                          start_a_dram_share=share(start.get("window_a")),
                          start_b_dram_share=share(start.get("window_b")),
                          start_set_dram_share=share(start.get("set")),
                          accesses_per_s=done.get("accesses_per_s"),
                          phase0_accesses_per_s=done.get("phase0_accesses_per_s"),
                          phase1_accesses_per_s=done.get("phase1_accesses_per_s"))


def total(rows: list, *counters: str) -> int | None:
    """The counters summed over the intervals; None if the kernel lacks all of them."""
    vals = [r[c] for r in rows for c in counters if r[c] is not None]
    return sum(vals) if vals else None


def ingest(con, run_id: int, parsed, topo) -> None:
    start = parsed.first("tiering_start")
    dram = (start.body.get("dram_nodes") if start else None) or list(range(topo.cpu_nodes))
    rows = [interval_row(r.body, run_id, dram) for r in parsed.of("tiering_interval")]
    INTERVALS.insert(con, rows)
    done = parsed.first("tiering_done")
    if start:
        RUNS.insert(con, run_row(start.body, done.body if done else None, run_id))
        metric(con, run_id, "tiering.hot_dram_share_start", share(start.body.get("window_a")), "share")
    if done:
        for key, name in (("accesses_per_s", "maccesses_per_s"), ("phase0_accesses_per_s", "phase0_maccesses_per_s"),
                          ("phase1_accesses_per_s", "phase1_maccesses_per_s")):
            if done.body.get(key) is not None:
                metric(con, run_id, f"tiering.{name}", done.body[key] / 1e6, "M/s")
    for ph in (0, 1):
        last = [r for r in rows if r["phase"] == ph]
        if last and last[-1]["hot_dram_share"] is not None:
            metric(con, run_id, f"tiering.hot_dram_share_phase{ph}", last[-1]["hot_dram_share"], "share")
    for name, counters in (("pgpromote_success", ("pgpromote_success",)),
                           ("pgpromote_candidate", ("pgpromote_candidate",)),
                           ("pgdemote", ("pgdemote_kswapd", "pgdemote_direct")),
                           ("numa_hint_faults", ("numa_hint_faults",)),
                           ("numa_pages_migrated", ("numa_pages_migrated",))):
        v = total(rows, *counters)
        if v is not None:  # a counter the kernel lacks is no figure, not 0
            metric(con, run_id, f"tiering.{name}", v, "faults" if name == "numa_hint_faults" else "pages")


def _pct(v) -> str:
    return "-" if v is None else f"{100 * v:.0f} %"


def _n(v) -> str:
    return "-" if v is None else str(v)


def interval_lines(rows: list) -> list[str]:
    """The intervals as a fixed-width table."""
    table = [[r["interval"], r["phase"], f"{r['t_ms'] / 1e3:.2f}", f"{r['accesses_per_s'] / 1e6:.2f}",
              f"{r['ns_per_access']:.0f}", _pct(r["hot_dram_share"]), _pct(r["other_dram_share"]),
              _pct(r["cold_dram_share"]), _n(r["pgpromote_success"]), _n(r["pgpromote_candidate"]),
              _n(None if r["pgdemote_kswapd"] is None else r["pgdemote_kswapd"] + (r["pgdemote_direct"] or 0)),
              _n(r["numa_hint_faults"]), _n(r["numa_pages_migrated"]),
              "-" if r["dram_free_kib"] is None else f"{r['dram_free_kib'] / 1024:.1f}"] for r in rows]
    head = ["#", "ph", "t s", "M acc/s", "ns/acc", "hot on DRAM", "other", "cold", "promoted", "candidates",
            "demoted", "hint faults", "migrated", "DRAM free MiB"]
    return kit.text_table(head, table)


def figures(con, run_id: int, r, params: dict, w) -> None:
    run = con.execute("SELECT * FROM tiering_runs WHERE run_id = ?", (run_id,)).fetchone()
    rows = con.execute("SELECT * FROM tiering_intervals WHERE run_id = ? ORDER BY interval", (run_id,)).fetchall()
    if run is None or not rows:
        w("tiering: no interval records")
        return
    cold = f"1 access in {run['cold_every']} to the cold rest" if run["cold_every"] else "no access to the cold rest"
    w(f"\ntiering: a {run['set_mib']} MiB set, a {run['hot_mib']} MiB hot window ({cold}); the window moves to the "
      f"set's other end at interval {run['swap_at']}")
    w(f"  kernel: numa_balancing {run['numa_balancing']}, demotion_enabled {run['demotion_enabled'] or '-'}, promote "
      f"rate limit {run['promote_rate_limit_mbps'] or '-'} MB/s; memory tiers ({run['tier_count']}): "
      f"{run['tiers'] or 'none (no /sys/devices/virtual/memory_tiering)'}; DRAM nodes {run['dram_nodes']}")
    w(f"  after the fill ({run['fill_ms']:.0f} ms, {_n(run['fill_pgdemote'])} pages demoted during it): on DRAM the "
      f"first window {_pct(run['start_a_dram_share'])}, the second {_pct(run['start_b_dram_share'])}, the set "
      f"{_pct(run['start_set_dram_share'])}")
    absent = {c for x in rows if x["absent_counters"] for c in x["absent_counters"].split(",")}
    if absent:
        w(f"  this kernel's /proc/vmstat has no {', '.join(sorted(absent))}: shown as -")
    w("  per interval (guest clock; hot: the window of the interval's phase, other: the other window, cold: the set "
      "between them; counters are deltas):")
    for line in interval_lines(rows):
        w("  " + line)
    for p in con.execute("SELECT * FROM v_tiering_phases WHERE run_id = ? ORDER BY phase", (run_id,)):
        w(f"  phase {p['phase']}: {p['accesses_per_s'] / 1e6:.2f} M accesses/s; hot window on DRAM "
          f"{_pct(p['hot_dram_share_first'])} -> {_pct(p['hot_dram_share_last'])}; promoted "
          f"{_n(p['pgpromote_success'])}, demoted {_n(p['pgdemote'])}, hint faults {_n(p['numa_hint_faults'])}")


def verdict(con, run_id: int, r, params: dict, w) -> None:
    run = con.execute("SELECT * FROM tiering_runs WHERE run_id = ?", (run_id,)).fetchone()
    rows = con.execute("SELECT * FROM tiering_intervals WHERE run_id = ? ORDER BY interval", (run_id,)).fetchall()
    if run is None or not rows:
        return
    promoted, demoted = total(rows, "pgpromote_success"), total(rows, "pgdemote_kswapd", "pgdemote_direct")
    if run["start_set_dram_share"] == 1:
        w("  verdict: the whole set fit on DRAM: nothing to tier (a baseline)")
        return
    if run["tier_count"] == 1:
        w(f"  verdict: the kernel formed one memory tier ({run['tiers']}): the CXL node shares the DRAM tier, so "
          f"there is nothing to promote from or demote to (promoted {_n(promoted)}, demoted {_n(demoted)})")
        return
    hot = [x["hot_dram_share"] for x in rows if x["hot_dram_share"] is not None]
    fill = f" ({run['fill_pgdemote']} demoted during the fill)" if run["fill_pgdemote"] else ""
    w(f"  verdict: over the intervals promoted {_n(promoted)} and demoted {_n(demoted)} pages{fill}; the hot window "
      f"on DRAM {_pct(hot[0] if hot else None)} in the first interval, {_pct(hot[-1] if hot else None)} in the last")
