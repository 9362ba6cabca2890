"""Seed 002 small, end to end: the fork storm on a 4-CPU two-node machine with
lock_stat kernels, vanilla 6.1 against the period set (rmap-lock-blocking:
reclaim's reference walk waits for the anon_vma lock and holds it for
write). The direction that holds at this size: the period set's anon_vma
lock is contended many times more, and waited on longer (4 CPUs, 0.5 s:
6 -> 7,599 contentions, 49 -> 683 ms, 2026-11-25; 29 -> 13,720 and
175 -> 1,600 ms, 2026-11-30). Jobs/min is not asserted:
at 4 CPUs the two kernels are within a few percent. Functional (--timing
off, as when those figures were taken): lock contention is the kernel's, and
on the detailed model the first kernel's 0.5 guest seconds had not ended
after 20 wall minutes (CI ran out of its 90 minutes with it in). Slow; CI runs it (a
lock_stat kernel is a full build on a cold cache)."""
import json

import pytest

from images import kernel as kimg
from tests.e2e import REPO, db, vmlab

TOPO = REPO / "tests" / "data" / "x86-2s-small.toml"
pytestmark = pytest.mark.boot


@pytest.fixture(scope="module")
def storm(tmp_path_factory, vmlab_env):
    tmp = tmp_path_factory.mktemp("seed002")
    r = vmlab(vmlab_env, tmp, "--topology", str(TOPO), "--exp", "forkstorm", "--kernel", "vanilla,rmap-lock-blocking",
              "--flavor", "lockstat", "--timing", "off", "--param", "duration_s=0.5")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    c = db(tmp)
    runs = {x["patch_set"]: x for x in c.execute("SELECT * FROM runs WHERE status = 'ok'")}
    assert set(runs) == {"vanilla", "rmap-lock-blocking"}
    done = {}
    for ps, x in runs.items():
        body = c.execute("SELECT body FROM records WHERE run_id = ? AND type = 'forkstorm_done'", (x["id"],)).fetchone()
        done[ps] = json.loads(body[0])
    return r, c, runs, done


def test_both_kernels_ran_the_same_storm_on_lock_stat(storm):
    r, c, runs, done = storm
    for ps, x in runs.items():
        assert x["kernel_flavor"] == "lockstat" and json.loads(x["params_json"])["family_mib"] > 0
        live = {n for (n,) in c.execute("SELECT name FROM metrics WHERE run_id = ? AND name LIKE 'patch_live.%'",
                                        (x["id"],))}
        assert live == {f"patch_live.{k}" for k in kimg.components(ps)}
        # the storm ran under reclaim on every worker, and lock_stat saw the seed's lock classes
        assert all(j > 0 for j in done[ps]["per_worker"]) and done[ps]["vmstat"]["pswpout"] > 0
        # lock_stat's page-table locks are busy in any storm: a kernel without it would report 0 here
        assert done[ps]["locks"]["ptl"]["contentions"] > 0


def test_the_period_set_contends_on_the_anon_vma_lock(storm):
    r, c, runs, done = storm
    van, per = done["vanilla"]["locks"]["anon_vma"], done["rmap-lock-blocking"]["locks"]["anon_vma"]
    assert per["contentions"] > 5 * max(van["contentions"], 1), (van, per)
    assert per["wait_total_us"] > 3 * van["wait_total_us"], (van, per)
    # one command, two kernels: the comparison table names both
    assert "rmap-lock-blocking" in r.stdout and "vanilla" in r.stdout
