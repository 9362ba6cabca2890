"""End to end: each seed reproducer (mlockchurn, kvio, forkstorm, qsbench)
boots a guest, runs small, and lands its records in SQLite with its sanity
passed. Slow; CI runs them. One run per reproducer (qsbench twice: same seed,
same checksum), shared by the assertions through module-scoped fixtures.

The machine is tests/data/x86-2s-small.toml, x86-2s shrunk to 2 x 2 CPUs and
2 x 64 MiB, so that working sets above RAM stay cheap under TCG (the
machine other end-to-end tests use: one snapshot after boot for all)."""
import json
from pathlib import Path

import pytest

from tests.e2e import REPO, db, vmlab

pytestmark = pytest.mark.boot


@pytest.fixture(scope="module")
def rig(tmp_path_factory, vmlab_env):
    tmp = tmp_path_factory.mktemp("repro")
    topo = REPO / "tests" / "data" / "x86-2s-small.toml"

    def run(exp, params):
        r = vmlab(vmlab_env, tmp, "--topology", str(topo), "--exp", exp, "--param", params, "--timing", "off")
        c = db(tmp)
        rid = c.execute("SELECT MAX(id) FROM runs").fetchone()[0]
        return r, c, rid
    return run


def metrics(c, rid):
    return {x["name"]: x["value"] if x["value"] is not None else x["text"]
            for x in c.execute("SELECT name, value, text FROM metrics WHERE run_id = ?", (rid,))}


def sanity(c, rid):
    return {x["check_name"]: x["ok"] for x in c.execute("SELECT * FROM repro_sanity WHERE run_id = ?", (rid,))}


def ok_run(r, c, rid, exp):
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    run = c.execute("SELECT * FROM runs WHERE id = ?", (rid,)).fetchone()
    assert run["status"] == "ok" and run["experiment"] == exp
    checks = sanity(c, rid)
    assert checks and all(checks.values()), checks
    assert metrics(c, rid)[f"{exp}.sanity_ok"] == 1
    assert "sanity:  PASSED" in r.stdout
    return run


@pytest.fixture(scope="module")
def mlockchurn(rig):
    # about half a guest second of mlocks here: sample kswapd often enough to see it move
    return rig("mlockchurn", "chunks=6,sample_ms=100")


def test_mlockchurn_locks_every_chunk_and_recycles_memory(mlockchurn):
    r, c, rid = mlockchurn
    run = ok_run(r, c, rid, "mlockchurn")
    rows = c.execute("SELECT * FROM mlockchurn_chunks WHERE run_id = ? ORDER BY chunk", (rid,)).fetchall()
    params = json.loads(run["params_json"])
    assert [x["chunk"] for x in rows] == list(range(6)) and [x["slot"] for x in rows] == [0, 1] * 3
    steps = -(-params["slot_mib"] * 1024 // params["step_kib"])
    assert all(x["ok"] == 1 and x["steps"] == steps and x["mlock_ms"] > 0 for x in rows)
    assert all(x["step_max_ms"] <= x["mlock_ms"] for x in rows)
    m = metrics(c, rid)
    assert m["mlockchurn.pgscan"] > 0 and 0 < m["mlockchurn.reclaim_efficiency"] <= 1.0
    # the guest prints seconds to the millisecond (vl_kdbl: 3 decimals)
    assert m["mlockchurn.mlock_s_per_chunk"] == pytest.approx(sum(x["mlock_ms"] for x in rows) / 6e3, rel=0.01,
                                                              abs=0.0005)
    # then it slept 5 guest seconds with everything locked while kswapd was measured (vanilla: kswapd sleeps too)
    assert params["sleep_s"] == 5 and 5 <= m["mlockchurn.sleep_s"] < 5.5
    assert 0 <= m["mlockchurn.kswapd_sleeping_busiest"] <= m["mlockchurn.kswapd_sleeping_all"] < 0.5
    # the sampler saw kswapd through the run; the data disk came up
    assert c.execute("SELECT COUNT(DISTINCT seq) FROM repro_kswapd_samples WHERE run_id = ?", (rid,)).fetchone()[0] >= 2
    assert m["init.data"] == 1
    # the data disk completes at the topology's disk model's guest times
    assert run["disk_model"].startswith("ssd-980pro") and "disks complete at a modeled guest time" in run["limitations"]
    # the SSD model's swap and data disks were told to the guest as non-rotational
    assert run["disk_model"].endswith("non-rotational") and m["init.nonrot_vda"] == 1 and m["init.nonrot_vdb"] == 1
    assert not list(Path(run["log_path"]).parent.glob("*.img"))  # swap and data images deleted


@pytest.fixture(scope="module")
def kvio(rig):
    return rig("kvio", "duration_s=0.5")


def test_kvio_measures_four_io_levels(kvio):
    r, c, rid = kvio
    ok_run(r, c, rid, "kvio")
    rows = c.execute("SELECT * FROM kvio_levels WHERE run_id = ? ORDER BY level", (rid,)).fetchall()
    assert [x["io_frac"] for x in rows] == [0, 0.2, 0.6, 1.0]
    ram = 128
    assert [x["io_mib"] for x in rows] == [round(f * ram) for f in (0, 0.2, 0.6, 1.0)]
    assert all(x["ops"] > 0 and x["ops_per_s"] > 0 and x["io_ok"] == 1 for x in rows)
    assert rows[0]["io_s"] == 0 and all(x["io_s"] > 0 for x in rows[1:])
    # writing a guest RAM's worth of file data made kswapd scan; efficiency is a ratio
    assert rows[3]["pgscan_kswapd"] > 0 and 0 < rows[3]["kswapd_efficiency"] <= 1.0
    assert rows[3]["kswapd_velocity"] == pytest.approx(rows[3]["pgscan_kswapd"] / rows[3]["elapsed_s"])
    m = metrics(c, rid)
    assert {f"kvio.ops_per_s.io{i}" for i in range(4)} <= set(m)
    assert m["kvio.ops_per_s.io2"] == pytest.approx(rows[2]["ops_per_s"], rel=1e-3)
    assert "IO (x RAM)" in r.stdout


@pytest.fixture(scope="module")
def forkstorm(rig):
    return rig("forkstorm", "duration_s=2")


def test_forkstorm_storms_while_swapping(forkstorm):
    r, c, rid = forkstorm
    ok_run(r, c, rid, "forkstorm")
    workers = c.execute("SELECT jobs FROM forkstorm_workers WHERE run_id = ? ORDER BY worker", (rid,)).fetchall()
    assert len(workers) == 4 and all(w["jobs"] > 0 for w in workers)
    ticks = c.execute("SELECT jobs FROM forkstorm_ticks WHERE run_id = ? ORDER BY seq", (rid,)).fetchall()
    assert len(ticks) >= 2 and [t["jobs"] for t in ticks] == sorted(t["jobs"] for t in ticks)
    m = metrics(c, rid)
    assert ticks[-1]["jobs"] == sum(w["jobs"] for w in workers)
    assert m["forkstorm.jobs_per_min"] > 0 and 0 < m["forkstorm.sys_share"] < 1
    assert m["forkstorm.sys_share"] + m["forkstorm.user_share"] <= 1.0
    # the default kernel has no LOCK_STAT: no lock classes, and the summary says so
    assert c.execute("SELECT COUNT(*) FROM repro_lockstat WHERE run_id = ?", (rid,)).fetchone()[0] == 0
    assert "without LOCK_STAT" in r.stdout


@pytest.fixture(scope="module")
def qsbench_twice(rig):
    return [rig("qsbench", "mem_frac=1.1") for _ in range(2)]


def test_qsbench_same_seed_same_checksum_and_it_swapped(qsbench_twice):
    sums = []
    for r, c, rid in qsbench_twice:
        ok_run(r, c, rid, "qsbench")
        m = metrics(c, rid)
        assert m["qsbench.elapsed_s"] > 0 and m["qsbench.majflt"] > 0 and m["qsbench.pswpout"] > 0
        # the host's view (wall seconds between the start and done records) beside the guest clock
        assert m["qsbench.host_wall_s"] > 0
        procs = c.execute("SELECT * FROM qsbench_procs WHERE run_id = ?", (rid,)).fetchall()
        assert len(procs) == 1 and procs[0]["unsorted"] == 0
        assert procs[0]["elements"] == round(1.1 * 128) * (1 << 20) // 4
        sums.append(m["qsbench.checksum"])
    assert sums[0] == sums[1] and len(sums[0]) == 16
