"""Seed 002 small, end to end: the fork storm on a 4-CPU two-node machine,
vanilla 6.1 against the period set (rmap-lock-blocking: reclaim's reference
walk waits for the anon_vma lock and holds it for write, where vanilla's
trylocks it), in one command, read through the seed page's own rows
(seeds/table002.py) from the guest-clock profile: the seed's evidence was a
profile too.

The direction that holds at this size: rwsem optimistic spinning (osq_lock,
rwsem_optimistic_spin, rwsem_spin_on_owner) and the rwsem write slow path
take many times vanilla's share of the kernel's time on the period set,
whose reclaim takes the anon_vma rwsem for write where vanilla's trylocks it
for read (the symbols are every rwsem's, mmap_lock's too; the two kernels
differ in the anon_vma locking only). Measured 2026-11-30 with `--timing fast` (the profile, on
instruction counts: contention is the kernel's), 0.5 guest s, seeds 0 / 1
/ 2: rwsem optimistic spinning 0.0007 -> 0.044, 0.0004 -> 0.062 and 0.0005
-> 0.050 % of the kernel's time, rwsem_down_write_slowpath 0.005 -> 0.032,
0.005 -> 0.040 and 0.006 -> 0.057;
the campaign's 8-CPU detailed runs show the same row going 0.01 -> 0.18
(docs/results/seeds.md). Jobs/min and idle are not asserted: at 4 CPUs the
two kernels are within a few per cent. The lock_stat block (contention
counts) is the campaign's, not CI's: a lock_stat kernel is a whole kernel
tree more on a cold cache, some ten of CI's minutes. Slow; CI runs it (the
kernels are the shipped patch sets CI builds anyway)."""
import json

import pytest

from analysis.profile import KERNEL
from images import variants as kvar
from seeds.kit import cpu_share
from seeds.table002 import S002
from tests.e2e import REPO, db, metrics, reproducer_ok, vmlab

TOPO = REPO / "tests" / "data" / "x86-2s-small.toml"
pytestmark = pytest.mark.boot
ROWS = {row.key: row for table in S002.tables for row in table.rows}


@pytest.fixture(scope="module")
def storm(tmp_path_factory, vmlab_env):
    tmp = tmp_path_factory.mktemp("seed002")
    r = vmlab(vmlab_env, tmp, "--topology", str(TOPO), "--exp", "forkstorm", "--kernel", "vanilla,rmap-lock-blocking",
              "--timing", "fast", "--param", "duration_s=0.5")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    c = db(tmp)
    runs = {x["patch_set"]: x for x in c.execute("SELECT * FROM runs WHERE status = 'ok'")}
    assert set(runs) == {"vanilla", "rmap-lock-blocking"}
    done = {}
    for ps, x in runs.items():
        body = c.execute("SELECT body FROM records WHERE run_id = ? AND type = 'forkstorm_done'", (x["id"],)).fetchone()
        done[ps] = json.loads(body[0])
    return r, c, runs, done


def test_both_kernels_ran_the_same_storm_under_reclaim(storm):
    r, c, runs, done = storm
    for ps, x in runs.items():
        assert x["kernel_flavor"] == "default" and x["timing_mode"] == "fast"
        assert json.loads(x["params_json"])["family_mib"] > 0
        live = {n for (n,) in c.execute("SELECT name FROM metrics WHERE run_id = ? AND name LIKE 'patch_live.%'",
                                        (x["id"],))}
        assert live == {f"patch_live.{k}" for k in kvar.components(ps)}
        # the storm ran under reclaim on every worker, and the profile saw the fork and exit page work
        assert all(j > 0 for j in done[ps]["per_worker"]) and done[ps]["vmstat"]["pswpout"] > 0
        assert ROWS["page_work"].value(c, x["id"]) > 0
        # a default kernel keeps no lock_stat: the page's contention rows are empty, not zero
        assert ROWS["anon_vma"].value(c, x["id"]) is None


def test_the_period_set_spins_and_waits_on_rwsems_many_times_more(storm):
    r, c, runs, done = storm
    van, per = runs["vanilla"]["id"], runs["rmap-lock-blocking"]["id"]
    spin = ROWS["rwsem_spin"].value
    assert spin(c, per) > 0.02 and spin(c, per) > 5 * spin(c, van), (spin(c, van), spin(c, per))
    slow = cpu_share("rwsem_down_write_slowpath", dso=KERNEL)
    assert slow(c, per) > 3 * slow(c, van), (slow(c, van), slow(c, per))
    # one command, two kernels: the comparison table names both
    assert "rmap-lock-blocking" in r.stdout and "vanilla" in r.stdout


def test_the_reproducer_records_each_storm(storm):
    """forkstorm's own records on both runs (the reproducer's end-to-end
    check, which had a run of its own in tests/test_reproducers.py: a 2 s
    storm there, whose once-a-second ticks were checked in order; this 0.5 s
    storm logs only the tick at its end, so the ticks' order is the unit
    tests' now)."""
    r, c, runs, done = storm
    for x in runs.values():
        out = reproducer_ok(c, x["id"], "forkstorm")
        workers = [w for (w,) in c.execute("SELECT jobs FROM forkstorm_workers WHERE run_id = ? ORDER BY worker",
                                          (x["id"],))]
        assert len(workers) == 4 and all(j > 0 for j in workers)  # workers=0: one per CPU
        ticks = [t for (t,) in c.execute("SELECT jobs FROM forkstorm_ticks WHERE run_id = ? ORDER BY seq",
                                        (x["id"],))]
        assert ticks and ticks[-1] == sum(workers)  # the last tick, when the workers are done, counts all jobs
        m = metrics(c, x["id"])
        assert m["forkstorm.jobs_per_min"] > 0 and 0 < m["forkstorm.sys_share"] < 1
        assert m["forkstorm.sys_share"] + m["forkstorm.user_share"] <= 1.0
        # a default kernel keeps no LOCK_STAT: no lock classes, and the run's summary says so
        assert c.execute("SELECT COUNT(*) FROM repro_lockstat WHERE run_id = ?", (x["id"],)).fetchone()[0] == 0
        assert "not measured (kernel without LOCK_STAT" in out
