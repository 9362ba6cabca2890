"""Each seed's own table, as rows over OUR database (seeds/report.py prints
them beside the seed's published figures, PUBLISHED there, joined by row key;
what a table is made of, and the functions most rows read with, are in
seeds/kit.py; 002's and 004's, the longest, are seeds/table002.py and
seeds/table004.py).

Our kernels stand for the seed's columns (`stands_for`): each patch set
re-creates one side of the seed's comparison on Linux 6.1, so vanilla is
usually the seed's FIXED kernel and the patch set its pathological one."""
from __future__ import annotations

import statistics
from collections.abc import Callable

from analysis.profile import KERNEL
from seeds.kit import (
    NEED_LOCKSTAT,
    NEED_PROFILE,
    Headline,
    Row,
    Seed,
    Table,
    cpu_share,
    delta,
    disk,
    dso_s,
    fig,
    kernel_ps,
    kswapd_busiest,
    lock_contentions,
    minus,
    params,
    ratio,
    run_of,
    scalar,
    span_s,
    topology_of,
)
from seeds.published import FIX, LEVELS_MB, PUBLISHED, STORM
from seeds.table002 import S002  # the two longest tables are modules of their own
from seeds.table004 import S004


# --- 000: mlockchurn -------------------------------------------------------------
def _over_ideal(column: str) -> Callable:
    """A chunk's time (wall_ms: real; busy_ms: the machine's CPU) over the
    free-memory pace: the first `slots` chunks land in memory nobody used
    yet (the seed's 'virgin' memory, its 18 s a chunk)."""
    def get(con, rid):
        ms = [r[0] for r in con.execute(f"SELECT {column} FROM mlockchurn_chunks WHERE run_id = ? ORDER BY chunk",
                                        (rid,))]
        slots = params(con, rid).get("slots", 1)
        if len(ms) <= slots or any(m is None for m in ms) or not statistics.mean(ms[:slots]):
            return None  # runs before the CPU columns: None
        return 100 * (sum(ms) / (statistics.mean(ms[:slots]) * len(ms)) - 1)
    return get


def _memory_notes(con, run_ids) -> list[str]:
    """The seed's fix against the period set on every machine that has both,
    smallest memory first: Ben's 3.5 GB, where the fix "did not have much
    effect", against the seed's 2 GB (block 000-memory). The measure is
    kswapd's CPU while the program sleeps with everything locked (the busiest
    node), the seed's purest one (100 %, 18 % with the fix): on the sweep's
    NVMe machines the churn itself is over in a fraction of a second."""
    sleeping = fig("mlockchurn.kswapd_sleeping_busiest", 100)
    by: dict = {}
    for rid in run_ids:
        r = run_of(con, rid)
        if r["kernel_flavor"] == "default" and r["patch_set"] in ("mlocked-on-lru", "mlocked-on-lru-kswapd-sleeps"):
            v = sleeping(con, rid)
            if v is not None:
                # one sweep: machines of one shape (CPUs, nodes), timing mode and sleep, memory apart
                shape = (r["cpus"], r["nodes"], r["timing_mode"], params(con, rid).get("sleep_s"))
                size = (r["nodes"] * r["memory_mib_per_node"], r["topology"])
                by.setdefault(shape, {}).setdefault(size, {}).setdefault(r["patch_set"], []).append(v)
    pub = PUBLISHED["000"]["kswapd_sleeping"]
    out = []
    for (cpus, nodes, mode, sleep_s), sizes in sorted(by.items(), key=lambda kv: str(kv[0])):
        parts = []
        for (mib, topo), k in sorted(sizes.items()):  # smallest memory first
            a, b = k.get("mlocked-on-lru"), k.get("mlocked-on-lru-kswapd-sleeps")
            if a and b and statistics.mean(a):
                parts.append(f"{topo} ({mib} MiB): {statistics.mean(a):.0f} → {statistics.mean(b):.0f} % "
                             f"({100 * (statistics.mean(b) / statistics.mean(a) - 1):+.0f} %)")
        if len(parts) >= 2:
            asleep = f"{sleep_s:g} s asleep" if isinstance(sleep_s, (int, float)) else "the default sleep"
            out.append(f"the seed's fix by memory size ({cpus} CPUs, {nodes} nodes, timing {mode}, {asleep}), "
                       "kswapd CPU while the program sleeps (busiest node, mean), period set → + fix: "
                       + "; ".join(parts) + f" (the seed: {pub[STORM].values[0]:g} → {pub[FIX].values[0]:g} % on "
                       "2 GB; on 3.5 GB the fix \"did not have much effect\")")
    return out


S000 = Seed(
    "000", 'Daniel Phillips, "Google\'s mm problems" (linux-kernel, 2001; 2.4.9, 2 CPUs, 2 GB)',
    "000_d78135e0fdf7ed9c.txt", "mlockchurn", ("2.4.9", "2.4.9 + kswapd-sleeps"),
    {"mlocked-on-lru": "2.4.9", "mlocked-on-lru-kswapd-sleeps": "2.4.9 + kswapd-sleeps"},
    "vanilla 6.1 is ours alone (mlocked pages on the unevictable list, kswapd gives up on a hopeless node); "
    "mlocked-on-lru puts mlocked pages back on the LRU and takes kswapd's backoff out, as 2.4.9 was; "
    "mlocked-on-lru-kswapd-sleeps adds the seed's fix",
    (Table("run time and kswapd", (
        Row("chunk_s", "time per chunk (munlock, map, mlock)", "s",
            scalar("SELECT AVG(wall_ms) FROM mlockchurn_chunks WHERE run_id = ?", 1e-3)),
        Row("run_s", "run time, all chunks", "s", fig("mlockchurn.elapsed_s")),
        Row("over_ideal", "real time over the free-memory pace", "%", _over_ideal("wall_ms")),
        Row("cpu_over_ideal", "CPU time over ideal (the machine's, kswapd included)", "%", _over_ideal("busy_ms"),
            "needs mlockchurn's CPU columns (runs since they were added)"),
        Row("program_cpu", "the program's CPU time (user + system)", "s", fig("mlockchurn.cpu_s")),
        Row("kswapd_steady", "kswapd CPU, busiest node over the run", "%", kswapd_busiest),
        Row("kswapd_peak", "kswapd CPU, busiest node's peak interval", "%", fig("mlockchurn.kswapd_share_peak", 100)),
        Row("kswapd_sleeping", "kswapd CPU while the program sleeps (busiest node)", "%",
            fig("mlockchurn.kswapd_sleeping_busiest", 100), "needs a run with sleep_s > 0"),
        Row("pgscan", "pages scanned", "pages", fig("mlockchurn.pgscan")),
        Row("pgsteal", "pages reclaimed", "pages", fig("mlockchurn.pgsteal")),
        Row("efficiency", "reclaim efficiency", "%", fig("mlockchurn.reclaim_efficiency", 100)),
        Row("majflt", "major faults", "faults",
            scalar("SELECT SUM(majflt) FROM mlockchurn_chunks WHERE run_id = ?")),
    ), (Headline("kswapd_steady", "kswapd CPU"), Headline("kswapd_sleeping", "kswapd CPU while the program sleeps"),
        Headline("run_s", "run time"))),
     Table("profile (seed: gprof samples with the fix; ours: share of the kernel's busy time on the guest clock)", (
         Row("refill_inactive_scan", "refill_inactive_scan (6.1: shrink_active_list)", "%",
             cpu_share("shrink_active_list", "refill_inactive", dso=KERNEL), NEED_PROFILE),
         Row("page_launder", "page_launder (6.1: shrink_inactive_list, shrink_folio_list)", "%",
             cpu_share("shrink_inactive_list", "shrink_folio_list", "page_launder", dso=KERNEL),
             NEED_PROFILE),
         Row("stext_lock", "stext_lock (spin lock contention)", "%", cpu_share("spin_lock", dso=KERNEL),
             NEED_PROFILE),
         Row("lru_lock", "LRU lock contentions (lock_stat's top 10 classes)", "contentions",
             lock_contentions("%lru_lock%"), NEED_LOCKSTAT),
     ))), by_machine=True, notes=_memory_notes)


# --- 001: kvio ---------------------------------------------------------------------


def level(i: int, expr: str, scale: float = 1.0) -> Callable:
    return scalar(f"SELECT {expr} FROM kvio_levels WHERE run_id = ? AND level = {i}", scale)


def _per_level(key, name, unit, expr, scale=1.0):
    return tuple(Row(f"{key}-{i}", f"{name}-{mb}M", unit, level(i, expr, scale)) for i, mb in enumerate(LEVELS_MB))


def _kvio_notes(con, run_ids) -> list[str]:
    rows = con.execute("SELECT level, io_frac, io_mib FROM kvio_levels WHERE run_id = ? ORDER BY level",
                       (run_ids[0],)).fetchall()
    return [f"IO levels: the seed's dd wrote {' / '.join(str(m) for m in LEVELS_MB)} MB; ours write "
            + " / ".join(f"{r['io_frac']:g}" for r in rows) + " x RAM = "
            + " / ".join(str(r["io_mib"]) for r in rows) + " MiB (level by level)"] if rows else []


S001 = Seed(
    "001", 'Mel Gorman, "Reduce system disruption due to kswapd" (linux-mm, 2013; 3.9-rc2)',
    "001_d78c33ae31961e03.txt", "kvio", ("vanilla", "flatten-v1r8", "limitprio-v1r8", "block-v1r8", "tidy-v1r8"),
    {"vanilla": "tidy-v1r8", "scan-balance-3.9": "vanilla", "kswapd-series-flatten": "flatten-v1r8",
     "kswapd-series-limitprio": "limitprio-v1r8", "kswapd-series-block": "block-v1r8"},
    "6.1 has the whole series (and since spares anon while page cache is plentiful); scan-balance-3.9 takes out "
    "the series' descendants and that shortcut, as 3.9-rc2 was; the kswapd-series sets put the series back step "
    "by step on 3.9's scan balance (block and tidy are one kernel in 6.1's terms)",
    (Table("Ops, per IO level (mmtests' table: memcachetest there, our key-value store here)", (
        *_per_level("ops", "Ops memcachetest", "ops/s", "ops_per_s"),
        *_per_level("io", "Ops io-duration", "s", "io_s"),
        # mmtests' swaptotal is swap-ins plus swap-outs (its vanilla levels add up to the vmstat table's totals)
        *_per_level("swaptotal", "Ops swaptotal", "pages", "pswpin + pswpout"),
        *_per_level("swapin", "Ops swapin", "pages", "pswpin"),
        *_per_level("minor", "Ops minorfaults", "faults", "pgfault - pgmajfault"),
        *_per_level("major", "Ops majorfaults", "faults", "pgmajfault"),
        *_per_level("kscan", "Kswapd pages scanned", "pages", "pgscan_kswapd"),
        *_per_level("ksteal", "Kswapd pages reclaimed", "pages", "pgsteal_kswapd"),
        *_per_level("keff", "Kswapd efficiency", "%", "kswapd_efficiency", 100),
        *_per_level("kvel", "Kswapd velocity", "pages/s", "kswapd_velocity"),
        *_per_level("dscan", "Direct pages scanned", "pages", "pgscan_direct"),
        *_per_level("dsteal", "Direct pages reclaimed", "pages", "pgsteal_direct"),
        *_per_level("wanon", "Page writes anon", "pages", "pswpout"),
        Row("wfile-level", "Page writes file-<level>M", "pages", None,
            "kvio_levels has no nr_vmscan_write per level (the whole-run table has it)"),
    ), (Headline("ops-3", "ops/s at the top IO level"), Headline("major-3", "major faults at the top IO level"))),
     Table("vmstat over the whole test (snapshots before and after)", (
         Row("pgpgin", "Page Ins", "KiB", delta("pgpgin")),
         Row("pgpgout", "Page Outs", "KiB", delta("pgpgout")),
         Row("pswpin", "Swap Ins", "pages", delta("pswpin")),
         Row("pswpout", "Swap Outs", "pages", delta("pswpout")),
         Row("dscan", "Direct pages scanned", "pages", delta("pgscan_direct")),
         Row("kscan", "Kswapd pages scanned", "pages", delta("pgscan_kswapd")),
         Row("ksteal", "Kswapd pages reclaimed", "pages", delta("pgsteal_kswapd")),
         Row("dsteal", "Direct pages reclaimed", "pages", delta("pgsteal_direct")),
         Row("keff", "Kswapd efficiency", "%", ratio(delta("pgsteal_kswapd"), delta("pgscan_kswapd"), 100)),
         Row("kvel", "Kswapd velocity", "pages/s", ratio(delta("pgscan_kswapd"), span_s)),
         Row("deff", "Direct efficiency", "%", ratio(delta("pgsteal_direct"), delta("pgscan_direct"), 100)),
         Row("dvel", "Direct velocity", "pages/s", ratio(delta("pgscan_direct"), span_s)),
         Row("writes", "Page writes by reclaim", "pages", delta("nr_vmscan_write")),
         # mmtests: file = all reclaim writes but swap-outs
         Row("wfile", "Page writes file", "pages", minus(delta("nr_vmscan_write"), delta("pswpout"))),
         Row("wanon", "Page writes anon", "pages", delta("pswpout")),
     ), (Headline("kscan", "kswapd pages scanned"),))),
    notes=_kvio_notes)


# --- 003: qsbench ----------------------------------------------------------------------
def _qs_busy(con, rid):
    u, s = fig("qsbench.user_s")(con, rid), fig("qsbench.sys_s")(con, rid)
    return None if u is None or s is None else u + s


def _qs_sys_clock(con, rid):
    """The sorters' system time on the guest clock: their CPU time (getrusage's
    user + system, a sum the kernel keeps to the tasks' runtime:
    cputime_adjust scales the split it samples at each 100 Hz tick to it)
    less the program's user time in the profile, where every instruction is
    priced. The program's DSO also holds its parent's and its kswapd
    sampler's user time, a few ms a run, nearly the same on both kernels.
    The split alone puts 60-85 ticks on system time here, a spread of about
    a tenth a run."""
    busy, user = _qs_busy(con, rid), dso_s(con, rid, "qsbench")
    return None if busy is None or user is None else busy - user


def _qs_notes(con, run_ids, top: int = 5) -> list[str]:
    """Where the period set's extra system time goes, machine by machine: the
    kernel symbols whose CPU time on the guest clock grew most from vanilla
    to allocators-reclaim (means over each kernel's runs), and the spin-wait
    part, with the machine's PAUSE price (003-pause1 asks whether the rise moves with it: it does not)."""
    by: dict = {}
    for rid in run_ids:
        r = run_of(con, rid)
        if r["kernel_flavor"] != "default" or r["patch_set"] not in ("vanilla", "allocators-reclaim"):
            continue
        ks = kernel_ps(con, rid)
        if ks:
            ms, pause = {x: t / 1e9 for x, (t, _) in ks.items()}, sum(p for _, p in ks.values()) / 1e9
            topo = topology_of(r["topology"], r["topology_toml"])
            by.setdefault((r["topology"], disk(r), r["timing_mode"], topo.pause_cycles if topo else None), {}
                          ).setdefault(r["patch_set"], []).append((ms, pause))
    out = []
    for (topo, dsk, mode, pause_cycles), k in sorted(by.items(), key=lambda kv: str(kv[0])):
        van, per = k.get("vanilla"), k.get("allocators-reclaim")
        if not van or not per:
            continue
        mean = lambda runs, sym: statistics.mean(ms.get(sym, 0.0) for ms, _ in runs)
        syms = {s for ms, _ in van + per for s in ms}
        delta = sorted(((mean(per, x) - mean(van, x), x) for x in syms), reverse=True)
        total = sum(d for d, _ in delta)
        spin = statistics.mean(p for _, p in per) - statistics.mean(p for _, p in van)
        out.append(f"where allocators-reclaim's kernel time goes, {topo}, {dsk}, timing {mode}, PAUSE "
                   f"{pause_cycles if pause_cycles is not None else '?'} cycles ({len(van)} and {len(per)} runs): "
                   f"{total:+.0f} ms over vanilla; most grown: "
                   + ", ".join(f"{x} {d:+.0f} ms" for d, x in delta[:top] if d > 0)
                   + f"; spin-wait (PAUSE) in the kernel {spin:+.0f} ms")
    return out


S003 = Seed(
    "003", 'Rik van Riel, "smoother VM for -ac" + Lorenzo Allegrucci\'s qsbench runs (LKML, 2001; 2.4.10-ac9)',
    "003_b84e3de52decaefe.txt", "qsbench", ("2.4.10-ac9", "2.4.10-ac9 + smooth"),
    {"vanilla": "2.4.10-ac9", "allocators-reclaim": "2.4.10-ac9 + smooth"},
    "base against patched; allocators-reclaim is Rik's patch in 6.1's terms (allocators reclaim a batch when "
    "they wake kswapd, inactive target 6/5 wider), not 2.4.10-ac's VM",
    (Table("three runs per kernel: mean (min-max)", (
        Row("user", "user", "s", fig("qsbench.user_s")),
        Row("system", "system (getrusage: the split by 100 Hz ticks)", "s", fig("qsbench.sys_s")),
        Row("system_clock", "system on the guest clock (CPU time less the profile's user time)", "s", _qs_sys_clock,
            NEED_PROFILE),
        Row("elapsed", "elapsed", "s", fig("qsbench.elapsed_s")),
        Row("cpu", "CPU (user + system over elapsed)", "%", ratio(_qs_busy, fig("qsbench.elapsed_s"), 100)),
        Row("majflt", "major faults", "faults", fig("qsbench.majflt")),
        # the seed read kswapd's time once, after the three runs: ours summed over the repeats
        Row("kswapd", "kswapd CPU time, the runs together", "s", fig("qsbench.kswapd_s"), agg="sum"),
    ), (Headline("elapsed", "elapsed"), Headline("system_clock", "system time (guest clock)"),
        Headline("system", "system time (getrusage)",
                 aside="getrusage's split is sampled at 100 Hz ticks; the guest clock's row is the verdict's"))),),
    by_machine=True, notes=_qs_notes)


SEEDS = {s.id: s for s in (S000, S001, S002, S003, S004)}
