"""Seed 002's table (forkstorm: rmap lock contention as the CPU count grows),
as rows over our database; seeds/tables.py gathers the five seeds."""
from __future__ import annotations

import json
import statistics
from collections.abc import Callable

from analysis.profile import KERNEL
from analysis.rows import metrics as run_metrics
from seeds.kit import (
    NEED_LOCKSTAT,
    NEED_PROFILE,
    Headline,
    Row,
    Seed,
    Table,
    column,
    cpu_share,
    disk,
    fig,
    kernel_ps,
    run_of,
    top_symbols,
)


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


# where rmap-lock-spinning's anon_vma spin loop (images/patches/rmap-lock-spinning) spends its turns
ANON_VMA_SPIN = ("down_write_trylock", "folio_lock_anon_vma_read")


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
    out += _lock_notes(con, run_ids)
    for rid in run_ids:
        top = top_symbols(con, rid, dso=KERNEL)
        if top:
            r = run_of(con, rid)
            out.append(f"top kernel symbols by share of the kernel's busy time, run {rid} ({r['patch_set']}, "
                       f"{r['cpus']} CPUs): " + ", ".join(f"{s} {p:.1f} %" for s, p in top))
    return out


def _lock_notes(con, run_ids) -> list[str]:
    """Which locks a lock_stat column's storm fought over most: its classes'
    contentions and wait over the storm, mean over the column's runs (the
    rows give the anon_vma and pte locks only; vanilla's _spin_lock share
    names no lock). Most contended first: a sleeping lock's wait counts its
    sleep, a spin lock's its spinning."""
    by: dict = {}
    for rid in run_ids:
        r = run_of(con, rid)
        if r["kernel_flavor"] == "lockstat":
            by.setdefault(column(S002, r), []).append(rid)
    out = []
    for _, rids in sorted(by.items()):
        r = run_of(con, rids[0])  # the column's runs share what the line names
        cpus, topo, dsk, mode, ps = r["cpus"], r["topology"], disk(r), r["timing_mode"], r["patch_set"]
        total: dict = {}
        for rid in rids:
            for cls, n, w in con.execute("SELECT class, contentions, wait_total_us FROM repro_lockstat "
                                         "WHERE run_id = ? AND phase = 'run'", (rid,)):
                had = total.get(cls, (0, 0.0))
                total[cls] = (had[0] + (n or 0), had[1] + (w or 0.0))
        top = sorted(total.items(), key=lambda kv: (-kv[1][0], kv[0]))[:3]
        if top:
            runs = f"{len(rids)} run{'s' * (len(rids) > 1)}"
            out.append(f"most contended lock classes over the storm, {ps} (lockstat, timing {mode}), {cpus} CPUs "
                       f"({topo}{', ' + dsk if dsk else ''}), mean of {runs}: "
                       + ", ".join(f"{c} {n / len(rids):,.0f} (wait {w / len(rids) / 1e3:,.0f} ms)"
                                   for c, (n, w) in top)
                       + " (lock_stat's ten most contended a run; a class outside a run's ten counts 0 there)")
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
        # rmap-lock-spinning spins on the anon_vma rwsem by trylock: its turns are in down_write_trylock
        # and the callers the loop is inlined in (folio_lock_anon_vma_read the busiest); ~0 on the others
        Row("anon_vma_spin", "anon_vma lock spun on (down_write_trylock, folio_lock_anon_vma_read)", "% of kernel",
            cpu_share(*ANON_VMA_SPIN, dso=KERNEL), NEED_PROFILE),
        # 2.6.32's anon_vma lock was a spinlock, so its _spin_lock held both kinds of spinning
        Row("lock_spin", "all lock spinning (_spin_lock and the anon_vma lock spun on)", "% of kernel",
            cpu_share("spin_lock", *ANON_VMA_SPIN, dso=KERNEL), NEED_PROFILE),
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
