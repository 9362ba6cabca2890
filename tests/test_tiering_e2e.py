"""End to end, short: experiments/tiering on one Sapphire Rapids socket with
a CXL expander (spr-1s-cxl-2to1) on Linux 6.12 with demotion on. The set
outgrows DRAM while it is first touched, so kswapd demotes DRAM pages to
the CXL node's lower tier instead of failing (no swap); the run records
its intervals and the kernel's two tiers. A functional run (--timing off)
of two 20 ms intervals: promotion needs NUMA balancing's first scan, about
2 guest seconds in, which the study (studies/tiering.toml) runs, not this
test. Slow: boots a guest (and builds the 6.12 kernel on a cold cache)."""
import pytest

from tests.e2e import db, vmlab

pytestmark = pytest.mark.boot
PARAMS = "swap=none,demotion_enabled=true,numa_balancing=2,intervals=2,interval_ms=20,sample_pages=64"


@pytest.fixture(scope="module")
def run(vmlab_env, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tiering")
    r = vmlab(vmlab_env, tmp, "--topology", "spr-1s-cxl-2to1", "--exp", "tiering", "--kernel", "vanilla@6.12",
              "--timing", "off", "--param", PARAMS)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return db(tmp), r.stdout


def test_a_short_run_on_6_12_demotes_and_records_its_intervals(run):
    con, out = run
    rows = con.execute("SELECT * FROM tiering_intervals WHERE run_id = 1 ORDER BY interval").fetchall()
    assert [x["interval"] for x in rows] == [0, 1] and all(x["accesses"] > 0 for x in rows)
    assert all(x["absent_counters"] is None for x in rows)  # 6.12 has every counter the program reads
    t = con.execute("SELECT * FROM tiering_runs WHERE run_id = 1").fetchone()
    assert t["tier_count"] == 2 and t["dram_nodes"] == "0"
    assert (t["numa_balancing"], t["demotion_enabled"]) == ("2", "true")
    assert 0 < t["start_set_dram_share"] < 1  # the set outgrew DRAM: part of it is on the CXL node
    d = dict(con.execute("SELECT counter, delta FROM v_vmstat_delta WHERE run_id = 1 AND counter LIKE 'pgdemote%'"))
    assert d.get("pgdemote_kswapd", 0) + d.get("pgdemote_direct", 0) > 0, d
    assert "tiering: a 288 MiB set" in out and "sanity:  PASSED" in out
