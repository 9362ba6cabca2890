"""End to end: the Sapphire Rapids machine with a CXL expander on each
socket (topologies/spr-2s-cxl.toml), restored from its snapshot after boot.
The guest sees the CPU-less memory-only nodes as its firmware describes
them (no CPUs, their memory, the SLIT and HMAT the topology derives); on
Linux 6.1 they share the DRAM tier (tiers from HMAT came in 6.7), on 6.12
they form a lower memory tier. Functional runs (--timing off): the probe's
figures on the guest clock are the closing note's commands, not checked
here. Slow: boots guests (and builds the 6.12 kernel on a cold cache)."""
import json

import pytest

import topologies as T
from tests.e2e import db, vmlab

pytestmark = pytest.mark.boot
PARAMS = "swap=none,buf_frac=0.02,node_threads=0,local=0"


def run(vmlab_env, tmp, kernel):
    r = vmlab(vmlab_env, tmp, "--topology", "spr-2s-cxl", "--exp", "tierprobe", "--timing", "off",
              "--kernel", kernel, "--param", PARAMS)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    con = db(tmp)
    rec = lambda kind: json.loads(con.execute("SELECT body FROM records WHERE run_id = 1 AND type = ?",
                                              (kind,)).fetchone()["body"])
    return con.execute("SELECT * FROM runs WHERE id = 1").fetchone(), rec("machine"), rec("numa_view"), r.stdout


@pytest.fixture(scope="module")
def linux61(vmlab_env, tmp_path_factory):
    return run(vmlab_env, tmp_path_factory.mktemp("cxl61"), "vanilla")


@pytest.fixture(scope="module")
def linux612(vmlab_env, tmp_path_factory):
    return run(vmlab_env, tmp_path_factory.mktemp("cxl612"), "vanilla@6.12")


@pytest.mark.parametrize("which", ["linux61", "linux612"])
def test_the_guest_sees_memory_only_nodes_as_the_topology_describes_them(which, request):
    row, machine, view, out = request.getfixturevalue(which)
    topo = T.load("spr-2s-cxl")
    assert row["start"] == "restored" and row["nodes"] == 4 and row["cpus"] == 8
    nodes = {n["node"]: n for n in machine["nodes"]}
    assert [nodes[n]["cpus"] for n in range(4)] == ["0-3", "4-7", "", ""]
    for n in (2, 3):  # 128 MiB each, less what the kernel keeps for itself
        assert 100 * 1024 < nodes[n]["mem_total_kib"] <= 128 * 1024
        assert nodes[n]["hmat_read_latency_ns"] == 253 and nodes[n]["hmat_read_bandwidth_mbps"] == 17700
    assert machine["distances"] == topo.slit()
    assert "saw 4 NUMA nodes" in out and "matches the topology" in out
    assert [n["cpus"] for n in view["nodes"]] == ["0-3", "4-7", "", ""]


def test_linux_6_1_keeps_them_in_the_dram_tier(linux61):
    row, machine, view, _ = linux61
    assert machine["release"].startswith("6.1.")
    assert view["tiers_sysfs"] == 1 and len(view["tiers"]) == 1 and view["tiers"][0]["nodes"] == [0, 1, 2, 3]


def test_linux_6_12_puts_them_in_a_lower_tier(linux612):
    row, machine, view, out = linux612
    assert machine["release"].startswith("6.12.") and row["patch_set"] == "vanilla@6.12"
    assert [t["nodes"] for t in view["tiers"]] == [[0, 1], [2, 3]]  # fastest (lowest id) first
    tier = {n["node"]: n["tier"] for n in view["nodes"]}
    assert tier[0] == tier[1] < tier[2] == tier[3]
    assert "memory tiers (2)" in out
