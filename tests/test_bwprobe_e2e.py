"""End to end: the bwprobe guest program under --timing detailed on a small
two-socket x86 machine (its topology file has no [core] table, so the
native core's figures apply). Each figure is checked for its direction and
rough size against the topology's own numbers (latency, Little's law over
the miss tracking), not against recorded values. Slow: boots a guest."""
from pathlib import Path

import pytest

import topologies as T
from experiments.bwprobe import results as bw
from tests.e2e import db, vmlab

pytestmark = pytest.mark.boot
TOPO = Path(__file__).parent / "data" / "x86-2s-small.toml"


@pytest.fixture(scope="module")
def probe(vmlab_env, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bwprobe")
    r = vmlab(vmlab_env, tmp, "--topology", str(TOPO), "--exp", "bwprobe", "--timing", "detailed",
              "--param", "swap=none,buf_frac=0.25")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    recs, node = bw.rows(db(tmp), 1)
    return {(b["test"], b["node"]): b for b in recs}, node, r.stdout, tmp


def test_the_chase_pays_the_topology_latency_on_each_node(probe):
    recs, *_ = probe
    topo = T.load(str(TOPO))
    for n in (0, 1):
        assert recs["chase", n]["ns_per_access"] == pytest.approx(topo.latency_ns(0, n), rel=0.05)


def test_independent_loads_overlap_and_a_stream_reaches_little_s_law(probe):
    recs, *_ = probe
    topo = T.load(str(TOPO))
    for n in (0, 1):
        b = bw.bounds(topo, 0, n)
        # at least 4x faster per load than the chase, and no faster than the fill buffers allow
        assert recs["random", n]["ns_per_access"] * 4 <= recs["chase", n]["ns_per_access"]
        assert recs["random", n]["ns_per_access"] >= 0.9 * b["random_ns"]
        assert 0.6 * b["stream_gbps"] <= recs["read", n]["gbps"] <= 1.1 * b["stream_gbps"]
    # remote slower than local by about the latency ratio for one core
    ratio = recs["read", 0]["gbps"] / recs["read", 1]["gbps"]
    assert ratio == pytest.approx(topo.latency_ns(0, 1) / topo.latency_ns(0, 0), rel=0.25)
    for test in ("write", "memset", "copy", "stos4k"):
        assert recs[test, 0]["gbps"] > 2.0, test  # streams of stores are not priced miss by miss


def test_the_node_s_cpus_together_read_more_but_never_past_its_bandwidth(probe):
    recs, node, out, _ = probe
    topo = T.load(str(TOPO))
    assert node["cpus"] == topo.cpus_per_node
    assert recs["read", 0]["gbps"] * 1.3 < node["gbps"] <= topo.memory_bandwidth_gbps * 1.02
    assert "faster per load than the chase" in out and "Little's law" in out


def test_a_warm_up_leaves_the_guest_as_it_was_and_only_the_model_s_count(probe, vmlab_env, tmp_path):
    """--warmup-insns: the same run with the model's first instructions left
    out of its figures: the guest feels the same stalls (byte-identical
    console, the same per-vCPU clocks and figures), the model counts fewer
    instructions, and the warm-up ends at the experiment's start at the latest."""
    recs, _, _, cold_tmp = probe
    r = vmlab(vmlab_env, tmp_path, "--topology", str(TOPO), "--exp", "bwprobe", "--timing", "detailed",
              "--param", "swap=none,buf_frac=0.25", "--warmup-insns", "1000000000")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    warm, cold = db(tmp_path), db(cold_tmp)
    n = warm.execute("SELECT value FROM metrics WHERE name = 'timing.warmup_insns'").fetchone()[0]
    assert 0 < n < 1e9                      # cut short by the experiment's marker
    assert f"after a warm-up of {int(n):,}" in r.stdout
    q = "SELECT cpu, insns, stall_ps, clock_ps FROM vcpu_clocks ORDER BY cpu"
    assert [tuple(x) for x in warm.execute(q)] == [tuple(x) for x in cold.execute(q)]
    logs = [Path(c.execute("SELECT log_path FROM runs").fetchone()[0]).read_bytes() for c in (warm, cold)]
    assert logs[0] == logs[1]
    counted = [c.execute("SELECT SUM(insns) FROM timing_cpu").fetchone()[0] for c in (warm, cold)]
    assert counted[1] == counted[0] + n
    assert {(b["test"], b["node"]): b["gbps"] for b in bw.rows(warm, 1)[0]} == \
        {k: v["gbps"] for k, v in recs.items()}
