"""End to end: the core probe under --timing detailed on the smallest
two-node x86 machine (tests/data/x86-2s-small.toml: no [core] table, so the
native core's figures apply, topologies/core.py), probing from the first CPU
of node 1 so that its buffer's binding is tested too. Each figure is checked
for direction and rough size against the topology's own figures
(experiments/coreprobe/results.configured: its execution classes, width,
misprediction penalty, L1 load-to-use, memory latency), read from the
topology object, never against recorded values: the guest's clock must
show what the model was configured with. Needs the timing model's dataflow
core (several instructions a cycle at their classes' latencies, a branch
predictor); a figure the topology's core does not state is skipped, not
guessed. Slow: restores a guest."""
from pathlib import Path

import pytest

import topologies as T
from experiments.coreprobe import results as cp
from tests.e2e import db, vmlab

pytestmark = pytest.mark.boot
TOPO = Path(__file__).parent / "data" / "x86-2s-small.toml"
# small: 262144 operations a pass (4 branch patterns' worth), two passes
PARAMS = "swap=none,iters=262144,reps=2,syscalls=20000,fault_pages=512,forks=50"


@pytest.fixture(scope="module")
def probe(vmlab_env, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("coreprobe")
    topo = T.load(str(TOPO))
    cpu = topo.cpus_per_node  # node 1's first CPU
    r = vmlab(vmlab_env, tmp, "--topology", str(TOPO), "--exp", "coreprobe", "--timing", "detailed",
              "--param", f"{PARAMS},cpu={cpu}")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return cp.rows(db(tmp), 1), topo, r.stdout


def cycles(rows, name) -> float:
    assert not rows[name]["skipped"], rows[name]["note"]
    return rows[name]["cycles_per_op"]


def wanted(topo, name) -> float:
    """The topology's own figure for a test, or skip: its core does not state it."""
    conf = cp.configured(topo)
    if name not in conf:
        pytest.skip(f"the topology's core states no figure for {name} (topologies/core.py)")
    return conf[name][0]


def test_every_test_ran_pinned_on_node_1_at_the_topology_s_clock(probe):
    rows, topo, out = probe
    assert list(rows) == list(cp.TESTS)
    for name, row in rows.items():
        assert not row["skipped"], (name, row["note"])
        assert row["pinned"] == 1 and row["cpu"] == topo.cpus_per_node and row["node"] == 1, name
        assert row["clock_ghz"] == pytest.approx(topo.clock_ghz), name
        assert row["impl"] in ("x86_64 asm", "derived", "c", "c (no-tree-vectorize)"), name
    for name in cp.MEMORY + ("scalar_sum",):
        assert rows[name]["on_node"] >= 0.9, name  # the buffer is on the probing CPU's node
    assert "coreprobe (detailed timing" in out


@pytest.mark.parametrize("name", ["dep_add", "imul", "fpadd", "fpmul", "div32", "div64"])
def test_a_dependent_chain_takes_its_class_s_latency(probe, name):
    rows, topo, _ = probe
    assert cycles(rows, name) == pytest.approx(wanted(topo, name), rel=0.25)


def test_a_divide_is_far_slower_than_an_add_and_a_multiply(probe):
    rows, topo, _ = probe
    assert cycles(rows, "div32") > 10 * cycles(rows, "dep_add")
    assert cycles(rows, "div32") > cycles(rows, "imul") > cycles(rows, "dep_add")
    assert cycles(rows, "div64") >= cycles(rows, "div32") * 0.9


def test_independent_adds_overlap_as_wide_as_the_core_is(probe):
    rows, topo, _ = probe
    assert cycles(rows, "indep_add") <= cycles(rows, "dep_add") / 2
    assert cycles(rows, "indep_add") == pytest.approx(wanted(topo, "indep_add"), rel=0.25)


def test_an_l1_hit_takes_the_load_to_use_latency(probe):
    rows, topo, _ = probe
    assert cycles(rows, "l1_load") == pytest.approx(wanted(topo, "l1_load"), rel=0.25)


def test_a_dependent_load_from_memory_pays_the_local_latency(probe):
    """p = a[p] and p = *p: each load's address is the last one's value, as a
    register (the index) or as a pointer; both pay the node's latency."""
    rows, topo, _ = probe
    for name in cp.MEMORY:
        assert rows[name]["ns_per_op"] == pytest.approx(wanted(topo, name), rel=0.10), name
        assert rows[name]["ns_per_op"] > 10 * rows["l1_load"]["ns_per_op"], name


def test_random_branches_cost_the_misprediction_penalty(probe):
    rows, topo, _ = probe
    assert rows["branch_random"]["ns_per_op"] > rows["branch_predictable"]["ns_per_op"]
    assert cycles(rows, "branch_mispredict") == pytest.approx(wanted(topo, "branch_mispredict"), rel=0.30)


def test_a_scalar_sum_streams_and_the_kernel_paths_order_as_on_hardware(probe):
    rows, topo, _ = probe
    assert 1.0 < rows["scalar_sum"]["gbps"] <= topo.memory_bandwidth_gbps
    ns = {k: rows[k]["ns_per_op"] for k in cp.KERNEL}
    assert ns["fork"] > ns["page_fault"] > ns["syscall"] > 10 * rows["dep_add"]["ns_per_op"]
