"""Fast tests of the seed reproducers' host and guest code: manifests, the
lock_stat parser of the guest library (compiled here and fed synthetic
input), the guest programs run natively on tiny sizes, and ingest + summary
of synthetic consoles."""
import json
import subprocess
from pathlib import Path

import pytest

import experiments as E
import topologies as T
from analysis import db, summary
from engine import qemu
from experiments.kvio import results as kvio_results
from protocol import records as R
from tests.cbuild import GUEST, gcc
from tests.e2e import REPO
from tests.runrows import run_end, run_start

LIB = REPO / "experiments" / "lib"
REPROS = ("mlockchurn", "kvio", "forkstorm", "qsbench")


def cc(tmp_path, src: Path, name: str) -> Path:
    return gcc(tmp_path / name, src, *E.lib_sources(), flags=GUEST, include=[LIB])


def records_of(text: str):
    return R.parse_text(text)


# --- manifests -------------------------------------------------------------------
@pytest.mark.parametrize("name", REPROS)
def test_reproducers_size_themselves_from_the_topology(name):
    e = E.load(name)
    small, big = e.resolve(T.load("gs1280-8"), {}), e.resolve(T.load("gs1280-32"), {})
    assert small.command.split()[0] == name
    # every size is a fraction of memory: 4x the memory, 4x (within rounding) the size
    size = {"mlockchurn": "slot_mib", "kvio": "store_mib", "forkstorm": "region_mib", "qsbench": "array_mib"}[name]
    if name == "forkstorm":  # per worker, and there are 4x the workers too
        assert big.derived["workers"] == 4 * small.derived["workers"] == 32
        assert abs(big.derived[size] - small.derived[size]) <= 1
        # the family region every process inherits is a part of all memory
        assert abs(big.derived["family_mib"] - 4 * small.derived["family_mib"]) <= 4 and small.derived["family_mib"] > 0
    else:
        assert abs(big.derived[size] - 4 * small.derived[size]) <= 4
    assert small.timeout_s > 60


def test_working_sets_are_above_ram_where_the_seed_needs_it():
    t = T.load("gs1280-8")
    fs = E.load("forkstorm").resolve(t, {})
    assert fs.derived["workers"] * fs.derived["region_mib"] + fs.derived["family_mib"] > t.total_memory_mib
    assert fs.params["swap_frac"] == 2.0
    # without a family region the workers' own regions hold all of it
    alone = E.load("forkstorm").resolve(t, {"family_frac": "0"})
    assert alone.derived["family_mib"] == 0
    assert alone.derived["workers"] * alone.derived["region_mib"] > t.total_memory_mib
    qs = E.load("qsbench").resolve(t, {})
    assert qs.derived["array_mib"] > t.total_memory_mib
    ml = E.load("mlockchurn").resolve(t, {})
    # the chunks recycle memory (more data than RAM), and the slots lock a large share of it
    assert ml.derived["chunks"] * ml.derived["slot_mib"] >= 2 * t.total_memory_mib
    assert 0.3 * t.total_memory_mib < ml.params["slots"] * ml.derived["slot_mib"] < 0.6 * t.total_memory_mib
    assert ml.derived["disk_mib"] > ml.derived["chunks"] * ml.derived["slot_mib"]
    kv = E.load("kvio").resolve(t, {})
    assert kv.derived["disk_mib"] > t.total_memory_mib and "--levels 0/0.2/0.6/1.0" in kv.command
    assert "disk_mib" not in fs.derived and "disk_mib" not in qs.derived


def test_bad_reproducer_parameters_name_the_field():
    t = T.load("gs1280-8")
    with pytest.raises(E.ExperimentError, match="'levels': expected background IO.*got '0/x'"):
        E.load("kvio").resolve(t, {"levels": "0/x"})
    with pytest.raises(E.ExperimentError, match="expected NAME=VALUE"):
        E.parse_overrides(["levels=0,0.5"])  # commas separate parameters: levels use '/'
    with pytest.raises(E.ExperimentError, match="'swap_frac': expected > 0 when the array is above RAM"):
        E.load("qsbench").resolve(t, {"swap_frac": "0"})
    with pytest.raises(E.ExperimentError, match="'slots': expected >= 1"):
        E.load("mlockchurn").resolve(t, {"slots": "0"})


def test_data_disk_is_the_virtio_blk_after_swap(tmp_path):
    t = T.load("gs1280-8")
    cmd = qemu.command_line(qemu.Machine(t, Path("k"), Path("i"), swap=tmp_path / "swap.img",
                                         data=tmp_path / "d.img"), binary=Path("q"))
    drives = [a for a in cmd if a.startswith("file=")]
    assert [d.split(",")[0] for d in drives] == [f"file={tmp_path / 'swap.img'}", f"file={tmp_path / 'd.img'}"]
    assert cmd.count("virtio-blk-pci,drive=data") == 1
    assert not any("drive=data" in a for a in qemu.command_line(qemu.Machine(t, Path("k"), Path("i")),
                                                                             binary=Path("q")))


# --- lock_stat parser (experiments/lib/lockstat.c), synthetic /proc/lock_stat ------------
LOCK_STAT = """lock_stat version 0.4
-----------------------------------------------------------------------------------------------------
                              class name    con-bounces    contentions   waittime-min   waittime-max waittime-total   waittime-avg    acq-bounces   acquisitions   holdtime-min   holdtime-max holdtime-total   holdtime-avg
-----------------------------------------------------------------------------------------------------

                  &anon_vma->rwsem-W:            40             55           0.20          91.50        1200.25          21.82            300           5000           0.10          50.00        2500.00           0.50
                  &anon_vma->rwsem-R:            10             12           0.30          10.00          60.00           5.00            100           9000           0.10          20.00         900.00           0.10
                  ------------------
                  &anon_vma->rwsem             30          [<000000001234abcd>] folio_lock_anon_vma_read+0x5b/0x180
                  &anon_vma->rwsem             25          [<00000000deadbeef>] anon_vma_clone+0x6c/0x1d0

                     ptlock_ptr(page):           700            900           0.10          30.00        4500.00           5.00           2000          80000           0.05          10.00        8000.00           0.10
                     ptlock_ptr(page)           900          [<00000000aaaa0000>] __handle_mm_fault+0x3c0/0x1000

                     &zone->lock:             0              0           0.00           0.00           0.00           0.00             10            500           0.10           1.00          50.00           0.10
                 &lruvec->lru_lock:            100            300           0.10          80.00        2000.00           6.67            900          40000           0.10          15.00        6000.00           0.15
"""  # noqa: E501 (/proc/lock_stat's layout, verbatim)

HARNESS = r"""
#include "vmlab.h"
int main(int argc, char **argv)
{
	int n = vl_lockstat("run", argv[1], 3);
	static const char *needles[] = {"anon_vma", "ptl", NULL};
	vl_buf b = vl_record("match");
	vl_lockstat_match(&b, "locks", argv[1], needles);
	vl_emit(&b);
	return n;
}
"""


def test_lockstat_parser_picks_the_most_contended_classes(tmp_path):
    src = tmp_path / "h.c"
    src.write_text(HARNESS)
    exe = cc(tmp_path, src, "h")
    f = tmp_path / "lock_stat"
    f.write_text(LOCK_STAT)
    r = subprocess.run([str(exe), str(f)], capture_output=True, text=True)
    assert r.returncode == 5  # five class lines; the call-site lines are not classes
    p = records_of(r.stdout)
    top = p.first("lockstat").body
    assert top["classes"] == 5 and top["phase"] == "run"
    assert [c["class"] for c in top["top"]] == ["ptlock_ptr(page)", "&lruvec->lru_lock", "&anon_vma->rwsem-W"]
    assert top["top"][0]["contentions"] == 900 and top["top"][0]["wait_total_us"] == 4500.0
    assert top["top"][2]["acquisitions"] == 5000 and top["top"][2]["wait_max_us"] == 91.5
    locks = p.first("match").body["locks"]
    assert locks["anon_vma"]["contentions"] == 67 and locks["anon_vma"]["wait_total_us"] == 1260.25
    assert locks["ptl"]["contentions"] == 900


def test_lockstat_absent_reports_nothing(tmp_path):
    src = tmp_path / "h.c"
    src.write_text(HARNESS)
    exe = cc(tmp_path, src, "h")
    r = subprocess.run([str(exe), str(tmp_path / "no-such-file")], capture_output=True, text=True)
    assert r.returncode == 0
    p = records_of(r.stdout)
    assert p.first("lockstat") is None and "locks" not in p.first("match").body


# --- the guest programs, natively, tiny ------------------------------------------------
@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("progs")
    return {n: cc(tmp, REPO / "experiments" / n / f"{n}.c", n) for n in REPROS}


def test_qsbench_same_seed_same_work(programs):
    def run(seed):
        r = subprocess.run([str(programs["qsbench"]), "--mib", "2", "--procs", "2", "--seed", str(seed)],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        p = records_of(r.stdout)
        return p.first("qsbench_done").body, p.of("qsbench_proc")
    a, procs = run(7)
    b, _ = run(7)
    c, _ = run(8)
    assert a["checksum"] == b["checksum"] != c["checksum"]
    assert a["procs_ok"] == 2 and all(x.body["unsorted"] == 0 for x in procs)
    assert sum(x.body["elements"] for x in procs) == 2 * (1 << 20) // 4


@pytest.mark.parametrize("name,args", [("qsbench", ["--mib", "x"]), ("kvio", ["--levels", "0,a", "--ram-mib", "8"]),
                                       ("forkstorm", ["--children", "-1"]), ("mlockchurn", ["--slots", "0"])])
def test_guest_programs_refuse_bad_arguments(programs, name, args):
    r = subprocess.run([str(programs[name]), *args], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and name in r.stderr


def test_forkstorm_children_run_on_the_family_region_and_their_workers(programs):
    """Natively, no memory pressure: the options are taken and jobs complete
    on every worker, with and without the region every process inherits (a
    smoke test: natively, reading a whole 4 MiB region is as quick as a
    window; the e2e tests show the storm under reclaim)."""
    for family in ("4", "0"):
        r = subprocess.run([str(programs["forkstorm"]), "--workers", "2", "--region-mib", "4", "--family-mib", family,
                            "--children", "2", "--touch-kib", "64", "--write-kib", "16", "--private-kib", "16",
                            "--duration-ms", "300", "--tick-ms", "100"], capture_output=True, text=True, timeout=60)
        p = records_of(r.stdout)
        assert p.first("forkstorm_start").body["family_mib"] == int(family)
        done = p.first("forkstorm_done").body
        assert p.first("forkstorm_start").body["touch_kib"] == 64
        assert all(j > 20 for j in done["per_worker"]) and done["worker_status"] == [0, 0], r.stderr
        # a tick every 100 ms of the 300: jobs never fewer, the last (when the workers are done) all of them
        ticks = [t.body["jobs"] for t in p.of("forkstorm_tick")]
        assert len(ticks) >= 2 and ticks == sorted(ticks) and ticks[-1] == sum(done["per_worker"]), ticks


def test_kvio_serves_ops_at_every_level(programs, tmp_path):
    r = subprocess.run([str(programs["kvio"]), "--store-mib", "2", "--clients", "2", "--duration-ms", "200",
                        "--ram-mib", "4", "--levels", "0/0.5", "--dir", str(tmp_path)],
                       capture_output=True, text=True, timeout=60)
    p = records_of(r.stdout)
    levels = [x.body for x in p.of("kvio_level")]
    assert [x["io_mib"] for x in levels] == [0, 2] and all(x["ops"] > 0 and x["io_ok"] for x in levels)
    assert levels[1]["io_ms"] > 0 and not (tmp_path / "ddfile").exists()  # removed after its level
    names = {x.body["name"] for x in p.of("metric")}
    assert {"kvio.ops_per_s.io0", "kvio.ops_per_s.io1"} <= names
    checks = {c["name"]: c["ok"] for c in p.first("sanity").body["checks"]}
    assert checks["levels"] == 1 and checks["ops_no_io"] == 1


# --- ingest and summary of synthetic consoles ----------------------------------------
def _row(topo, exp, params):
    return run_start(topo, experiment=exp, params_json=json.dumps(params))


def _store(tmp_path, exp, params, text):
    topo = T.load("gs1280-8")
    con = db.connect(tmp_path / "r.db")
    rid = db.start_run(con, _row(topo, exp, params))
    db.finish_run(con, rid, run_end(), records_of(text), topo)
    return con, rid


def rec(typ, **body) -> str:
    return "@@VMLAB " + json.dumps({"type": typ, **body}) + "\n"


def vm(**kw):
    return {k: kw.get(k, 0) for k in kvio_results.COUNTERS}


def test_kvio_levels_get_the_seeds_table(tmp_path):
    text = (rec("kswapd_sample", seq=0, t_ms=0, clk_tck=100, ticks=[0, 0])
            + rec("kswapd_sample", seq=1, t_ms=1000, clk_tck=100, ticks=[50, 10])
            + rec("kswapd_sample", seq=2, t_ms=3000, clk_tck=100, ticks=[60, 20])
            + rec("kvio_level", level=0, io_frac=0, io_mib=0, io_ok=1, io_ms=0, ops=1000, elapsed_ms=1000,
                  ops_s=1000.0, kswapd_s=0, vmstat=vm())
            + rec("kvio_level", level=1, io_frac=0.5, io_mib=256, io_ok=1, io_ms=4000, ops=2000, elapsed_ms=4000,
                  ops_s=500.0, kswapd_s=0.6, vmstat=vm(pgscan_kswapd=8000, pgsteal_kswapd=2000, pswpout=30,
                                                       pgscan_direct=0))
            + rec("metric", name="kvio.ops_per_s.io0", value=1000.0, unit="ops/s")
            + rec("sanity", experiment="kvio", ok=0, checks=[
                {"name": "levels", "ok": 1, "value": 2, "expect": "all"},
                {"name": "pgscan", "ok": 0, "value": 0, "expect": "> 0"}]))
    con, rid = _store(tmp_path, "kvio", {"store_mib": 64, "clients": 2}, text)
    lv = con.execute("SELECT * FROM kvio_levels WHERE run_id = ? ORDER BY level", (rid,)).fetchall()
    assert len(lv) == 2
    assert lv[1]["kswapd_efficiency"] == 0.25 and lv[1]["kswapd_velocity"] == 2000.0
    assert lv[1]["direct_efficiency"] is None and lv[1]["io_s"] == 4.0
    m = dict(con.execute("SELECT name, value FROM metrics WHERE run_id = ?", (rid,)).fetchall())
    assert m["kvio.ops_per_s.io0"] == 1000.0 and m["kvio.pswpout.io1"] == 30 and m["kvio.sanity_ok"] == 0
    # node 0's kswapd: 0.5 CPU in the first second; all kswapds: 0.8 CPU-s over 3 s
    assert m["kvio.kswapd_share_peak"] == 0.5 and m["kvio.kswapd_share_mean"] == pytest.approx(0.2667, abs=1e-4)
    assert con.execute("SELECT COUNT(*) FROM repro_kswapd_samples WHERE run_id = ?", (rid,)).fetchone()[0] == 6
    out = summary.render(con, rid)
    assert "-50.0%" in out and "0.25" in out and "2000" in out
    assert "sanity:  FAILED" in out and "pgscan FAILED" in out
    assert "kvio_levels WHERE run_id" in out


def test_mlockchurn_chunks_and_lockstat_land(tmp_path):
    chunk = dict(slot=0, steps=4, ok=1, step_median_ms=1.0, step_max_ms=9.0, wall_ms=50, majflt=3, minflt=9,
                 kswapd_s=0.1, pgscan_kswapd=100, pgscan_direct=20, pgsteal_kswapd=60, pgsteal_direct=20,
                 free_kib=[1000, 2000])
    text = (rec("mlock_chunk", chunk=0, mlock_ms=40.0, t_ms=50, **chunk)
            + rec("mlock_chunk", chunk=1, mlock_ms=80.0, t_ms=130, **chunk)
            + rec("lockstat", phase="run", classes=2, top=[
                {"class": "&lruvec->lru_lock", "contentions": 9, "con_bounces": 4, "wait_total_us": 12.5,
                 "wait_max_us": 3.0, "acquisitions": 100, "hold_total_us": 50.0}])
            + rec("metric", name="mlockchurn.pgscan", value=240.0, unit="pages")
            + rec("sanity", experiment="mlockchurn", ok=1, checks=[{"name": "pgscan", "ok": 1, "value": 240,
                                                                    "expect": "> 0"}]))
    con, rid = _store(tmp_path, "mlockchurn", {"slot_mib": 4, "slots": 1, "step_kib": 1024}, text)
    rows = con.execute("SELECT chunk, mlock_ms FROM mlockchurn_chunks WHERE run_id = ?", (rid,)).fetchall()
    assert [tuple(x) for x in rows] == [(0, 40.0), (1, 80.0)]
    assert con.execute("SELECT COUNT(*) FROM node_free WHERE run_id = ?", (rid,)).fetchone()[0] == 4
    lk = con.execute("SELECT class, contentions FROM repro_lockstat WHERE run_id = ?", (rid,)).fetchall()
    assert [tuple(x) for x in lk] == [("&lruvec->lru_lock", 9)]
    out = summary.render(con, rid)
    assert "sanity:  PASSED" in out and "&lruvec->lru_lock" in out
    assert "first 1 chunk(s) (free memory) 0.04 s per mlock, the 1 after (recycling) 0.08 s" in out


def test_qsbench_and_forkstorm_figures(tmp_path):
    start = R.Record(1, "qsbench_start", {"type": "qsbench_start"}, host_s=10.0)
    proc = {"proc": 0, "elements": 100, "fill_ms": 1.0, "sort_ms": 9.0, "elapsed_ms": 10.0, "user_ms": 8.0,
            "sys_ms": 1.0, "majflt": 5, "minflt": 50, "checksum": "00ab", "unsorted": 0}
    done = {"checksum": "00ab", "elapsed_ms": 10.0}
    parsed = R.Parsed([start, R.Record(2, "qsbench_proc", {"type": "qsbench_proc", **proc}),
                       R.Record(3, "qsbench_done", {"type": "qsbench_done", **done}, host_s=52.5),
                       R.Record(4, "metric", {"type": "metric", "name": "qsbench.elapsed_s", "value": 0.01})])
    topo = T.load("gs1280-8")
    con = db.connect(tmp_path / "r.db")
    rid = db.start_run(con, _row(topo, "qsbench", {"array_mib": 1, "procs": 1, "qs_seed": 3}))
    db.finish_run(con, rid, run_end(), parsed, topo)
    m = dict(con.execute("SELECT name, COALESCE(value, text) FROM metrics WHERE run_id = ?", (rid,)).fetchall())
    assert m["qsbench.host_wall_s"] == 42.5 and m["qsbench.checksum"] == "00ab"
    out = summary.render(con, rid)
    assert "host wall 42.5 s" in out and "sanity:  no sanity record" in out

    fs = {"jobs": 120, "elapsed_ms": 30000.0, "jobs_per_min": 240.0, "user_s": 1.0, "sys_s": 3.0, "idle_s": 0.5,
          "kswapd_s": 0.2, "per_worker": [70, 50], "vmstat": {"pswpout": 10, "pgscan_kswapd": 5},
          "locks": {"anon_vma": {"contentions": 4, "wait_total_us": 9.0}}}
    text = rec("forkstorm_tick", seq=0, t_ms=1000, jobs=3, live_workers=2, vmstat={"pswpout": 1}, kswapd_s=0) + \
        rec("forkstorm_done", **fs)
    con, rid = _store(tmp_path, "forkstorm", {"workers": 2, "children": 4, "region_mib": 8}, text)
    assert con.execute("SELECT SUM(jobs) FROM forkstorm_workers WHERE run_id = ?", (rid,)).fetchone()[0] == 120
    m = dict(con.execute("SELECT name, value FROM metrics WHERE run_id = ?", (rid,)).fetchall())
    assert m["forkstorm.lock_contentions.anon_vma"] == 4
    out = summary.render(con, rid)
    assert "240 jobs/min" in out and "system 3.00 s (75 % of busy time)" in out and "jobs per worker: 70 50" in out
    assert "anon_vma 4, 9" in out and "without LOCK_STAT" not in out
    # a default kernel's storm has no lock classes: the summary says they were not measured, and why
    del fs["locks"]
    (tmp_path / "default").mkdir()
    con, rid = _store(tmp_path / "default", "forkstorm", {"workers": 2, "children": 4, "region_mib": 8},
                      rec("forkstorm_done", **fs))
    out = summary.render(con, rid)
    assert "not measured (kernel without LOCK_STAT" in out and "anon_vma" not in out


def test_memeater_summary_keeps_its_verdict(tmp_path):
    text = (rec("vmstat", phase="before", counters={"pswpout": 0})
            + rec("vmstat", phase="after", counters={"pswpout": 0})
            + rec("chunk", cycle=0, chunk=0, wall_ms=1.0, placement={"0": 16}, absent=0, sampled=16, free_kib=[1],
                  swap_used_kib=0))
    con, rid = _store(tmp_path, "memeater", {"chunk_mib": 16}, text)
    out = summary.render(con, rid)
    assert "verdict: no swapping" in out and "sanity:" not in out and "chunk_times WHERE run_id" in out
