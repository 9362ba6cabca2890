"""`./run.py report` without QEMU: a study of synthetic runs stored through the
real ingest path (console records -> analysis.ingest), the HTML page and its
figures, the data behind them, a headless Chromium that loads the page, and
bad input."""
import json
import re
import struct
import subprocess
import types
from pathlib import Path

import numpy as np
import pytest

import experiments
import timing
import topologies as T
from analysis import db, experiment_results, pages, plot_kit, plots, report
from analysis.rows import insert
from experiments.forkstorm import plots as forkstorm_plots
from experiments.latprobe import plots as latprobe_plots
from experiments.memeater import plots as memeater_plots
from protocol import facts, records as R
from tests.e2e import ENV, REPO, vmlab
from tests.runrows import run_end, run_start

CHROMIUM = "/usr/bin/chromium"
MEMEATER = {"cpu": 0, "chunk_mib": 16, "chunks": 16, "cycles": 3}


def rec(type_, **body) -> str:
    return "@@VMLAB " + json.dumps({"type": type_, **body})


def store(con, topo, lines, status="ok", reason=None, **over) -> int:
    rid = db.start_run(con, run_start(topo, **over))
    db.finish_run(con, rid, run_end(status=status, reason=reason), R.parse_bytes("\n".join(lines).encode()), topo)
    return rid


def memeater_lines(topo, swap_per_chunk: int, slow: float, chunks=16, cycles=3) -> list[str]:
    """The guest's records of a memeater run: each 16 MiB chunk on the nearest
    node with room (hop order from CPU 0's node), swap growing once filled
    nodes' kswapds wake."""
    hops = topo.hops[0]
    free = [40.0] + [58.0] * (topo.nodes - 1)  # MiB; node 0 also holds the kernel
    home, swap = [], 0
    out = [rec("vmstat", phase="before", counters={"pswpout": 0, "pgscan_kswapd": 0})]
    for c in range(cycles):
        for i in range(chunks):
            if c == 0:
                node = next((n for n in sorted(range(topo.nodes), key=lambda n: (hops[n], n)) if free[n] >= 20), 0)
                free[node] -= 16
                home.append(node)
                if i >= 5:
                    swap += swap_per_chunk
                    free[node] += swap_per_chunk / 1024 / 2
            node = home[i]
            ms = (4.6 + 1.5 * hops[node]) if c == 0 else (1.2 + 0.4 * hops[node] + (40 if i < swap // 4096 else 0))
            out.append(rec("chunk", cycle=c, chunk=i, wall_ms=ms * slow, cpu_ms=ms, t_ms=0, minflt=4096, majflt=0,
                           placement={str(node): 60, str((node + 1) % topo.nodes): 4}, absent=0, sampled=64,
                           free_kib=[int(f * 1024) for f in free], swap_used_kib=swap))
    out.append(rec("vmstat", phase="after", counters={"pswpout": swap // 4, "pgscan_kswapd": swap // 2}))
    out.append(rec("memeater_done", total_ms=123.0 * slow))
    return out


def latprobe_lines(topo) -> list[str]:
    cpn = topo.cpus_per_node
    out = []
    for n in range(topo.nodes):
        ns = timing.memory_ns(topo, 0, n) * 1.07  # the guest's clock: a little above the configured figure
        out.append(rec("chase", cpu=0, home=0, node=n, distance=10, loads=100000, buf_mib=16, on_node=0.99,
                       guest_ms=ns * 100000 / 1e6, end=0))
        partner = n * cpn + (1 if n == 0 else 0)
        if partner != 0 and partner < topo.cpus:
            rtt = 2 * timing.pingpong_ns(topo, partner // cpn, 0, 0) * 1.1
            out.append(rec("pingpong", cpu=0, partner=partner, partner_ran_on=partner, partner_pinned=1, home=0,
                           node=n, distance=10, increments=4000, final=4000, guest_ms=1.0, rtt_ns=rtt))
    return out


def model_phases(con, rid, topo) -> None:
    """The timing model's phases of a detailed latprobe run: 3 % above the
    configured latency, so the model's line is its own."""
    insert(con, "timing_run", {"run_id": rid, "mode": "detailed"})
    chase, pp = facts.phase_id("latprobe.chase"), facts.phase_id("latprobe.pingpong")
    rows = []
    for n in range(topo.nodes):
        rows.append({"run_id": rid, "cpu": 0, "phase_id": chase, "instance": n, "begin_ps": 0,
                     "end_ps": int(timing.memory_ns(topo, 0, n) * 1.03 * 1000 * 100000), "lock_xfers": 0,
                     "lock_ps": 0})
        if n:
            ps = int(timing.pingpong_ns(topo, n, 0, 0) * 1000)
            rows += [{"run_id": rid, "cpu": c, "phase_id": pp, "instance": n, "begin_ps": 0, "end_ps": 1,
                      "lock_xfers": 2000, "lock_ps": 2000 * ps} for c in (0, n)]
    with con:
        insert(con, "timing_phases", rows)


def kvio_lines(slow: float) -> list[str]:
    return [rec("kvio_level", level=lv, io_frac=f, io_mib=int(f * 512), io_ok=1, io_ms=1000 * f, ops=1000,
                elapsed_ms=1000, ops_s=50000 / (1 + 3 * f * slow), kswapd_s=0.1,
                vmstat={"pswpout": int(100 * f), "pswpin": 0, "pgmajfault": 3, "pgfault": 900, "pgscan_kswapd": 200,
                        "pgsteal_kswapd": 150, "pgscan_direct": 0, "pgsteal_direct": 0})
            for lv, f in enumerate((0, 0.2, 0.6, 1.0))]


def forkstorm_lines(cpus: int, per_cpu: float, contentions: int | None) -> list[str]:
    out = [rec("forkstorm_tick", seq=s, t_ms=1000.0 * s, jobs=10 * s, live_workers=cpus, vmstat={"pswpout": s})
           for s in range(3)]
    out.append(rec("forkstorm_done", jobs=30, jobs_per_min=per_cpu * cpus, per_worker=[3] * cpus))
    out.append(rec("metric", name="forkstorm.jobs_per_min", value=per_cpu * cpus, unit="jobs/min"))
    if contentions is not None:
        out.append(rec("lockstat", phase="run", classes=2, top=[
            {"class": "&anon_vma->rwsem", "contentions": contentions, "con_bounces": 1},
            {"class": "ptlock_ptr(page)", "contentions": contentions // 2, "con_bounces": 1}]))
    return out


def build_db(path: Path) -> dict:
    """A study of every figure's experiment, one failed run and one entry still pending."""
    con = db.connect(path)
    gs8, x2 = T.load("gs1280-8"), T.load("x86-2s")
    small, gs16 = T.load(str(REPO / "tests/data/x86-2s-small.toml")), T.load("gs1280-16")  # 4 and 16 CPUs
    mp = json.dumps(MEMEATER, sort_keys=True)
    ids = {
        "mem_vanilla": store(con, gs8, memeater_lines(gs8, 2048, 1.0), params_json=mp),
        "mem_zra": store(con, gs8, memeater_lines(gs8, 8192, 1.5), params_json=mp, patch_set="zone-reclaim-auto"),
        "mem_failed": store(con, gs8, memeater_lines(gs8, 2048, 1.0, chunks=4, cycles=1), status="failed",
                            reason="guest panicked", params_json=mp, patch_set="kswapd-no-backoff"),
        "lat_gs8": store(con, gs8, latprobe_lines(gs8), experiment="latprobe", timing_mode="detailed",
                         params_json='{"cpu": 0}'),
        "lat_x2": store(con, x2, latprobe_lines(x2), experiment="latprobe", params_json='{"cpu": 0}'),
        "kvio_vanilla": store(con, x2, kvio_lines(1.0), experiment="kvio"),
        "kvio_backoff": store(con, x2, kvio_lines(0.5), experiment="kvio", patch_set="kswapd-no-backoff"),
    }
    for topo in (small, x2, gs16):
        for kernel, flavor, per_cpu, lock in (("vanilla", "default", 60.0, None), ("vanilla", "lockstat", 50.0, 900),
                                              ("rmap-lock-blocking", "lockstat", 70.0, 300)):
            ids[f"fork_{topo.name}_{kernel}_{flavor}"] = store(
                con, topo, forkstorm_lines(topo.cpus, per_cpu, lock and lock * topo.cpus), experiment="forkstorm",
                patch_set=kernel, kernel_flavor=flavor)
    model_phases(con, ids["lat_gs8"], gs8)
    with con:
        sid = con.execute("INSERT INTO studies (name, path, sha256, toml, created_at) VALUES "
                          "('all-figures', 'studies/all.toml', 'ab12cd34ef56', 'name = \"all-figures\"', 'now')"
                          ).lastrowid
        for pos, (key, rid) in enumerate(ids.items()):
            status = con.execute("SELECT status FROM runs WHERE id = ?", (rid,)).fetchone()[0]
            insert(con, "study_runs", {"study_id": sid, "key": key, "position": pos, "axes_json": "{}",
                                       "spec_json": "{}", "status": status, "run_id": rid, "attempts": 1,
                                       "executed_on": f"worker-{pos % 2}@tcp://10.0.0.{pos % 2 + 5}",
                                       "updated_at": "now"})
        insert(con, "study_runs", {"study_id": sid, "key": "later", "position": 99, "axes_json": "{}",
                                   "spec_json": "{}", "status": "pending", "run_id": None})
    con.close()
    return {"study": sid, **ids}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    ids = build_db(tmp / "r.db")
    assert report.main(["--study", str(ids["study"]), "--db", str(tmp / "r.db")]) == 0
    return tmp, ids, tmp / "report" / f"r-study-{ids['study']}"


EXPECTED = ("fig-memeater-chunks-1", "fig-memeater-free-1", "fig-latprobe", "fig-kvio", "fig-forkstorm")


def figure_blocks(page: str) -> dict[str, str]:
    return dict(re.findall(r'<figure id=([\w-]+)>(.*?)</figure>', page, re.S))


def test_page_figures_and_images_on_disk(built):
    _, ids, out = built
    page = (out / "index.html").read_text()
    for name in EXPECTED:
        assert (out / f"{name}.png").stat().st_size > 5000, name
        assert (out / f"{name}.svg").read_text().lstrip().startswith("<?xml"), name
        assert f'href="{name}.svg"' in page
    srcs = re.findall(r'<img src="([^"]+)"', page)
    assert sorted(srcs) == sorted(f"{n}.png" for n in EXPECTED)
    assert all((out / s).is_file() for s in srcs)
    assert "http" not in "".join(re.findall(r'(?:src|href)="([^"]+)"', page))  # self-contained


def test_each_experiment_draws_its_own_figures_in_the_report_order(built):
    """experiments/<name>/plots.py, found through analysis/experiment_results.py's plots_module():
    memeater's and latprobe's figures before the kernel-comparison tables,
    kvio's and forkstorm's after, in that order."""
    mine = {p: [(exp, f"{fn.__module__}.{fn.__name__}") for exp, fn in plots.builders(p)] for p in plots.PLACES}
    assert mine == {"before": [("memeater", "experiments.memeater.plots.memeater_chunks"),
                               ("memeater", "experiments.memeater.plots.memeater_free"),
                               ("latprobe", "experiments.latprobe.plots.latprobe")],
                    "after": [("kvio", "experiments.kvio.plots.kvio"),
                              ("forkstorm", "experiments.forkstorm.plots.forkstorm")]}
    _, _, out = built
    page = (out / "index.html").read_text()
    assert re.findall(r"<figure id=([\w-]+)>", page) == list(EXPECTED)
    assert page.index("<figure id=fig-latprobe>") < page.index("<section class=compare") \
        < page.index("<figure id=fig-kvio>")
    # no such experiment, a name that is no experiment's, or one without figures of its own
    assert all(experiment_results.plots_module(n) is None for n in ("no_such", "lib", "../memeater", "memeater.plots",
                                                                    "", "bwprobe"))


def test_a_misshapen_plots_module_is_one_error_naming_its_file():
    def fake(**over):
        m = types.ModuleType("experiments.fake.plots")
        m.__file__ = "experiments/fake/plots.py"
        m.FIGURES, m.PLACE, m.ORDER = (lambda con, runs, out: [],), "after", 5
        for k, v in over.items():
            setattr(m, k, v)
        return m

    assert plots.declared(fake())[1:] == ("after", 5)
    for over, msg in (({"FIGURES": ()}, "FIGURES: expected a tuple of figure builders"),
                      ({"FIGURES": (print, 3)}, "FIGURES: expected a tuple of figure builders"),
                      ({"FIGURES": (lambda con, runs: [],)}, r"FIGURES: <lambda>: expected a function of \(con, runs, "
                                                             r"out\)"),
                      ({"PLACE": "middle"}, "PLACE: expected one of 'before', 'after', got 'middle'"),
                      ({"ORDER": "1"}, "ORDER: expected an int, got '1'"), ({"ORDER": True}, "ORDER: expected an int"),
                      ({"ORDER": None}, "ORDER: expected an int, got None")):  # None: as if it were not declared
        with pytest.raises(experiments.ExperimentError, match=r"^experiments/fake/plots.py: " + msg):
            plots.declared(fake(**over))


def test_captions_name_runs_and_the_sql_that_ran(built):
    _, ids, out = built
    figs = figure_blocks((out / "index.html").read_text())
    mem = figs["fig-memeater-chunks-1"]
    assert f"Runs: {ids['mem_vanilla']}, {ids['mem_zra']}." in mem
    # the statement as SQLite ran it, ids filled in; the failed run is not drawn
    assert (f"FROM chunk_times WHERE run_id IN ({ids['mem_vanilla']}, {ids['mem_zra']}) ORDER BY run_id, cycle, "
            "chunk;</pre>") in mem
    assert f"node_free WHERE run_id IN ({ids['mem_vanilla']}, {ids['mem_zra']})" in figs["fig-memeater-free-1"]
    lat = figs["fig-latprobe"]
    assert "FROM records WHERE run_id IN" in lat and "FROM timing_phases WHERE run_id = %d" % ids["lat_gs8"] in lat
    assert "repro_lockstat" in figs["fig-forkstorm"] and "kvio_levels" in figs["fig-kvio"]


def test_runs_table_says_where_each_run_executed_and_lists_the_failed(built):
    _, ids, out = built
    page = (out / "index.html").read_text()
    table = re.search(r"<table id=runs>(.*?)</table>", page, re.S).group(1)
    rows = {int(m.group(1)): m.group(0) for m in re.finditer(r"<tr class=\w+><td class=num>(\d+)</td>.*?</tr>", table)}
    assert set(rows) == {v for k, v in ids.items() if k != "study"}
    failed = rows[ids["mem_failed"]]
    assert "<td>failed</td>" in failed and "guest panicked" in failed and "class=failed" in failed
    assert "worker-0@tcp://10.0.0.5" in rows[ids["mem_vanilla"]] and "<td>h</td>" in rows[ids["mem_vanilla"]]
    assert "worker-1@tcp://10.0.0.6" in rows[ids["mem_zra"]]
    assert "1 pending" in page  # the study entry without a run


def test_compare_tables_per_kernel_group(built):
    _, ids, out = built
    page = (out / "index.html").read_text()
    tables = re.findall(r"<section class=compare id=compare-\d+>(.*?)</section>", page, re.S)
    heads = [re.search(r"<h3>(.*?)</h3>", t).group(1) for t in tables]
    # memeater vanilla vs zone-reclaim-auto (the failed run stays out), kvio, and a
    # forkstorm lockstat pair per topology; the default-flavor forkstorm runs have no partner
    assert len(tables) == 5, heads
    assert sum("forkstorm" in h and "flavor lockstat" in h for h in heads) == 3
    mem = next(t for t in tables if "memeater" in t)
    assert f"zone-reclaim-auto (run {ids['mem_zra']})" in mem and f"run {ids['mem_failed']})" not in mem
    # a headline figure (bold, first) judged as memeater's manifest declares it: lower is better
    row = re.search(r"<tr><td><b>memeater.total_ms</b> \[ms\]</td>(.*?)</tr>", mem).group(1)
    assert re.findall(r"<td class=num>(.*?)</td>", row) == ["123", "184.50", "+50.00% worse"]
    assert "vmstat.pswpout" in mem and "FROM v_vmstat_delta WHERE run_id = %d" % ids["mem_zra"] in mem


def test_free_matrix_is_node_by_chunk_sequence(built):
    tmp, ids, _ = built
    con = db.connect(tmp / "r.db", readonly=True)
    rows = con.execute(memeater_plots.FREE_SQL.format(ids=ids["mem_vanilla"])).fetchall()
    m, where = memeater_plots.free_matrix(rows, 8)
    assert m.shape == (8, 3 * 16)
    assert where[0] == (0, 0) and where[16] == (1, 0) and where[-1] == (2, 15)
    seq20 = {r["node"]: r["free_kib"] for r in rows if r["seq"] == 20}
    assert [m[n, 20] for n in range(8)] == [seq20[n] / 1024 for n in range(8)]
    # nodes fill in hop order from CPU 0's node: node 0 first, a 3-hop node not at all
    assert m[0, 1] < m[0, 0] and np.isclose(m[6, -1], 58.0)
    # a node the guest did not sample stays empty, and more nodes than the run's still fit
    m2, _ = memeater_plots.free_matrix([{"seq": 0, "cycle": 0, "chunk": 0, "node": 9, "free_kib": 2048}], 8)
    assert m2.shape == (10, 1) and m2[9, 0] == 2.0 and np.isnan(m2[0, 0])


def test_chunk_hops_come_from_the_runs_topology(built):
    tmp, ids, _ = built
    con = db.connect(tmp / "r.db", readonly=True)
    runs = con.execute("SELECT * FROM runs WHERE id = ?", (ids["mem_vanilla"],)).fetchall()
    s = memeater_plots.chunk_series(con, runs)[ids["mem_vanilla"]]
    hops = T.load("gs1280-8").hops[0]
    mains = [x[0] for x in con.execute("SELECT main_node FROM chunk_times WHERE run_id = ? ORDER BY cycle, chunk",
                                       (ids["mem_vanilla"],))]
    assert s["hops"] == [hops[n] for n in mains] and set(s["hops"]) == {0, 1, 2}
    assert s["cycle_starts"] == [0, 16, 32] and s["seq"] == list(range(48))
    # unpinned (cpu -1): no CPU node, so no hops rather than wrong ones
    assert plot_kit.hops_from_cpu({**dict(runs[0]), "params_json": '{"cpu": -1}'}) is None


def test_latency_lines_per_topology(built):
    tmp, ids, _ = built
    con = db.connect(tmp / "r.db", readonly=True)
    runs = con.execute("SELECT * FROM runs WHERE experiment = 'latprobe'").fetchall()
    data = latprobe_plots.latency_by_hops(con, runs)
    assert set(data) == {"gs1280-8", "x86-2s"}
    gs = data["gs1280-8"]["load"]
    assert gs["topology"][3] == [72.0 + 3 * 21.6]           # node 6: 3 hops from node 0
    assert gs["guest"][3][0] == pytest.approx((72.0 + 3 * 21.6) * 1.07)
    assert gs["timing model"][3][0] == pytest.approx((72.0 + 3 * 21.6) * 1.03)
    assert "timing model" not in data["x86-2s"]["load"]    # timing off: no model line
    x = data["x86-2s"]["xfer"]
    assert set(x["guest"]) == {0, 1} and x["guest"][1][0] == pytest.approx(1.1 * x["topology"][1][0])


def test_forkstorm_lines_per_kernel_against_cpus(built):
    tmp, ids, _ = built
    con = db.connect(tmp / "r.db", readonly=True)
    fork = [v for k, v in ids.items() if k.startswith("fork_")]
    rows = con.execute(forkstorm_plots.FORKSTORM_SQL.format(ids=plot_kit.id_list(fork))).fetchall()
    jobs, locks = plot_kit.lines(rows, "cpus", "jobs_per_min"), plot_kit.lines(rows, "cpus", "contentions")
    assert jobs["vanilla"]["x"] == [4, 8, 16] and jobs["vanilla"]["y"] == [240, 480, 960]
    assert jobs["rmap-lock-blocking (lockstat)"]["y"] == [280, 560, 1120]
    # contentions: the two classes of each run's lockstat record, summed; none without LOCK_STAT
    assert locks["vanilla (lockstat)"]["y"] == [900 * c * 1.5 for c in (4, 8, 16)]
    assert set(locks) == {"vanilla (lockstat)", "rmap-lock-blocking (lockstat)"}


def chromium(*args, tmp: Path) -> subprocess.CompletedProcess:
    assert Path(CHROMIUM).is_file(), "chromium missing: apt-get install -y --no-install-recommends chromium"
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                           "--no-first-run", "--disable-background-networking", "--disable-component-update",
                           "--disable-sync", f"--user-data-dir={tmp}", "--virtual-time-budget=5000", *args],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.browser
def test_headless_chromium_loads_every_image(built, tmp_path):
    _, _, out = built
    dom = chromium("--dump-dom", (out / "index.html").as_uri(), tmp=tmp_path / "profile").stdout
    assert f'data-images="{len(EXPECTED)}/{len(EXPECTED)} loaded"' in dom, dom[-2000:]
    assert 'data-images-ok="1"' in dom
    shot = tmp_path / "shot.png"
    chromium(f"--screenshot={shot}", "--window-size=1400,3000", (out / "index.html").as_uri(),
             tmp=tmp_path / "profile2")
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", data[16:24]) == (1400, 3000)
    assert len(data) > 100_000  # figures, not a blank page


@pytest.mark.browser
def test_headless_chromium_reports_a_missing_image(built, tmp_path):
    _, ids, out = built
    broken = tmp_path / "copy"
    broken.mkdir()
    for f in out.iterdir():
        if f.name != "fig-kvio.png":
            (broken / f.name).write_bytes(f.read_bytes())
    dom = chromium("--dump-dom", (broken / "index.html").as_uri(), tmp=tmp_path / "profile").stdout
    n = len(EXPECTED)
    assert f'data-images="{n - 1}/{n} loaded"' in dom and "data-images-ok" not in dom


def test_runs_mode_default_folder_and_only_their_figures(built, capsys):
    tmp, ids, _ = built
    a, b = ids["kvio_vanilla"], ids["kvio_backoff"]
    assert report.main(["--runs", str(a), str(b), "--db", str(tmp / "r.db")]) == 0
    index = tmp / "report" / f"r-runs-{a}-{b}" / "index.html"
    # another database in the same folder has its own study 1 and its own report
    assert report.default_out(tmp / "other.db", 1, []) != report.default_out(tmp / "r.db", 1, [])
    assert capsys.readouterr().out.strip() == str(index)
    page = index.read_text()
    assert re.findall(r'<img src="([^"]+)"', page) == ["fig-kvio.png"]
    assert page.count("<section class=compare") == 1
    # executed_on is found through whichever study ran the run, even when chosen by id
    assert "<td>worker-1@tcp://10.0.0.6</td><td>h</td>" in page and "all-figures" not in page


def bad(args, capsys) -> str:
    assert report.main(args) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: "), err
    return err


def test_bad_input_one_line_exit_2(built, tmp_path, capsys):
    tmp, ids, _ = built
    dbp = str(tmp / "r.db")
    assert "no study 999" in bad(["--study", "999", "--db", dbp], capsys)
    assert "no run 999" in bad(["--runs", str(ids["kvio_vanilla"]), "999", "--db", dbp], capsys)
    assert "no results database" in bad(["--study", "1", "--db", str(tmp_path / "none.db")], capsys)
    con = db.connect(tmp_path / "empty.db")
    with con:
        con.execute("INSERT INTO studies (name, sha256, toml, created_at) VALUES ('s', 'x', '', 'now')")
    assert "has no runs yet" in bad(["--study", "1", "--db", str(tmp_path / "empty.db")], capsys)
    assert "one of the arguments --study --runs is required" in bad(["--db", dbp], capsys)
    assert not (tmp_path / "report").exists()


def test_cli_dispatch(built, tmp_path):
    tmp, _, _ = built
    r = vmlab(ENV, tmp, "report", "--study", "999", runs_dir=False, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [f"error: {tmp / 'r.db'}: no study 999"]


def test_headline_figures_aggregate_repeats_as_declared(tmp_path):
    """analysis/headlines.py: the manifest's headline figures, a row per
    configuration; runs repeating one configuration aggregate as declared."""
    from analysis import headlines
    con = db.connect(tmp_path / "h.db")
    x2 = T.load("x86-2s")
    a = store(con, x2, forkstorm_lines(x2.cpus, 30.0, None), experiment="forkstorm")
    b = store(con, x2, forkstorm_lines(x2.cpus, 45.0, None), experiment="forkstorm")   # a repeat of a
    c = store(con, x2, forkstorm_lines(x2.cpus, 60.0, None), experiment="forkstorm", patch_set="rmap-lock-blocking")
    store(con, x2, forkstorm_lines(x2.cpus, 99.0, None), experiment="forkstorm", status="failed", reason="x")
    runs = con.execute("SELECT * FROM runs ORDER BY id").fetchall()
    (t,) = headlines.tables(con, runs)
    assert t.experiment == "forkstorm" and t.figures == ["forkstorm.jobs_per_min"]
    assert t.aggregates == {"forkstorm.jobs_per_min": "mean"} and t.units["forkstorm.jobs_per_min"] == "jobs/min"
    (conf1, ids1, (cell1,)), (conf2, ids2, (cell2,)) = t.rows
    assert ids1 == [a, b] and conf1["patch_set"] == "vanilla"
    n = x2.cpus  # jobs_per_min = per-CPU rate x CPUs
    assert (cell1.value, cell1.low, cell1.high, cell1.n) == (37.5 * n, 30.0 * n, 45.0 * n, 2)
    assert ids2 == [c] and cell2.n == 1 and cell2.value == 60.0 * n
    page = report.headlines_html(con, runs)
    assert "forkstorm: headline figures" in page and f"{37.5 * n:g} ({30 * n:g} to {45 * n:g}, n=2)" in page


def test_headline_rows_that_differ_in_parameters_say_which(tmp_path):
    """Two configurations of one kernel that differ in a parameter (a study's
    axis over it) are told apart by a parameters column, in the HTML report
    as on a Markdown page; the column is left out when nothing differs."""
    con = db.connect(tmp_path / "h.db")
    x2 = T.load("x86-2s")
    for d in (0.5, 1.0):
        store(con, x2, forkstorm_lines(x2.cpus, 30.0 * d, None), experiment="forkstorm",
              params_json=json.dumps({"duration_s": d, "children": 4}))
    runs = con.execute("SELECT * FROM runs ORDER BY id").fetchall()
    page = report.headlines_html(con, runs)
    assert "<th>parameters</th>" in page and "<td>duration_s=0.5</td>" in page and "<td>duration_s=1.0</td>" in page
    assert "children=" not in page
    assert "<th>parameters</th>" not in report.headlines_html(con, runs[:1])


def test_the_report_shows_headline_figures(built):
    _, _, out = built
    page = (out / "index.html").read_text()
    assert "<h2>Headline figures</h2>" in page and "forkstorm.jobs_per_min [jobs/min], mean" in page


def test_a_markdown_results_page_says_how_its_figures_were_made(tmp_path):
    """--page: a generated docs/results page: the command, the study, the
    engine and kernels from the run rows, the runs, the headline figures
    with repeats aggregated; the HTML report is not written."""
    con = db.connect(tmp_path / "h.db")
    x2 = T.load("x86-2s")
    a = store(con, x2, forkstorm_lines(x2.cpus, 30.0, None), experiment="forkstorm")
    b = store(con, x2, forkstorm_lines(x2.cpus, 45.0, None), experiment="forkstorm",
              engine_version="QEMU 10.0.2 + vmlab series 0123456789ab")
    f = store(con, x2, forkstorm_lines(x2.cpus, 99.0, None), experiment="forkstorm", status="failed", reason="x|y")
    r = store(con, x2, forkstorm_lines(x2.cpus, 50.0, None), experiment="forkstorm", start="restored")
    con.close()
    out = tmp_path / "docs" / "results" / "fork.md"
    assert report.main(["--runs", str(a), str(b), str(f), str(r), "--db", str(tmp_path / "h.db"),
                        "--page", str(out)]) == 0
    text = out.read_text()
    assert not (tmp_path / "report").exists()
    assert text.startswith("# Results: runs\n") and pages.GENERATED in text
    assert f"| command | `./run.py report --runs {a} {b} {f} {r} --db {tmp_path / 'h.db'} --page {out}` |" in text
    assert "| runs | 4 (3 ok), started " in text and "| start | booted (3); restored (1) |" in text
    # two engine versions among the runs: each named with its count
    eng = next(line for line in text.splitlines() if line.startswith("| engine |"))
    assert "QEMU 10.0.2 + vmlab series 0123456789ab (1)" in eng and "10.0.2 (3)" in eng
    assert f"| {f} | failed | x86-2s | forkstorm |" in text and "x/y" in text  # a cell never splits the table
    n = x2.cpus
    row = next(line for line in text.splitlines() if line.startswith("| x86-2s | vanilla | default | off | booted |"))
    assert f"{37.5 * n:g} ({30 * n:g} to {45 * n:g}, n=2)" in row and f"| {a}, {b} |" in row
    # a restored run is another configuration than the booted ones, not a repeat of them
    row = next(line for line in text.splitlines() if line.startswith("| x86-2s | vanilla | default | off | restored |"))
    assert f"| {r} | {50 * n:g} |" in row
