"""End to end: the tlbprobe guest program under --timing detailed on x86-2s.
The guest's own clock sees the TLB's reach: past the second-level TLB's
6 MiB of 4 KiB pages each load pays a walk that 2 MiB pages do not; the
kernel really backs the 2 MiB buffer with huge pages; the walks end in
leaves of both sizes; and the page-table placement knob works: with the
tables bound to the far node, the walker's reads go one hop. Checked by
direction against the topology's TLB, not against recorded values. Slow:
restores a guest."""
import pytest

import topologies as T
from analysis import kit
from experiments.tlbprobe import results as tp
from tests.e2e import db, vmlab

pytestmark = pytest.mark.boot


@pytest.fixture(scope="module")
def probe(vmlab_env, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tlbprobe")
    r = vmlab(vmlab_env, tmp, "--topology", "x86-2s", "--exp", "tlbprobe", "--timing", "detailed",
              "--param", "swap=none,max_frac=0.0625,loads=20000,gups_frac=0.125,updates=30000")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return db(tmp), r.stdout


def test_the_translation_cost_steps_up_where_the_second_level_tlb_s_reach_ends(probe):
    con, out = probe
    recs = kit.bodies(con, 1, "tlb")
    four = {b["ws_mib"]: b["ns_per_load"] for b in recs if b["pages"] == "4k"}
    two = {b["ws_mib"]: b for b in recs if b["pages"] == "2m"}
    assert sorted(four) == [1, 2, 4, 8, 16]
    assert all(two[ws]["huge_share"] >= 0.9 for ws in (2, 4, 8, 16))   # the kernel gave huge pages
    reach = tp.reach_mib(T.load("x86-2s"), "4k")["l2"]                    # 6 MiB
    cost = {ws: four[ws] - two[ws]["ns_per_load"] for ws in (2, 4, 8, 16)}
    inside = [c for ws, c in cost.items() if ws <= reach]
    outside = [c for ws, c in cost.items() if ws > reach]
    # inside the STLB's reach a 4 KiB page costs its hit; past it, a walk on top
    assert min(outside) > max(inside) + 1.0, cost
    assert all(c > 0 for c in cost.values()), cost
    assert tp.step(recs[:5], recs[5:]) is not None and "translation's cost per load first steps up" in out


def test_walks_are_counted_by_size_and_by_where_their_reads_were_served(probe):
    con, out = probe
    leaves = dict(con.execute("SELECT name, value FROM metrics WHERE run_id = 1 AND name LIKE 'timing.walk_leaves_%'"))
    assert leaves["timing.walk_leaves_4k"] > 1000 and leaves["timing.walk_leaves_2m"] > 0
    served = {(r[0], r[1]): r[2] for r in con.execute("SELECT served, hops, loads FROM timing_walks WHERE run_id = 1")}
    assert served[("l1", None)] + served[("l2", None)] > 0
    cpu = con.execute("SELECT SUM(dtlb_misses), SUM(walks), SUM(walk_loads), SUM(itlb_misses), SUM(l1i_misses) "
                      "FROM timing_cpu WHERE run_id = 1").fetchone()
    assert cpu[0] > cpu[1] > 0 and cpu[2] >= cpu[1] and cpu[3] > 0 and cpu[4] > 0
    assert "translation:" in out and "page-walk reads served by" in out and "instruction fetch:" in out


def test_page_tables_bound_to_the_far_node_are_read_from_there(probe):
    con, out = probe
    pt = kit.bodies(con, 1, "ptnode")
    assert [p["pt_node"] for p in pt] == [0, 1] and all(p["data_node"] == 0 for p in pt)
    # only the far-table run puts page-table pages on node 1: the walker read some of them there
    remote = con.execute("SELECT loads FROM timing_walks WHERE run_id = 1 AND served = 'memory' AND hops = 1"
                         ).fetchone()
    assert remote and remote[0] > 0
    assert "page tables on node 1" in out
