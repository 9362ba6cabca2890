"""Fast tests of the core probe (experiments/coreprobe): its guest program
compiled for the host as the image build compiles it and run natively on
tiny sizes (every test reports, with consistent figures), then its records
ingested into the `coreprobe` table and summarised. No host timing is
asserted: the host is shared and noisy (a loaded CI host once timed the
independent adds 90x slower than the dependent ones); what the probe
measures is checked on the guest's own clock, which repeats exactly, in
tests/test_coreprobe_e2e.py."""
import json
import platform
import subprocess

import pytest

import experiments as E
import topologies as T
from analysis import compare, db, summary
from experiments.coreprobe import results as cp
from protocol import records as R
from tests.cbuild import GUEST, gcc
from tests.e2e import REPO
from tests.runrows import run_end, run_start

LIB = REPO / "experiments" / "lib"
SRC = REPO / "experiments" / "coreprobe" / "coreprobe.c"
TINY = ["--iters", "262144", "--reps", "3", "--buf-mib", "4", "--syscalls", "2000", "--fault-pages", "256",
        "--forks", "20", "--clock-ghz", "2.5"]


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("coreprobe")
    return gcc(tmp / "coreprobe", SRC, *E.lib_sources(), flags=(*GUEST, "-static", "-Wl,--gc-sections"), include=[LIB])


@pytest.fixture(scope="module")
def native(program):
    r = subprocess.run([str(program), *TINY], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    p = R.parse_text(r.stdout)
    assert not p.errors, p.errors
    return r.stdout, {x.body["name"]: x.body for x in p.of("core")}, p.first("coreprobe_done").body


def test_every_test_reports_once_with_its_figures(native):
    _, recs, done = native
    assert list(recs) == list(cp.TESTS)
    assert done["tests"] == len(cp.TESTS) and done["skipped"] == 0
    for name, b in recs.items():
        assert b["skipped"] == 0 and b["iterations"] > 0 and b["reps"] == 3, name
        if name != "branch_mispredict":
            assert b["ns_per_op"] > 0 and b["ns_mean"] >= b["ns_per_op"] * (1 - 1e-5), name
        assert b["cycles_per_op"] == pytest.approx(b["ns_per_op"] * 2.5, rel=1e-4, abs=1e-3), name
    # the asm's unrolling (64) and the branch pattern's length (65536) round the counts
    assert recs["dep_add"]["iterations"] == 262144 and recs["branch_random"]["iterations"] == 262144
    assert recs["index_chase"]["iterations"] == 4 * 2**20 // 64 and recs["scalar_sum"]["iterations"] == 2**19
    assert recs["scalar_sum"]["gbps"] == pytest.approx(4 * 2**20 / (recs["scalar_sum"]["ns_per_op"] * 2**19),
                                                       rel=1e-3)
    assert recs["fork"]["us_per_op"] == pytest.approx(recs["fork"]["ns_per_op"] / 1e3, rel=1e-3)
    assert recs["page_fault"]["minflt"] >= 256  # every write faulted (no huge page took them)
    assert recs["branch_predictable"]["pattern"] == "alternating"
    b = recs["branch_mispredict"]
    assert b["ns_per_op"] == pytest.approx(2 * (recs["branch_random"]["ns_per_op"]
                                                - recs["branch_predictable"]["ns_per_op"]), rel=1e-3, abs=1e-3)
    assert recs["dep_add"]["impl"] == ("x86_64 asm" if platform.machine() == "x86_64" else "c")


def test_bad_arguments_are_refused(program):
    for args in (["--iters", "10"], ["--clock-ghz", "fast"], ["--branch-pattern", "zigzag"], ["--reps", "0"]):
        r = subprocess.run([str(program), *args], capture_output=True, text=True, timeout=30)
        assert r.returncode == 2 and "coreprobe" in r.stderr, args


def test_manifest_passes_the_topology_s_clock_and_sizes_the_buffer():
    exp = E.load("coreprobe")
    big, small = exp.resolve(T.load("x86-1s-2c"), {}), exp.resolve(T.load("gs1280-8"), {})
    assert big.derived == {"buf_mib": 64, "ghz": 2.5} and "--clock-ghz 2.5 " in big.command
    assert small.derived == {"buf_mib": 16, "ghz": 1.15}  # a quarter of a 64 MiB node
    assert "--branch-pattern alternating" in big.command and big.timeout_s < 1200
    with pytest.raises(E.ExperimentError, match="'cpu'"):
        exp.resolve(T.load("x86-1s-2c"), {"cpu": "2"})


def test_records_land_in_the_coreprobe_table_and_the_summary(native, tmp_path):
    text, recs, _ = native
    topo = T.load("x86-1s-2c")
    con = db.connect(tmp_path / "r.db")
    rid = db.start_run(con, run_start(topo, experiment="coreprobe", params_json=json.dumps({"cpu": 0})))
    db.finish_run(con, rid, run_end(), R.parse_text(text), topo)
    got = cp.rows(con, rid)
    assert list(got) == list(cp.TESTS)
    assert got["imul"]["ns_per_op"] == pytest.approx(recs["imul"]["ns_per_op"])
    assert got["scalar_sum"]["gbps"] > 0 and got["branch_predictable"]["note"] == "pattern alternating"
    out = summary.render(con, rid)
    assert "coreprobe (off timing" in out and "adds per cycle" in out
    assert "DIV r32 latency (Agner Fog" in out  # the published figures, with their sources
    figs = compare.figures(con, rid)
    exp = E.load("coreprobe")
    for name in ("coreprobe.dep_add.ns", "coreprobe.dep_add.cycles", "coreprobe.fork.ns",
                 "coreprobe.scalar_sum.gbps"):
        value, unit = figs[name]
        assert exp.metric(name) is not None and exp.metric(name).unit == unit, name
    assert all(exp.metric(n) is not None and exp.metric(n).unit == u for n, (v, u) in figs.items()
               if n.startswith("coreprobe."))


def test_the_topology_s_own_figures_come_from_its_core_and_memory():
    topo = T.load("x86-1s-2c")
    conf = cp.configured(topo)
    assert conf["index_chase"][:2] == (topo.local_latency_ns, "ns")
    assert "l1_load" in conf and conf["l1_load"][1] == "cycles"
    if hasattr(topo.core, "exec_of"):  # the core with execution classes (topologies/core.py)
        assert conf["imul"][0] == topo.core.exec_of("mul").latency
        assert conf["branch_mispredict"][0] == topo.core.mispredict_cycles
