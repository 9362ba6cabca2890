"""The profile on the guest clock without QEMU (analysis/profile.py): a
synthetic profile.json of two CPUs, stored through ingest() into a fresh
database, its check against the clocks, `./run.py profile`'s table, callers,
folded stacks and one-line errors, the flame graph's SVG, the report's
section and compare's symbols that moved."""
import hashlib
import json
import xml.etree.ElementTree as ET

import pytest

import topologies as T
from analysis import compare, db, flamegraph, profile, profile_report
from analysis.rows import insert
from protocol import facts, records
from tests.e2e import ENV, vmlab
from tests.runrows import run_end, run_start

PHASE_ID = min(facts.PHASES)
PHASE = facts.PHASES[PHASE_ID]
CLOCKS = [(0, 7500, 0, 18_000_000), (1, 2000, 0, 4_203_000)]  # (cpu, insns, stall_ps, clock_ps) at exit


def sym(cpu, phase, name, dso, insns, mem=0, core=0, lock=0, fetch=0, pause=0, pauses=0):
    return {"cpu": cpu, "phase": phase, "symbol": name, "dso": dso, "insns": insns, "insn_ps": insns * 500,
            "core_ps": core, "mem_ps": mem, "lock_ps": lock, "fetch_ps": fetch, "pause_ps": pause, "pauses": pauses}


def synthetic(spin_pause=3_000_000) -> dict:
    """CPU 0 in the phase and out of it, ending halted (its last 0.5 us idle);
    CPU 1 outside every phase, started later, with a little drift. A
    symbol's time is its six columns; a CPU's accounted_ps is its symbols'
    time + idle + drift. Call paths: the kernel's, and one user sample."""
    symbols = [sym(0, 0, "memset", "memeater", 1000, mem=2_000_000),                    # 2.5 us
               sym(0, 1, "memset", "memeater", 4000, mem=6_000_000),                    # 8 us
               sym(0, 1, "_raw_spin_lock", "[kernel]", 2000, mem=500_000, lock=500_000, pause=spin_pause, pauses=100),
               sym(0, 1, "clear_page_erms", "[kernel]", 500, mem=750_000),              # 1 us
               sym(1, 0, "_raw_spin_lock", "[kernel]", 1000, pause=1_500_000, pauses=50),  # 2 us
               sym(1, 0, "shrink_page_list", "[kernel]", 600, core=200_000, mem=500_000),  # 1 us
               sym(1, 0, "shrink_page_list", "[kernel]", 400)]                          # a repeated name: 0.2 us
    busy = {c: sum(s["insn_ps"] + s["core_ps"] + s["mem_ps"] + s["lock_ps"] + s["fetch_ps"] + s["pause_ps"]
                   for s in symbols if s["cpu"] == c) for c in (0, 1)}
    return {"format": 1, "pause_extra_ps": 30_000, "sample_ps": 250_000_000,
            "phases": [{"index": 1, "id": PHASE_ID, "instance": 0}],
            "cpus": [{"cpu": 0, "started": 1, "start_ps": 0, "accounted_ps": busy[0] + 1_000_000, "idle_ps": 1_000_000,
                      "drift_ps": 0, "insns": 7500, "halted_at_exit": 1, "samples": 16, "sample_failures": 1},
                     {"cpu": 1, "started": 1, "start_ps": 1_000_000, "accounted_ps": busy[1] + 1000, "idle_ps": 0,
                      "drift_ps": 1000, "insns": 2000, "halted_at_exit": 0, "samples": 12, "sample_failures": 0}],
            "symbols": symbols,
            "stacks": [{"cpu": 0, "phase": 0, "stack": "[memeater];memset", "ps": 2_000_000, "samples": 8},
                       {"cpu": 0, "phase": 1, "stack": "handle_mm_fault;clear_page_erms", "ps": 1_000_000,
                        "samples": 4},
                       {"cpu": 0, "phase": 1, "stack": "handle_mm_fault;do_anon;_raw_spin_lock", "ps": 3_000_000,
                        "samples": 12},
                       {"cpu": 1, "phase": 0, "stack": "kswapd;shrink_node;shrink_page_list;_raw_spin_lock",
                        "ps": 2_000_000, "samples": 8},
                       {"cpu": 1, "phase": 0, "stack": "kswapd;shrink_node;shrink_page_list", "ps": 1_000_000,
                        "samples": 4}]}


def add_run(con, tmp_path, prof: dict | None, patch_set="vanilla", clocks=CLOCKS, **over) -> int:
    """A stored run (no records) and, with prof, its profile.json ingested with the clocks."""
    topo = T.load("x86-2s")
    rid = db.start_run(con, run_start(topo, patch_set=patch_set, timing_mode="detailed", **over))
    db.finish_run(con, rid, run_end(), records.parse_bytes(b""), topo)
    if prof is not None:
        path = tmp_path / f"profile-{rid}.json"
        path.write_text(json.dumps(prof))
        with con:
            insert(con, "vcpu_clocks", [{"run_id": rid, "cpu": c, "insns": n, "stall_ps": s, "clock_ps": ps}
                                        for c, n, s, ps in clocks])
            assert profile.ingest(con, rid, path, clocks)
    return rid


@pytest.fixture
def stored(tmp_path):
    con = db.connect(tmp_path / "r.db")
    return con, add_run(con, tmp_path, synthetic())


def rows_of(text: str) -> list[list[str]]:
    """The table's rows (after its dashed rule), split at runs of 2+ spaces."""
    import re
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("---"))
    return [re.split(r"\s{2,}", ln.strip()) for ln in lines[start + 1:] if ln.strip() and not ln.startswith("(")]


# --- ingest and the check -------------------------------------------------------------------
def test_ingest_stores_cpus_symbols_and_stacks(stored):
    con, rid = stored
    cpus = [dict(r) for r in con.execute("SELECT * FROM profile_cpus WHERE run_id = ? ORDER BY cpu", (rid,))]
    # CPU 0 ended halted: the 0.5 us after the plugin's last look is idle; CPU 1 did not: it is drift
    assert [(c["cpu"], c["start_ps"], c["clock_ps"], c["idle_ps"], c["drift_ps"], c["insns"]) for c in cpus] == [
        (0, 0, 18_000_000, 1_500_000, 0, 7500), (1, 1_000_000, 4_203_000, 0, 3000, 2000)]
    assert [(c["samples"], c["sample_failures"], c["halted_at_exit"]) for c in cpus] == [(16, 1, 1), (12, 0, 0)]
    syms = {(r["cpu"], r["phase"], r["symbol"]): dict(r) for r in con.execute(
        "SELECT * FROM profile_symbols WHERE run_id = ?", (rid,))}
    assert len(syms) == 6  # shrink_page_list's two rows (a repeated name) are one
    spl = syms[(1, 0, "shrink_page_list")]
    assert (spl["insns"], spl["insn_ps"], spl["core_ps"], spl["time_ps"]) == (1000, 500_000, 200_000, 1_200_000)
    spin = syms[(0, 1, "_raw_spin_lock")]
    assert (spin["phase_name"], spin["phase_instance"], spin["pauses"], spin["pause_ps"], spin["lock_ps"],
            spin["time_ps"]) == (PHASE, 0, 100, 3_000_000, 500_000, 5_000_000)
    assert syms[(0, 0, "memset")]["phase_name"] is None and syms[(0, 0, "memset")]["dso"] == "memeater"
    stacks = con.execute("SELECT cpu, phase, phase_name, stack, ps, samples FROM profile_stacks WHERE run_id = ? "
                         "ORDER BY cpu, stack", (rid,)).fetchall()
    assert (0, 1, PHASE, "handle_mm_fault;do_anon;_raw_spin_lock", 3_000_000, 12) in [tuple(s) for s in stacks]
    assert (0, 0, None, "[memeater];memset", 2_000_000, 8) in [tuple(s) for s in stacks]
    assert len(stacks) == 5
    got = {r["name"]: r["value"] for r in con.execute("SELECT name, value FROM metrics WHERE run_id = ?", (rid,))}
    assert got["profile.sample_ps"] == 250_000_000 and got["profile.pause_extra_ps"] == 30_000
    share = con.execute("SELECT share_pct FROM v_profile WHERE run_id = ? AND symbol = 'memset'", (rid,)).fetchone()
    assert share[0] == pytest.approx(100 * 10_500_000 / 21_203_000)


def test_the_check_holds_per_cpu(stored):
    con, rid = stored
    checks = profile.check(con, rid)
    assert [c.cpu for c in checks] == [0, 1]
    c0, c1 = checks
    assert (c0.clock_ps, c0.symbols_ps + c0.idle_ps, c0.rows_gap_ps) == (18_000_000, 18_000_000, 0)
    assert c1.time_error == pytest.approx(-3000 / 3_203_000)  # the drift, under 0.1 %
    assert (c1.insns, c1.counted_insns, c1.vcpu_insns) == (2000, 2000, 2000)
    assert all(c.ok() for c in checks), [c.problems() for c in checks]


def test_the_check_fails_on_a_corrupt_number(tmp_path):
    con = db.connect(tmp_path / "r.db")
    bad_sym = synthetic()
    bad_sym["symbols"][3]["mem_ps"] += 1_000_000  # the columns no longer add up to accounted_ps
    bad_clock = [(0, 7500, 0, 18_000_000), (1, 2000, 0, 4_253_000)]  # 50 us of CPU 1 nothing explains
    bad_insns = [(0, 7600, 0, 18_000_000), (1, 2000, 0, 4_203_000)]  # the engine counted 100 more
    a = add_run(con, tmp_path, bad_sym)
    b = add_run(con, tmp_path, synthetic(), clocks=bad_clock)
    c = add_run(con, tmp_path, synthetic(), clocks=bad_insns)
    d = add_run(con, tmp_path, synthetic(), clocks=bad_insns, start="restored")
    pa = profile.check(con, a)[0].problems()
    assert len(pa) == 2 and "miss the clock by -1,000,000 ps" in pa[0] and "% off the clock" in pa[1]
    pb = profile.check(con, b)
    assert pb[0].ok() and not pb[1].ok() and "% off the clock" in pb[1].problems()[0]
    pc = profile.check(con, c)[0].problems()
    assert pc == ["cpu 0: 7,500 instructions attributed, the engine counted 7,600"]
    # a restored run's engine count holds the snapshot's life too: fewer attributed is right, more is not
    assert all(x.ok() for x in profile.check(con, d))


def test_ingest_without_a_file_or_with_a_bad_one_stores_nothing(tmp_path, capsys):
    con = db.connect(tmp_path / "r.db")
    rid = add_run(con, tmp_path, None)
    assert profile.ingest(con, rid, tmp_path / "nothing.json", CLOCKS) is False
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**synthetic(), "format": 2}))
    assert profile.ingest(con, rid, bad, CLOCKS) is False
    bad.write_text('{"format": 1, "cpus": [')
    assert profile.ingest(con, rid, bad, CLOCKS) is False
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(str(bad) in ln and "not stored" in ln for ln in err)
    assert con.execute("SELECT COUNT(*) FROM profile_cpus").fetchone()[0] == 0


def test_a_cpu_the_profile_never_started_has_an_empty_stretch(tmp_path):
    con = db.connect(tmp_path / "r.db")
    prof = synthetic()
    prof["cpus"].append({"cpu": 2, "started": 0, "start_ps": 0, "accounted_ps": 0, "idle_ps": 0, "drift_ps": 0,
                         "insns": 0, "halted_at_exit": 0, "samples": 0, "sample_failures": 0})
    rid = add_run(con, tmp_path, prof, clocks=CLOCKS + [(2, 0, 0, 9_000_000)])
    row = con.execute("SELECT start_ps, clock_ps, idle_ps, drift_ps FROM profile_cpus WHERE run_id = ? AND cpu = 2",
                      (rid,)).fetchone()
    assert tuple(row) == (9_000_000, 9_000_000, 0, 0)
    assert all(c.ok() for c in profile.check(con, rid))


# --- what ./run.py profile prints ------------------------------------------------------------
def test_render_ranks_symbols_by_share_with_idle_and_drift(stored):
    con, rid = stored
    out = profile.render(con, rid)
    assert "CPU time 0.021 ms" in out and "idle 7.07 %" in out
    rows = rows_of(out)
    assert [r[2] for r in rows[:4]] == ["memset", "_raw_spin_lock", "shrink_page_list", "clear_page_erms"]
    assert rows[0][:4] == ["49.52", "9.43", "memset", "memeater"]  # its user samples: the symbol alone
    assert rows[1][:2] == ["33.01", "23.58"]  # self, and the sampled paths through it
    handle = next(r for r in rows if r[2] == "handle_mm_fault")  # a caller with no time of its own
    assert handle[:2] == ["0.00", "18.87"]
    assert rows[-2][1:3] == ["[idle]", "-"] and rows[-2][0] == "7.07"
    assert rows[-1][1] == "[drift]"
    by_children = rows_of(profile.render(con, rid, sort="children"))
    assert [r[2] for r in by_children[:2]] == ["_raw_spin_lock", "handle_mm_fault"]
    pct = rows_of(profile.render(con, rid, percent=True))
    assert pct[1][-6:] == ["21.43", "0.00", "7.14", "7.14", "0.00", "64.29"]  # spin lock: 64 % of it is PAUSE


def test_render_narrows_to_a_cpu_and_a_phase(stored):
    con, rid = stored
    cpu1 = rows_of(profile.render(con, rid, cpu=1))
    assert [r[2] for r in cpu1[:2]] == ["_raw_spin_lock", "shrink_page_list"]
    assert cpu1[0][0] == f"{100 * 2_000_000 / 3_203_000:.2f}"
    phase = profile.render(con, rid, phase=PHASE)
    assert "[idle]" not in phase and "not per phase" in phase
    assert [r[2] for r in rows_of(phase)[:3]] == ["memset", "_raw_spin_lock", "clear_page_erms"]
    assert profile.render(con, rid, phase="1") == phase.replace(f"phase {PHASE} (1 instance)",
                                                                 f"phase 1 ({PHASE})")
    outside = rows_of(profile.render(con, rid, phase=0))
    assert {r[2] for r in outside} >= {"memset", "_raw_spin_lock", "shrink_page_list"}
    assert "clear_page_erms" not in {r[2] for r in outside}
    assert len(rows_of(profile.render(con, rid, limit=2))) == 4  # two symbols, idle, drift
    assert "(6 more symbols:" in profile.render(con, rid, limit=2)


def test_callers_of_a_symbol(stored):
    con, rid = stored
    out = profile.render(con, rid, callers="_raw_spin_lock")
    rows = rows_of(out)
    assert rows == [["14.15", "14.15", "12", "_raw_spin_lock <- do_anon <- handle_mm_fault"],
                    ["9.43", "9.43", "8", "_raw_spin_lock <- shrink_page_list <- shrink_node <- kswapd"]]
    assert "in 23.58 % of the CPU time (20 samples)" in out
    through = rows_of(profile.call_paths(con, rid, "shrink_page_list"))
    assert through == [["14.15", "4.72", "12", "shrink_page_list <- shrink_node <- kswapd"]]
    assert rows_of(profile.call_paths(con, rid, "_raw_spin_lock", cpu=1))[0][-1].endswith("<- kswapd")


def test_folded_lines(stored, tmp_path):
    con, rid = stored
    assert profile.folded(con, rid) == ["[memeater];memset 2000000",
                                        "handle_mm_fault;clear_page_erms 1000000",
                                        "handle_mm_fault;do_anon;_raw_spin_lock 3000000",
                                        "kswapd;shrink_node;shrink_page_list 1000000",
                                        "kswapd;shrink_node;shrink_page_list;_raw_spin_lock 2000000"]
    assert profile.folded(con, rid, phase=PHASE) == profile.folded(con, rid, cpu=0)[1:]
    flat = add_run(con, tmp_path, {**synthetic(), "stacks": []})  # a fast run: no call paths
    assert profile.folded(con, flat, cpu=1) == ["[kernel];_raw_spin_lock 2000000",
                                                "[kernel];shrink_page_list 1200000"]


def test_flame_graph_is_well_formed_svg_with_a_rect_per_frame(stored):
    con, rid = stored
    svg = profile.flamegraph_svg(profile.folded(con, rid), title="run <1> & co")
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    rects = root.findall(f".//{ns}rect")
    # all; [memeater], memset; handle_mm_fault, clear_page_erms, do_anon, _raw_spin_lock; kswapd, shrink_node,
    # shrink_page_list, _raw_spin_lock
    assert len(rects) == 11
    frames = root.findall(f".//{ns}g[@class='frame']")
    tips = [g.find(f"{ns}title").text for g in frames]
    assert tips[0] == "all (0.009 ms, 100.00 %)"
    assert "handle_mm_fault (0.004 ms, 44.44 %)" in tips
    widths = {t.split(" (")[0]: float(g.find(f"{ns}rect").get("width")) for t, g in zip(tips, frames)}
    assert widths["handle_mm_fault"] == pytest.approx(4 / 9 * widths["all"], abs=0.01)
    ys = {t.split(" (")[0]: int(g.find(f"{ns}rect").get("y")) for t, g in zip(tips, frames)}
    assert ys["all"] > ys["kswapd"] > ys["shrink_node"]  # the root at the bottom, callees above
    assert root.find(f"{ns}text").text == "run <1> & co"
    assert len(ET.fromstring(flamegraph.flamegraph_svg([])).findall(f".//{ns}rect")) == 0
    with pytest.raises(ValueError, match="folded line 1"):
        flamegraph.flamegraph_svg(["a;b"])


# --- the CLI ---------------------------------------------------------------------------------
def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def on_disk(tmp_path):
    con = db.connect(tmp_path / "r.db")
    with_profile = add_run(con, tmp_path, synthetic())
    without = add_run(con, tmp_path, None)
    flat = add_run(con, tmp_path, {**synthetic(), "stacks": []})
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    return tmp_path, with_profile, without, flat


def test_the_verb_prints_the_table_callers_and_folded_stacks(on_disk):
    tmp, rid, _, _ = on_disk
    r = vmlab(ENV, tmp, "profile", str(rid), runs_dir=False)
    assert r.returncode == 0, r.stderr
    assert [row[2] for row in rows_of(r.stdout)[:2]] == ["memset", "_raw_spin_lock"]
    r = vmlab(ENV, tmp, "profile", str(rid), "--callers", "_raw_spin_lock", "--cpu", "0", runs_dir=False)
    assert r.returncode == 0 and rows_of(r.stdout) == [["16.67", "16.67", "12",  # of CPU 0's 18 us
                                                        "_raw_spin_lock <- do_anon <- handle_mm_fault"]]
    r = vmlab(ENV, tmp, "profile", str(rid), "--folded", "--phase", PHASE, runs_dir=False)
    assert r.returncode == 0 and r.stdout.splitlines() == ["handle_mm_fault;clear_page_erms 1000000",
                                                           "handle_mm_fault;do_anon;_raw_spin_lock 3000000"]


@pytest.mark.parametrize("args,expect", [
    (["{without}"], "run {without} has no profile (timing detailed"),
    (["99"], "no run 99"),
    (["{rid}", "--cpu", "7"], "--cpu 7: run {rid}'s profile has CPUs 0-1"),
    (["{rid}", "--phase", "nosuch"], f"--phase nosuch: run {{rid}}'s profile has no such phase (indexes 0-1; "
                                     f"names: {PHASE})"),
    (["{rid}", "--phase", "5"], "--phase 5: run {rid}'s profile has no such phase"),
    (["{rid}", "--callers", "nobody_calls_me"], "--callers nobody_calls_me: in no sampled call path of run {rid}"),
    (["{flat}", "--callers", "_raw_spin_lock"], "run {flat} has no call paths"),
    (["{rid}", "--cpu", "x"], "argument --cpu: invalid int value: 'x'"),
    (["{rid}", "--callers", "x", "--folded"], "not allowed with argument"),
])
def test_bad_input_one_line_exit_2_database_unchanged(on_disk, args, expect):
    tmp, rid, without, flat = on_disk
    ids = {"rid": rid, "without": without, "flat": flat}
    before = _digest(tmp / "r.db")
    r = vmlab(ENV, tmp, "profile", *(a.format(**ids) for a in args), runs_dir=False)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and expect.format(**ids) in lines[0], r.stderr
    assert _digest(tmp / "r.db") == before and r.stdout == ""


# --- the report and comparisons --------------------------------------------------------------
def test_compare_shows_the_symbols_that_moved(tmp_path):
    con = db.connect(tmp_path / "r.db")
    base = add_run(con, tmp_path, synthetic())
    spin = synthetic(spin_pause=13_000_000)  # 10 us more spinning on CPU 0, its clock 10 us later
    spin_clocks = [(0, 7500, 0, 28_000_000), CLOCKS[1]]
    other = add_run(con, tmp_path, spin, patch_set="zone-reclaim-auto", clocks=spin_clocks)
    none = add_run(con, tmp_path, None, patch_set="kswapd-no-backoff")
    out = compare.render(con, [base, other])
    part = out[out.index("symbols whose share of CPU time moved most"):]
    rows = rows_of(part)
    assert rows[0][:2] == ["_raw_spin_lock", "[kernel]"]
    new = 100 * 17_000_000 / 31_203_000
    assert rows[0][2:] == [f"{100 * 7_000_000 / 21_203_000:.2f}%", f"{new:.2f}%",
                           f"{new - 100 * 7_000_000 / 21_203_000:+.2f} pp"]
    assert len(rows) <= 10 and rows[1][0] == "memset"
    assert "moved most" not in compare.render(con, [base, none])
    assert "moved most" in profile_report.moved_html(con, con.execute(
        "SELECT * FROM runs WHERE id IN (?, ?) ORDER BY id", (base, other)).fetchall())


def test_report_section_has_the_top_symbols_and_the_flame_graph(stored, tmp_path):
    con, rid = stored
    flat = add_run(con, tmp_path, {**synthetic(), "stacks": []})
    runs = con.execute("SELECT * FROM runs ORDER BY id").fetchall()
    html = profile_report.html_sections(con, runs, tmp_path)
    assert html.startswith("<h2>Profiles</h2>") and html.count("<table class=profile>") == 2
    assert f"<section class=profile id=profile-{rid}>" in html and "<td>_raw_spin_lock</td>" in html
    svg = (tmp_path / f"fig-profile-run-{rid}.svg").read_text()
    assert svg.strip() in html
    assert len(ET.fromstring(svg).findall(".//{http://www.w3.org/2000/svg}rect")) == 11
    flat_svg = ET.fromstring((tmp_path / f"fig-profile-run-{flat}.svg").read_text())
    assert len(flat_svg.findall(".//{http://www.w3.org/2000/svg}rect")) == 1 + 2 + 4  # all, 2 DSOs, 4 symbols
    assert profile_report.html_sections(con, [r for r in runs if r["id"] != rid and r["id"] != flat], tmp_path) == ""
