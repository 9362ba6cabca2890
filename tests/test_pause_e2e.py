"""End to end on patch 0003: a spin-wait hint (x86 PAUSE) costs the
topology's pause_cycles on the guest's own clock, and every run stores how
much the guest spun. latprobe times 200,000 turns of a cpu_relax() loop with
clock_gettime. Slow: builds and boots guests."""
import json

import pytest

from tests.e2e import REPO, db, vmlab

pytestmark = pytest.mark.boot


def test_a_pause_takes_the_topologys_cycles_on_the_guest_clock(vmlab_env, tmp_path):
    base = (REPO / "tests" / "data" / "x86-2s-small.toml").read_text()
    assert "pause_cycles = 140" in base
    one = tmp_path / "x86-2s-small-pause1.toml"
    one.write_text(base.replace("pause_cycles = 140", "pause_cycles = 1"))
    for topo in (REPO / "tests" / "data" / "x86-2s-small.toml", one):
        r = vmlab(vmlab_env, tmp_path, "-t", str(topo), "-e", "latprobe", "-p", "increments=0,buf_frac=0.05",
                  "--timing", "off")  # PAUSE's price on the engine's clock alone
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    c = db(tmp_path)
    turns = {}
    for run in c.execute("SELECT id, clock_model FROM runs ORDER BY id"):
        body = json.loads(c.execute("SELECT body FROM records WHERE run_id = ? AND type = 'pause'",
                                    (run["id"],)).fetchone()["body"])
        m = {x["name"]: x["value"] for x in c.execute("SELECT name, value FROM metrics WHERE run_id = ?",
                                                        (run["id"],))}
        cycles = 140 if run["id"] == 1 else 1
        assert f"PAUSE {cycles} cycle" in run["clock_model"]
        # the guest spun at least the probe's turns, and its spin time is their count at the latency
        assert m["engine.pauses"] >= body["turns"] and m["engine.slices"] > 0
        assert m["engine.pause_cpu_s"] == pytest.approx(m["engine.pauses"] * cycles * 400e-12, rel=1e-9)
        turns[cycles] = body["ns_per_turn"]
    # 2.5 GHz: 140 cycles are 56 ns; the loop's increment, compare and branch add about three cycles
    assert 56.0 <= turns[140] <= 56.0 + 8 * 0.4, turns
    assert 0.4 <= turns[1] <= 8 * 0.4, turns
