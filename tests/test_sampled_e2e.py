"""--timing sampled end to end, small: `./run.py sample-check` makes a sampled
run of a short two-phase program (memeater on one CPU: first touch, then
re-reading what it wrote) and the full detailed run of the same inputs, and
stores the error of every estimate. Asserted: the regions came from
checkpoints (series patch 0008) and ran under the detailed model, fewer
instructions ran in detail than in the full run, the estimated elapsed
time is within the bound below of the full run's, and a repeat of the
sampled run gives the same regions. Slow: a snapshot and three runs."""
from pathlib import Path

import pytest

from pipeline import sampled
from sampling import estimate, simpoint
from tests.e2e import REPO, db, vmlab

pytestmark = pytest.mark.boot

TOPO = str(REPO / "tests" / "data" / "x86-1c-small.toml")
ARGS = ["-t", TOPO, "-e", "memeater", "-p", "chunks=2,cycles=2,chunk_frac=0.25,swap=none",
        "--slice-insns", "2000000", "--sample-max-k", "4"]
# Measured 2026-11-26 (series 04f1c33245c7): -5.9 % (30 full slices, k = 4;
# busy +1.8 %, the idle time the profile measured 2.0 ms against the detailed
# run's 4.7 ms; priced all per instruction, -9.1 %). Not the 2 % SimPoint gets
# on long CPU-bound runs: 30 slices with a one-slice warm-up (docs/sampling.md).
# The bound catches a broken estimator (a wrong weight, a region measuring the
# wrong slice), not noise.
BOUND_PCT = 25.0


def test_a_sampled_run_estimates_the_full_detailed_run(vmlab_env, tmp_path):
    r = vmlab(vmlab_env, tmp_path, "sample-check", *ARGS)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    c = db(tmp_path)
    runs = {x["timing_mode"]: x for x in c.execute("SELECT * FROM runs")}
    assert set(runs) == {"sampled", "detailed"} and all(x["status"] == "ok" for x in runs.values())
    sid, fid = runs["sampled"]["id"], runs["detailed"]["id"]
    regions = c.execute("SELECT * FROM sample_regions WHERE run_id = ? ORDER BY cluster", (sid,)).fetchall()
    picks = c.execute("SELECT interval, weight FROM simpoint_picks WHERE run_id = ?", (sid,)).fetchall()
    assert len(regions) == len(picks) >= 2, "two phases, at least two clusters"
    assert sum(p["weight"] for p in picks) == pytest.approx(1.0)
    assert any(x["boundary"] > 0 and x["checkpoint_bytes"] > 0 for x in regions), "a region from a checkpoint"
    assert all(x["elapsed_ps"] > 0 and x["warmup_slices"] == min(1, x["point"]) for x in regions)
    est = {x["figure"]: x for x in c.execute("SELECT * FROM sample_estimates WHERE run_id = ?", (sid,))}
    el = est["elapsed_ps"]
    assert el["check_run_id"] == fid and el["actual"] > 0
    assert abs(el["error_pct"]) < BOUND_PCT, f"elapsed estimated {el['estimated']:.4g}, full run {el['actual']:.4g}"
    # elapsed: the regions' busy time per instruction + the machine's idle time the profile measured
    assert el["estimated"] == pytest.approx(est["busy_ps"]["estimated"] + est["idle_ps"]["estimated"])
    assert est["elapsed_ps.per_insn"]["actual"] == el["actual"]
    # the profile counted its cache-filter misses by hop class (one node: hop 0 only)
    prof = simpoint.read_slices(Path(runs["sampled"]["log_path"]).parent / "bbv.global.slices")
    assert all(len(x["miss_hops"]) == 1 for x in prof) and sum(x["miss_hops"][0] for x in prof) > 0
    assert all(x["machine_ps"] > 0 for x in prof[:-1])  # the last: written at exit, no vCPU running
    assert est["idle_ps"]["estimated"] == pytest.approx(estimate.profile_idle(prof))  # the profile's, measured
    full_insns = sum(n for (n,) in c.execute("SELECT insns FROM timing_cpu WHERE run_id = ?", (fid,)))
    assert sum(x["detailed_insns"] for x in regions) < full_insns
    assert "sample-check: sampled run" in r.stdout and "regions on N workers" in r.stdout
    # the same sampled run again: the same regions, to the picosecond (series
    # patch 0002 makes the idle jump in the round-robin thread: made from the
    # main loop, a region from a checkpoint taken mid-run could find its
    # machine's time moved by a host-timed idle jump)
    r2 = vmlab(vmlab_env, tmp_path, *ARGS, "--timing", "sampled")
    assert r2.returncode == 0, r2.stdout[-3000:] + r2.stderr[-3000:]
    cols = "cluster, point, boundary, late_insns, detailed_insns, elapsed_ps, cpu_time_ps"
    again = c.execute(f"SELECT {cols} FROM sample_regions WHERE run_id = (SELECT MAX(id) FROM runs) "
                      "ORDER BY cluster").fetchall()
    first = c.execute(f"SELECT {cols} FROM sample_regions WHERE run_id = ? ORDER BY cluster", (sid,)).fetchall()
    assert [tuple(x) for x in again] == [tuple(x) for x in first]


SWAPPING_4CPU = ["-t", str(REPO / "tests" / "data" / "x86-2s-small.toml"), "-e", "memeater",
                 "-p", "chunks=9,cycles=2,swap=disk,swap_frac=1.0", "--slice-insns", "2000000",
                 "--sample-max-k", "6", "--timing", "sampled"]


def test_a_checkpoint_chain_on_four_vcpus_swapping_to_disk_follows_the_profile(vmlab_env, tmp_path):
    """Restored from a checkpoint, a machine must go on as the profile did:
    with more than one vCPU that needs the running slice and no kick timer
    (series patches 0002 and 0006) and the TLBs reset at the checkpoint
    points (0004, 0008); with swap traffic, the disk model's pending
    requests saved with the machine (0005), or a checkpoint waits for an idle disk. Every checkpoint
    is checked against the profile (on_path); one restored from another
    that leaves the path is taken again from the snapshot after boot, which
    some still do (2 of 5 here, 2026-11-26: state a restore with disk
    requests outstanding still loses, not found). Without the saved slice
    every one restored from another left it within a few slices."""
    r = vmlab(vmlab_env, tmp_path, *SWAPPING_4CPU)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    c = db(tmp_path)
    run = c.execute("SELECT * FROM runs").fetchone()
    assert run["status"] == "ok" and run["timing_mode"] == "sampled"
    assert c.execute("SELECT delta FROM v_vmstat_delta WHERE counter = 'pswpout'").fetchone()[0] > 0
    regions = c.execute("SELECT * FROM sample_regions").fetchall()
    assert sum(x["boundary"] > 0 for x in regions) >= 2, "regions from checkpoints taken mid-run"
    # every checkpoint at its boundary, none moved earlier for a busy disk
    assert all(x["late_insns"] == 0 and x["warmup_slices"] == min(1, x["point"]) for x in regions)
    assert r.stdout.count("on the profile's path") == len({x["boundary"] for x in regions} - {0})
    dev = c.execute("SELECT value FROM metrics WHERE name = 'sampled.path_dev_insns'").fetchone()[0]
    assert dev <= sampled.PATH_TOLERANCE * 2_000_000
    chained = len({x["boundary"] for x in regions} - {0}) - 1  # the first comes from the snapshot
    retaken = c.execute("SELECT value FROM metrics WHERE name = 'sampled.checkpoints_retaken'").fetchone()[0]
    assert retaken < chained, "some checkpoint restored from another kept the profile's path"


def test_a_functional_warm_up_runs_the_guest_as_the_profile_did(vmlab_env, tmp_path):
    """--sample-functional: the first slices of a region warm the model and
    charge nothing (timing/plugin.c, plugin.functional_slices), so the
    guest's clock crosses every boundary of them when the profile's did;
    the priced warm-up and the measured slice after them are charged."""
    r = vmlab(vmlab_env, tmp_path, *ARGS, "--timing", "sampled", "--sample-functional", "3")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    c = db(tmp_path)
    run = c.execute("SELECT * FROM runs").fetchone()
    assert run["status"] == "ok"
    rdir = Path(run["log_path"]).parent
    prof = simpoint.read_slices(rdir / "bbv.global.slices")
    regions = c.execute("SELECT * FROM sample_regions").fetchall()
    warmed = [x for x in regions if x["functional_slices"]]
    assert warmed, "a point with room for a functional warm-up"
    for x in regions:
        assert x["functional_slices"] == min(3, max(0, x["point"] - x["boundary"] - 1))
        assert x["warmup_slices"] == x["point"] - x["boundary"] == min(4, x["point"])
    for x in warmed:
        rows = simpoint.read_slices(rdir / "regions" / f"region-{x['cluster']}" / "bbv.global.slices")
        f, b = x["functional_slices"], x["boundary"]
        assert x["functional_insns"] == sum(y["insns"] + y["spin_insns"] for y in rows[:f])
        assert x["detailed_insns"] == sum(y["insns"] + y["spin_insns"] for y in rows[f:x["point"] - b + 1])
        # nothing charged: the guest's clock at each functional boundary is the profile's
        assert [y["machine_ps"] for y in rows[:f]] == [y["machine_ps"] for y in prof[b:b + f]]
        # the model's clocks, less what they would have charged, are the guest's there too (within the
        # blocks between two of its syncs: 2026-11-27, 14-28 ns)
        assert [max(y["cpu_time_ps"]) for y in rows[:f]] == pytest.approx([y["machine_ps"] for y in rows[:f]],
                                                                           abs=1_000_000)
        # and after the switch, moved back (vm_shift_time), the model's clocks are the guest's as they are
        assert [max(y["cpu_time_ps"]) for y in rows[f:]] == pytest.approx([y["machine_ps"] for y in rows[f:]],
                                                                           abs=1_000_000)
        # priced from there on: the measured slice ends elsewhere than the profile's (model 4's core can
        # run faster than the profile's one instruction a cycle: charged time is not always later)
        assert rows[x["point"] - b]["machine_ps"] != prof[x["point"]]["machine_ps"]
    m = dict(c.execute("SELECT name, value FROM metrics WHERE name LIKE 'sampled.%'").fetchall())
    assert m["sampled.functional_insns"] == sum(x["functional_insns"] for x in regions) > 0


@pytest.mark.parametrize("slices", [[], ["--slice-insns", "10000000"]], ids=["one-slice", "six-slices"])
def test_its_defaults_on_a_short_run_choose_what_fits(vmlab_env, tmp_path, slices):
    """--timing sampled with its defaults (at most 10 points, one slice of
    warm-up) on a run of few slices: under one 100 M-instruction slice (every
    default), or six of 10 M: it chooses fewer points and the warm-up that
    fits, says so, and completes (it failed after its profile: "--sample-max-k
    10: above the profile's 4 full slices")."""
    r = vmlab(vmlab_env, tmp_path, "-t", TOPO, "-e", "memeater", "-p", "chunks=2,cycles=2,chunk_frac=0.25,swap=none",
              "--timing", "sampled", *slices)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    c = db(tmp_path)
    run = c.execute("SELECT * FROM runs").fetchone()
    assert run["status"] == "ok" and run["timing_mode"] == "sampled"
    size = int(slices[1]) if slices else 100_000_000
    prof = simpoint.read_slices(Path(run["log_path"]).parent / "bbv.global.slices")
    full = len(prof) - 1 if len(prof) > 1 and prof[-1]["insns"] < size else len(prof)
    k = max(1, full // 2)  # a point per two full slices at most (sampled.fit)
    assert k < 10, "a short run: fewer points fit than the default max k"
    assert f"sampled: a short run: at most {k} point" in r.stdout
    assert "sampling chose what fits a short run: at most" in run["limitations"]
    assert {x[0] for x in c.execute("SELECT max_k FROM simpoint_picks WHERE run_id = ?", (run["id"],))} == {k}
    regions = c.execute("SELECT * FROM sample_regions WHERE run_id = ?", (run["id"],)).fetchall()
    assert 1 <= len(regions) <= k and all(x["elapsed_ps"] > 0 for x in regions)
    assert c.execute("SELECT estimated FROM sample_estimates WHERE run_id = ? AND figure = 'elapsed_ps'",
                     (run["id"],)).fetchone()[0] > 0
