"""Each seed's own table, as rows over OUR database (seeds/report.py prints
them beside the seed's published figures, PUBLISHED there, joined by row key;
what a table is made of, and the functions most rows read with, are in
seeds/kit.py).

Our kernels stand for the seed's columns (`stands_for`): each patch set
re-creates one side of the seed's comparison on Linux 6.1, so vanilla is
usually the seed's FIXED kernel and the patch set its pathological one."""
from __future__ import annotations

import functools
import json
import statistics
from collections.abc import Callable
from pathlib import Path

import topologies
from analysis.profile import KERNEL
from analysis.rows import metrics as run_metrics
from seeds.kit import (
    Headline,
    Row,
    Seed,
    Table,
    cpu_share,
    delta,
    disk,
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
    top_symbols,
)
from seeds.published import FIX, LEVELS_MB, PUBLISHED, STORM


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


NEED_PROFILE = "needs a run with the plugin's profile (every timing mode but off; --no-profile turns it off)"
NEED_LOCKSTAT = "needs --flavor lockstat"
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


# --- 002: forkstorm --------------------------------------------------------------------
def _sys_busy(con, rid):
    """System time as a share of busy CPU time (forkstorm's sys_share and
    user_share are of all time, idle included); the seed's 100 %."""
    s, u = fig("forkstorm.sys_share")(con, rid), fig("forkstorm.user_share")(con, rid)
    return None if s is None or u is None or s + u == 0 else 100 * s / (s + u)


def _idle(con, rid):
    """Idle (and iowait) share of all CPU time over the storm: where 6.1's
    sleeping rwsem waiters go, which 2009's spinning waiters did not."""
    s, u = fig("forkstorm.sys_share")(con, rid), fig("forkstorm.user_share")(con, rid)
    return None if s is None or u is None else max(0.0, 100 * (1 - s - u))


def _lock_wait_ms(lock: str) -> Callable:
    """Milliseconds waited for a lock class over the storm (lock_stat's
    wait-time total, from the run's forkstorm_done record). 6.1's anon_vma
    lock is a sleeping rwsem: its waiters sleep rather than spin, so the
    cost shows here more than in system time."""
    def get(con, rid):
        r = con.execute("SELECT body FROM records WHERE run_id = ? AND type = 'forkstorm_done'", (rid,)).fetchone()
        w = ((json.loads(r[0]).get("locks") or {}).get(lock) or {}).get("wait_total_us") if r else None
        return None if w is None else w / 1e3
    return get


def _spin_wait_s(con, rid):
    """Guest CPU seconds in x86 PAUSE over the whole run (engine.pause_cpu_s:
    every spin-loop turn at the topology's latency). Boot spins alike on every
    kernel of a machine, so the difference between kernels is the storm's."""
    return run_metrics(con, rid).get("engine.pause_cpu_s")


# fork copies the page-table entries of every region it inherits and exit
# releases them: the work per job grows with how many of those pages are
# present (each a refcount and an rmap count on its struct page) rather than
# swapped out, whichever kernel reclaims them
PAGE_WORK = ("copy_page_range", "page_remove_rmap", "release_pages")


def _jobs(con, rid):
    rate, el = fig("forkstorm.jobs_per_min")(con, rid), fig("forkstorm.elapsed_s")(con, rid)
    return None if rate is None or el is None else rate * el / 60


def _page_work_us(con, rid):
    """Guest CPU microseconds in fork's and exit's page work (PAGE_WORK, the
    whole run's profile) per job of the storm: what a job costs apart from
    locks, and what the kernels' jobs/min follows (the notes' correlation)."""
    n, ks = _jobs(con, rid), kernel_ps(con, rid)
    return None if not n or not ks else sum(ks.get(x, (0, 0))[0] for x in PAGE_WORK) / 1e6 / n


def _pearson(xs, ys) -> float | None:
    if len(xs) < 3 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return None
    return statistics.correlation(xs, ys)


def _fork_notes(con, run_ids) -> list[str]:
    out = []
    by: dict = {}
    for rid in run_ids:
        r = run_of(con, rid)
        if r["kernel_flavor"] != "default":  # lock_stat skews the clock and the profile; MGLRU is another design
            continue
        jobs, work, n = fig("forkstorm.jobs_per_min")(con, rid), _page_work_us(con, rid), _jobs(con, rid)
        if jobs is not None and work is not None:
            by.setdefault((r["cpus"], r["topology"], r["timing_mode"]), []).append((jobs, work, work * n))
    for (cpus, topo, mode), pts in sorted(by.items(), key=lambda kv: str(kv[0])):
        per_job = _pearson([p[0] for p in pts], [p[1] for p in pts])
        whole = _pearson([p[0] for p in pts], [p[2] for p in pts])
        if per_job is not None:
            out.append(f"jobs/min against fork and exit page work per job, {cpus} CPUs ({topo}, timing {mode}), "
                       f"{len(pts)} runs of the default kernels together: Pearson r = {per_job:+.2f}; against the "
                       f"whole run's page work, not per job: r = {whole:+.2f} (a job costs what its inherited pages "
                       "cost to copy and release, whichever kernel; the whole run's work falling as jobs rise "
                       "rules out a fixed cost spread over more jobs)")
    for rid in run_ids:
        top = top_symbols(con, rid, dso=KERNEL)
        if top:
            r = run_of(con, rid)
            out.append(f"top kernel symbols by share of the kernel's busy time, run {rid} ({r['patch_set']}, "
                       f"{r['cpus']} CPUs): " + ", ".join(f"{s} {p:.1f} %" for s, p in top))
    return out


S002 = Seed(
    "002", "Larry Woodman, high system time & lock contention, AIM7 (LKML, 2009; 8 CPUs in the profile)",
    "002_bf44cde862684e03.txt", "forkstorm", ("no trylock (2009)", "trylock patch"),
    {"rmap-lock-blocking": "no trylock (2009)", "rmap-lock-blocking-ptl-trylock": "trylock patch",
     "rmap-lock-spinning": "no trylock (2009)"},
    "vanilla 6.1 is ours alone (it trylocks the anon_vma lock in reclaim, since 6.0); rmap-lock-blocking waits "
    "for the rmap and pte locks and holds the rmap lock for write, as 2009's spinlocks; "
    "rmap-lock-blocking-ptl-trylock adds the seed's pte trylock; rmap-lock-spinning makes the period set's anon_vma "
    "lock spin as 2009's spinlock did (6.1's rwsem waiters sleep)",
    (Table("system time and lock contention, by CPU count", (
        Row("sys", "system time", "% of busy", _sys_busy),
        Row("idle", "CPU idle", "% of CPU time", _idle),
        Row("jobs", "jobs/min", "jobs/min", fig("forkstorm.jobs_per_min")),
        Row("anon_vma", "anon_vma lock contentions", "contentions", fig("forkstorm.lock_contentions.anon_vma"),
            NEED_LOCKSTAT),
        Row("anon_vma_wait", "anon_vma lock wait", "ms", _lock_wait_ms("anon_vma"), NEED_LOCKSTAT),
        Row("ptl", "pte lock (ptl) contentions", "contentions", fig("forkstorm.lock_contentions.ptl"), NEED_LOCKSTAT),
        Row("ptl_wait", "pte lock wait", "ms", _lock_wait_ms("ptl"), NEED_LOCKSTAT),
        Row("spin_lock", "_spin_lock", "% of kernel", cpu_share("spin_lock", dso=KERNEL),
            NEED_PROFILE),
        Row("page_check_address", "page_check_address (6.1: page_vma_mapped_walk)", "% of kernel",
            cpu_share("page_vma_mapped_walk", "page_check_address", dso=KERNEL), NEED_PROFILE),
        # 6.1's anon_vma lock is an rwsem: its bounded optimistic spin, apart from the spin locks
        Row("rwsem_spin", "rwsem optimistic spinning (osq_lock, rwsem_optimistic_spin)", "% of kernel",
            cpu_share("osq_lock", "rwsem_optimistic_spin", "rwsem_spin_on_owner", dso=KERNEL), NEED_PROFILE),
        Row("page_work", "fork and exit page work (" + ", ".join(PAGE_WORK) + "; whole run) per job", "us",
            _page_work_us, NEED_PROFILE),
        Row("kswapd", "kswapd CPU time", "s", fig("forkstorm.kswapd_s")),
        Row("spin_wait", "spin-wait (PAUSE) time, whole run", "CPU-s", _spin_wait_s),
    ), (Headline("sys", "system time", +1, "the trylock lowers it"),
        Headline("anon_vma", "anon_vma contention", +1, "the trylock lowers it"))),),
    by_machine=True, notes=_fork_notes)


# --- 003: qsbench ----------------------------------------------------------------------
def _qs_busy(con, rid):
    u, s = fig("qsbench.user_s")(con, rid), fig("qsbench.sys_s")(con, rid)
    return None if u is None or s is None else u + s


def _qs_notes(con, run_ids, top: int = 5) -> list[str]:
    """Where the period set's extra system time goes, machine by machine: the
    kernel symbols whose CPU time on the guest clock grew most from vanilla
    to allocators-reclaim (means over each kernel's runs), and the spin-wait
    part, with the machine's PAUSE price (the row moved with it)."""
    by: dict = {}
    for rid in run_ids:
        r = run_of(con, rid)
        if r["kernel_flavor"] != "default" or r["patch_set"] not in ("vanilla", "allocators-reclaim"):
            continue
        ks = kernel_ps(con, rid)
        if ks:
            ms, pause = {x: t / 1e9 for x, (t, _) in ks.items()}, sum(p for _, p in ks.values()) / 1e9
            topo = _topology(r["topology"], r["topology_toml"])
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
        Row("system", "system", "s", fig("qsbench.sys_s")),
        Row("elapsed", "elapsed", "s", fig("qsbench.elapsed_s")),
        Row("cpu", "CPU (user + system over elapsed)", "%", ratio(_qs_busy, fig("qsbench.elapsed_s"), 100)),
        Row("majflt", "major faults", "faults", fig("qsbench.majflt")),
        # the seed read kswapd's time once, after the three runs: ours summed over the repeats
        Row("kswapd", "kswapd CPU time, the runs together", "s", fig("qsbench.kswapd_s"), agg="sum"),
    ), (Headline("elapsed", "elapsed"), Headline("system", "system time"))),), by_machine=True,
    notes=_qs_notes)


# --- 004: memeater ---------------------------------------------------------------------
def _swap_start(con, rid):
    """(cycle, chunk) of the first chunk after which swap was in use (as the
    memeater verdict reads it), or None."""
    return con.execute("SELECT cycle, chunk FROM chunk_times WHERE run_id = ? AND swap_used_kib > 0 "
                       "ORDER BY cycle, chunk LIMIT 1", (rid,)).fetchone()


def _free_at(con, rid, cycle, chunk) -> list[int]:
    return [r[0] for r in con.execute("SELECT free_kib FROM node_free WHERE run_id = ? AND cycle = ? AND chunk = ? "
                                      "ORDER BY node", (rid, cycle, chunk))]


FILLED_KIB = 16384  # a node with at most this free counts as filled (the memeater verdict's line)


def _touched(con, rid):
    """Memory touched before swapping began, in nodes' worth (all of it when
    nothing swapped: a lower bound, like the seed's 'got 90GB without heavy paging')."""
    p, r = params(con, rid), run_of(con, rid)
    s = _swap_start(con, rid)
    if s is None or s["cycle"] > 0:
        # a run shortened below memeater's fill (004-zone-reclaim-5: 38 chunks of 1 MiB) that never
        # swapped bounds nothing: its few MiB would read as "swapped early"
        if p.get("chunks", 0) * p.get("chunk_mib", 0) < p.get("fill_frac", 0.5) * r["nodes"] * r["memory_mib_per_node"]:
            return None
        chunks = p.get("chunks", 0)
    else:
        chunks = s["chunk"] + 1
    return chunks * p.get("chunk_mib", 0) / r["memory_mib_per_node"]


def _at_swap_start(f: Callable) -> Callable:
    def get(con, rid):
        s = _swap_start(con, rid)
        free = _free_at(con, rid, s["cycle"], s["chunk"]) if s else []
        return f(con, rid, free) if free else None
    return get


def _per_quarter_node(con, rid) -> float:
    """What turns a run's ms per chunk into ms per quarter node, the seed's
    1 GB chunk on 4 GB RADs: 1 for the default chunk (chunk_frac 0.25), more
    for the smaller chunks the zone_reclaim_mode=5 blocks take."""
    r = run_of(con, rid)
    chunk = params(con, rid).get("chunk_mib")
    return r["memory_mib_per_node"] / 4 / chunk if chunk and r["memory_mib_per_node"] else 1.0


def _ms(before: bool) -> Callable:
    def get(con, rid):
        s = _swap_start(con, rid)
        if not before and (s is None or s["cycle"] > 0):
            return None  # no swapping in the first cycle
        cut = s["chunk"] if s is not None and s["cycle"] == 0 else None
        ms = [r[1] for r in con.execute("SELECT chunk, wall_ms FROM chunk_times WHERE run_id = ? AND cycle = 0 "
                                        "ORDER BY chunk", (rid,)) if cut is None or (r[0] < cut) == before]
        return statistics.mean(ms) * _per_quarter_node(con, rid) if ms else None
    return get


@functools.lru_cache(maxsize=32)
def _topology(name: str, text: str):
    try:
        return topologies.parse(text, Path(f"{name}.toml"))
    except topologies.TopologyError:
        return None  # a topology file this vmlab no longer accepts: hops unknown


def _hops(con, rid) -> list[int] | None:
    """Hops from the node of the CPU memeater was pinned to, from the run's own topology."""
    r = run_of(con, rid)
    topo, cpu = _topology(r["topology"], r["topology_toml"]), params(con, rid).get("cpu")
    ok = topo is not None and isinstance(cpu, int) and 0 <= cpu < topo.cpus
    return list(topo.hops[cpu // topo.cpus_per_node]) if ok else None


def _ms_at_hop(h: int) -> Callable:
    def get(con, rid):
        hops = _hops(con, rid)
        ms = [r[1] for r in con.execute("SELECT main_node, wall_ms FROM chunk_times WHERE run_id = ? AND cycle = 0",
                                        (rid,)) if hops and r[0] is not None and r[0] < len(hops) and hops[r[0]] == h]
        return statistics.mean(ms) * _per_quarter_node(con, rid) if ms else None
    return get


def _free_at_hop(h: int) -> Callable:
    """Mean free memory of the nodes h hops from home after the last chunk of the first cycle."""
    def get(con, rid):
        hops = _hops(con, rid)
        last = con.execute("SELECT MAX(chunk) FROM chunk_times WHERE run_id = ? AND cycle = 0", (rid,)).fetchone()[0]
        free = _free_at(con, rid, 0, last) if last is not None else []
        at = [kib / 1024 for n, kib in enumerate(free) if hops and n < len(hops) and hops[n] == h]
        return statistics.mean(at) if at else None
    return get


def _memeater_rows(con, run_ids) -> tuple:
    hops = max((max(h) for h in (_hops(con, r) for r in run_ids) if h), default=-1)
    cycles = con.execute(f"SELECT DISTINCT cycle FROM memeater_cycles WHERE run_id IN "
                         f"({', '.join('?' * len(run_ids))}) ORDER BY cycle", run_ids).fetchall()
    return (
        Row("touched", "memory touched before swapping began (all, if none)", "nodes' worth", _touched),
        Row("filled", "nodes filled when swapping began", "nodes",
            _at_swap_start(lambda c, r, free: sum(1 for k in free if k <= FILLED_KIB))),
        Row("free_nodes", "nodes with free memory when swapping began", "nodes",
            _at_swap_start(lambda c, r, free: sum(1 for k in free if k > FILLED_KIB))),
        Row("free_pct", "free memory when swapping began", "% of memory",
            _at_swap_start(lambda c, r, free: 100 * sum(free) / 1024
                           / (run_of(c, r)["nodes"] * run_of(c, r)["memory_mib_per_node"]))),
        Row("cycle", "cycle in which swapping began", "cycle",
            lambda con, rid: None if _swap_start(con, rid) is None else float(_swap_start(con, rid)["cycle"])),
        Row("ms_before", "ms per quarter node (the seed's 1 GB chunk) before swapping, first cycle", "ms", _ms(True)),
        Row("ms_after", "ms per quarter node (the seed's 1 GB chunk) once swapping, first cycle", "ms", _ms(False)),
        *(Row(f"ms_hop{h}", f"ms per quarter node {h} hop{'' if h == 1 else 's'} from home, first cycle", "ms",
              _ms_at_hop(h))
          for h in range(hops + 1)),
        *(Row(f"swap_c{c[0]}", f"swap used after cycle {c[0]}", "MiB",
              scalar(f"SELECT swap_used_kib FROM memeater_cycles WHERE run_id = ? AND cycle = {int(c[0])}", 1 / 1024))
          for c in cycles),
        Row("swap_peak", "swap used at the peak", "MiB", fig("memeater.swap_peak_kib", 1 / 1024)),
        Row("pswpout", "pages swapped out", "pages", delta("pswpout")),
        *(Row(f"free_hop{h}", f"free memory per node {h} hop{'' if h == 1 else 's'} from home, end of first cycle",
              "MiB", _free_at_hop(h)) for h in range(hops + 1)),
    )


S004 = Seed(
    "004", "HP GS1280 (32 CPUs, 4x8 torus, 128 GB, Tru64 5.1B), virtual memory problem (2005)",
    "004_a7c680989fc1af5f.txt", "memeater", ("Tru64 5.1B-PK4", "Tru64 patched (May 2005)"),
    {"vanilla": "Tru64 patched (May 2005)", "zone-reclaim-auto": "Tru64 5.1B-PK4",
     "vanilla, zone_reclaim_mode=5": "Tru64 5.1B-PK4"},
    "6.1 allocates on other nodes before reclaiming locally; zone-reclaim-auto (mode 1) reclaims clean page "
    "cache on the local node first; zone_reclaim_mode=5 also unmaps the program's pages there into swap (without "
    "mode 2 it writes none to disk), the local paging of Tru64's RADs in 6.1's terms",
    (Table("fill order, time per quarter node (the seed's 1 GB chunk), swap and free memory",
           _memeater_rows, (Headline("touched", "memory touched before swapping began"),)),),
    by_machine=True, param_columns=("zone_reclaim_mode", "cache_frac"))

SEEDS = {s.id: s for s in (S000, S001, S002, S003, S004)}
