"""SimPoint's clustering, our implementation (sampling/simpoint.py), on
synthetic basic-block vectors with planted phases: it finds them, the BIC
picks the planted k, each simulation point lies in its phase, weights are
the phases' shares and sum to 1, a seed gives the same picks; the files
are SimPoint 3.2's formats; bad input gets one line, exit 2, no file."""
import numpy as np
import pytest

from sampling import simpoint as sp

# three phases, each running its own blocks (ids) with some noise, in runs
PHASES = {"A": range(1, 9), "B": range(20, 31), "C": range(40, 46)}
PATTERN = ["A"] * 12 + ["B"] * 10 + ["A"] * 8 + ["C"] * 25 + ["B"] * 5 + ["C"] * 5


def bb_text(pattern, seed=7, noise=0.05, jitter=200) -> str:
    rng = np.random.default_rng(seed)
    lines = []
    for ph in pattern:
        ids = list(PHASES[ph])
        counts = {i: int(rng.integers(1000 - jitter, 1000 + jitter)) for i in ids}
        for i in rng.choice(range(1, 50), size=3, replace=False):  # a few stray blocks
            counts[int(i)] = counts.get(int(i), 0) + int(noise * 1000)
        lines.append("T" + "".join(f":{i}:{c} " for i, c in sorted(counts.items())))
    return "\n".join(lines) + "\n"


@pytest.fixture
def bb(tmp_path):
    p = tmp_path / "run.bb"
    p.write_text(bb_text(PATTERN))
    return p


def test_the_planted_phases_are_found_and_weighted(bb):
    picks = sp.cluster(sp.read_bb(bb), max_k=10)
    assert picks.k == 3
    # every phase is one cluster, and every cluster one phase
    by_phase = {ph: {int(picks.labels[i]) for i, p in enumerate(PATTERN) if p == ph} for ph in PHASES}
    assert all(len(c) == 1 for c in by_phase.values()) and len(set.union(*by_phase.values())) == 3
    for ph, (c,) in by_phase.items():
        assert PATTERN[picks.points[c]] == ph                       # the point lies in its phase
        assert picks.weights[c] == pytest.approx(PATTERN.count(ph) / len(PATTERN))
    assert sum(picks.weights) == pytest.approx(1.0)


def test_two_planted_phases_give_two_clusters(tmp_path):
    p = tmp_path / "two.bb"
    pattern = ["A"] * 15 + ["C"] * 20 + ["A"] * 5
    p.write_text(bb_text(pattern))
    picks = sp.cluster(sp.read_bb(p), max_k=8)
    assert picks.k == 2
    assert sorted(picks.weights) == pytest.approx([20 / 40, 20 / 40])
    assert {pattern[i] for i in picks.points} == {"A", "C"}


def test_a_seed_gives_the_same_picks_and_another_projection_the_same_phases(bb):
    vec = sp.read_bb(bb)
    a, b, c = sp.cluster(vec, 10, seed=3), sp.cluster(vec, 10, seed=3), sp.cluster(vec, 10, seed=4)
    assert (a.k, a.points, a.weights) == (b.k, b.points, b.weights)
    assert c.k == 3 and sorted(c.weights) == sorted(a.weights)


def test_the_files_are_simpoint_3_2_s_formats(bb, tmp_path, capsys):
    assert sp.main([str(bb), "--max-k", "10", "--out", str(tmp_path / "out")]) == 0
    points = [tuple(map(int, ln.split())) for ln in (tmp_path / "out.simpoints").read_text().splitlines()]
    weights = [ln.split() for ln in (tmp_path / "out.weights").read_text().splitlines()]
    assert len(points) == len(weights) == 3
    assert sorted(c for _, c in points) == sorted(int(c) for _, c in weights) == [0, 1, 2]
    assert all(0 <= i < len(PATTERN) for i, _ in points)
    assert sum(float(w) for w, _ in weights) == pytest.approx(1.0, abs=1e-5)
    assert "k = 3" in capsys.readouterr().out


@pytest.mark.parametrize("text,why", [
    ("", "empty"),
    ("T:1:5 :2:7 \nT:1:5", "no newline"),
    ("T:1:5 :x:7 \n", "expected ':id:count'"),
    ("T:0:5 \n", "expected ':id:count'"),
    ("T\n", "empty interval"),
    ("X:1:5 \n", "expected 'T:id:count"),
    ("T" + ":1:5 " * 300000 + "\n", "SimPoint 3.2 reads lines under"),
])
def test_bad_vector_files_get_one_line_and_no_output(tmp_path, capsys, text, why):
    p = tmp_path / "bad.bb"
    p.write_text(text)
    assert sp.main([str(p), "--max-k", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert why in err and "\n" not in err and str(p) in err
    assert not list(tmp_path.glob("bad.simpoints*")) and not list(tmp_path.glob("bad.weights*"))


@pytest.mark.parametrize("k", [0, len(PATTERN) + 1])
def test_max_k_outside_one_to_the_intervals_is_refused(bb, capsys, k):
    assert sp.main([str(bb), "--max-k", str(k)]) == 2
    assert "max_k: expected 1.." in capsys.readouterr().err
    assert not list(bb.parent.glob("*.simpoints"))


def test_a_run_s_machine_wide_vectors_give_picks_stored_with_the_run(tmp_path, capsys):
    import topologies
    from analysis import db
    from tests.runrows import run_start
    rdir = tmp_path / "run"
    rdir.mkdir()
    (rdir / "bbv.global.bb").write_text(bb_text(PATTERN))
    dbp = str(tmp_path / "r.db")
    con = db.connect(dbp)
    rid = db.start_run(con, run_start(topologies.load("x86-2s"), timing_mode="fast",
                                      log_path=str(rdir / "console.log")))
    con.close()
    for _ in range(2):  # a second clustering with the same settings replaces the first
        assert sp.main([str(rid), "--db", dbp, "--max-k", "8"]) == 0
    rows = db.connect(dbp).execute("SELECT vectors, k, cluster, interval, weight FROM simpoint_picks "
                                   "WHERE run_id = ? ORDER BY cluster", (rid,)).fetchall()
    assert [r["cluster"] for r in rows] == [0, 1, 2] and {r["k"] for r in rows} == {3}
    assert {r["vectors"] for r in rows} == {"global"} and sum(r["weight"] for r in rows) == pytest.approx(1.0)
    assert (rdir / "bbv.global.simpoints").exists()
    # a run without vectors, or none at all: one line, exit 2, nothing stored
    assert sp.main([str(rid), "--db", dbp, "--vectors", "cpu3"]) == 2
    assert "no bbv.cpu3.bb" in capsys.readouterr().err
    assert sp.main(["99", "--db", dbp]) == 2 and "no run 99" in capsys.readouterr().err
    assert db.connect(dbp).execute("SELECT COUNT(*) FROM simpoint_picks").fetchone()[0] == 3


def test_a_fixed_k_is_kept_and_out_of_range_refused(bb, capsys):
    picks = sp.cluster(sp.read_bb(bb), max_k=2, k=2)
    assert picks.k == 2 and len(picks.bic) == 1 and sum(picks.weights) == pytest.approx(1.0)
    assert sp.main([str(bb), "--k", "0"]) == 2 and "--k: expected 1.." in capsys.readouterr().err


def test_an_estimate_from_the_points_alone_against_every_slice():
    # three phases of different cost per slice: the estimate weights each point by its cluster's share
    pattern = ["A"] * 6 + ["B"] * 3 + ["A"] * 2 + ["C"] * 1
    cost = {"A": 10, "B": 30, "C": 100}
    labels = np.array([{"A": 0, "B": 1, "C": 2}[p] for p in pattern])
    picks = sp.Picks(3, points=[0, 6, 11], weights=[8 / 12, 3 / 12, 1 / 12], labels=labels)
    clock, slices = [0, 0], []
    for ph in pattern:
        clock = [clock[0] + cost[ph], clock[1] + 1]   # CPU 0 runs the phase, CPU 1 idles along
        slices.append({"cpu_time_ps": list(clock), "start_ps": [0, 0]})
    est = sp.estimate(picks, slices)
    assert est["elapsed"]["actual_ps"] == 6 * 10 + 3 * 30 + 2 * 10 + 100
    assert est["elapsed"]["error_pct"] == pytest.approx(0.0)          # each point is its cluster exactly
    # the point of cluster A (slice 0) costlier than its cluster's other slices: the error shows it
    slices2 = [dict(s) for s in slices]
    slices2[0] = {"cpu_time_ps": [20, 1], "start_ps": [0, 0]}
    for s in slices2[1:]:
        s["cpu_time_ps"] = [s["cpu_time_ps"][0] + 10, s["cpu_time_ps"][1]]
    e = sp.estimate(picks, slices2)["elapsed"]
    assert e["estimated_ps"] == pytest.approx(12 * (8 / 12 * 20 + 3 / 12 * 30 + 1 / 12 * 100))
    assert e["error_pct"] > 0
    with pytest.raises(sp.SimpointError, match="detailed run"):
        sp.estimate(picks, [{"cpu_time_ps": [], "start_ps": None}])


def test_the_first_intervals_are_the_vectors_without_the_rest(tmp_path):
    path = tmp_path / "v.bb"
    path.write_text("T:1:5 :2:5\nT:2:10\nT:3:4\n")
    vec = sp.read_bb(path).first(2)
    assert vec.n == 2 and vec.dims == 3
    assert vec.instructions().tolist() == [10, 10]
    assert vec.normalised().shape == (2, 3)


def test_the_slices_file_s_machine_clock_idle_time_and_hop_counts_are_read(tmp_path):
    p = tmp_path / "bbv.global.slices"
    p.write_text("# slice insns spin_insns dropped_insns marker_cpu marker_pc marker_count insns_cpu0 insns_cpu1 "
                 "machine_ps idle_ps miss_hop0 miss_hop1\n"
                 "0 1000 5 0 1 0x4000 7 600 405 123456 789 300 10\n"
                 "1 400 0 0 2 0x0 0 800 605 0 0 20 100\n")
    rows = sp.read_slices(p)
    assert rows[0]["cpu_insns"] == [600, 405] and rows[0]["marker_pc"] == 0x4000
    assert (rows[0]["machine_ps"], rows[0]["idle_ps"], rows[0]["miss_hops"]) == (123456, 789, [300, 10])
    # misses per instruction x latency (80 ns local, 140 ns one hop), over the mean slice's
    f = sp.mem_features(rows, [80.0, 140.0])
    t = np.array([[0.3 * 80, 0.01 * 140], [0.05 * 80, 0.25 * 140]])
    assert f.shape == (2, 2) and f == pytest.approx(t / t.sum(axis=1).mean())
    # an older file (or a run without memory counts) has none of them
    p.write_text("# slice insns spin_insns dropped_insns marker_cpu marker_pc marker_count insns_cpu0\n"
                 "0 1000 0 0 0 0x10 1 1000\n")
    old = sp.read_slices(p)
    assert old[0]["idle_ps"] == 0 and old[0]["miss_hops"] == [] and sp.mem_features(old, [80.0]) is None


def test_hop_counts_split_slices_that_run_the_same_blocks_on_data_at_other_distances(tmp_path):
    # one phase's blocks for 20 slices: the first 12 read local memory, the
    # last 8 the other node's (0.4 accesses an instruction, as a chase does)
    p = tmp_path / "chase.bb"
    p.write_text(bb_text(["A"] * 20, jitter=20))
    vec = sp.read_bb(p)
    split = {frozenset(range(12)), frozenset(range(12, 20))}

    def groups(picks):
        return {frozenset(np.flatnonzero(picks.labels == c).tolist()) for c in range(picks.k)}
    assert not split & groups(sp.cluster(vec, max_k=6))     # the blocks alone do not see it
    extra = np.array([[0.4, 0.0]] * 12 + [[0.0, 0.4]] * 8)
    picks = sp.cluster(vec, max_k=6, extra=extra)
    assert groups(picks) == split and picks.k == 2
    assert sorted(picks.weights) == pytest.approx([0.4, 0.6])
    with pytest.raises(sp.SimpointError, match="extra"):
        sp.cluster(vec, max_k=6, extra=extra[:5])
