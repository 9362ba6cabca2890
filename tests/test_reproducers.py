"""End to end: each seed reproducer boots a guest, runs small, and lands its
records in SQLite with its sanity passed. Slow; CI runs them. One run per
reproducer, shared by the assertions through module-scoped fixtures:
mlockchurn and kvio here; forkstorm's and qsbench's records are checked on
the runs of seed 002's and seed 003's end-to-end tests (tests/
test_seed002_e2e.py, test_seed003_e2e.py), which run them on the same
machine anyway (their own runs here were two and a half of CI's minutes).

The machine is tests/data/x86-2s-small.toml, x86-2s shrunk to 2 x 2 CPUs and
2 x 64 MiB, so that working sets above RAM stay cheap under TCG (the
machine other end-to-end tests use: one snapshot after boot for all)."""
import json
from pathlib import Path

import pytest

from tests.e2e import REPO, db, metrics, reproducer_ok, vmlab

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


def ok_run(r, c, rid, exp):
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    reproducer_ok(c, rid, exp)
    assert "sanity:  PASSED" in r.stdout  # ./run.py printed it too
    return c.execute("SELECT * FROM runs WHERE id = ?", (rid,)).fetchone()


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

