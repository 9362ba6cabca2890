"""SimPoint sampling's estimator (sampling/estimate.py) on synthetic regions,
the sampled run's option checks and the regions' projection onto workers
(pipeline/sampled.py)."""
import pytest

from pipeline import sampled
from pipeline.spec import InputError, RunSpec, run_key
from sampling import estimate
from sampling.simpoint import slice_costs


def rows_of(times_by_slice, cpus=2, insns=1000):
    """Slices rows as sampling.simpoint.read_slices gives them: per slice every
    vCPU's clock at its end (each vCPU's clock advancing by its time)."""
    clock = [1_000_000] * cpus
    start = list(clock)
    out = []
    for t in times_by_slice:
        clock = [c + x for c, x in zip(clock, t)]
        out.append({"insns": insns, "spin_insns": 0, "cpu_time_ps": list(clock), "start_ps": start})
    return out


def result(stall, misses, remote, symbols=()):
    return {"cpus": [{"cpu": 0, "insns": 1000, "stall_ps": stall, "misses": misses, "remote": remote},
                     {"cpu": 1, "insns": 0, "stall_ps": 0, "misses": 0, "remote": 0}],
            "symbols": [{"symbol": s, "stall_ps": v} for s, v in symbols]}


def test_a_slice_costs_the_latest_clock_s_advance_and_the_sum_of_all():
    rows = rows_of([(10, 4), (3, 7)])
    elapsed, total = slice_costs(rows)
    assert (elapsed[0], total[0]) == (10, 14)
    # the latest clock went from 1e6+10 to 1e6+13 (vCPU 0), though vCPU 1 moved 7
    assert (elapsed[1], total[1]) == (3, 10)


def test_two_planted_phases_are_estimated_exactly_from_one_slice_each():
    # 6 slices of phase A (cost 100, 5 misses) and 4 of phase B (cost 300, 20 misses, all remote)
    phases = ["A"] * 6 + ["B"] * 4
    cost = {"A": (100, 0), "B": (300, 0)}
    rows = rows_of([cost[p] for p in phases])
    res = {"A": result(60, 5, 0, [("memset", 60)]), "B": result(250, 20, 20, [("copy_page", 250)])}
    regs = [estimate.Region(0, 2, 0.6, 1, 1000, estimate.figures(res["A"], 100, 100)),
            estimate.Region(1, 8, 0.4, 7, 1000, estimate.figures(res["B"], 300, 300))]
    est = estimate.estimate(regs, estimate.profile_insns(rows))
    full = {"cpus": [{"cpu": 0, "insns": 10000, "stall_ps": 6 * 60 + 4 * 250, "misses": 6 * 5 + 4 * 20,
                      "remote": 80}, {"cpu": 1, "insns": 0, "stall_ps": 0, "misses": 0, "remote": 0}],
            "symbols": [{"symbol": "memset", "stall_ps": 360}, {"symbol": "copy_page", "stall_ps": 1000}]}
    actual = estimate.whole_run(full, rows)
    assert actual["elapsed_ps"] == 6 * 100 + 4 * 300
    errs = {f: err for f, _e, _a, err in estimate.errors(est, actual)}
    for f in ("elapsed_ps", "cpu_time_ps", "total.stall_ps", "total.misses", "total.remote", "remote_share",
              "cpu0.stall_ps", "symbol.memset.stall_share", "symbol.copy_page.stall_share"):
        assert errs[f] == pytest.approx(0, abs=1e-9), f
    assert est["remote_share"] == pytest.approx(80 / 110)


def test_a_wrong_weight_shows_as_error_and_a_ratio_is_taken_from_the_sums():
    rows = rows_of([(100, 0)] * 5 + [(300, 0)] * 5)
    regs = [estimate.Region(0, 0, 0.8, 0, 1000, estimate.figures(result(10, 10, 0), 100, 100)),
            estimate.Region(1, 9, 0.2, 8, 1000, estimate.figures(result(10, 10, 10), 300, 300))]
    est = estimate.estimate(regs, estimate.profile_insns(rows))
    assert est["elapsed_ps"] == pytest.approx(10 * (0.8 * 100 + 0.2 * 300))   # 1400 against 2000
    actual = estimate.whole_run(result(0, 0, 0), rows)
    err = dict((f, e) for f, _x, _a, e in estimate.errors(est, actual))
    assert err["elapsed_ps"] == pytest.approx(-30.0)
    # remote share from the estimated sums (2 of 10 remote), not the mean of 0 and 1
    assert est["remote_share"] == pytest.approx(0.2)


def test_a_region_is_priced_per_instruction_so_a_partial_slice_counts_for_what_it_is():
    # 2.5 slices of 1000 instructions at 100 ps per slice (0.1 ps an instruction)
    rows = rows_of([(100, 0), (100, 0), (50, 0)])
    rows[-1]["insns"] = 500
    assert estimate.profile_insns(rows) == 2500
    # the one point is the last, partial slice: 50 ps over its 500 instructions
    part = estimate.Region(0, 2, 1.0, 1, 500, estimate.figures(result(0, 0, 0), 50, 50))
    assert estimate.estimate([part], 2500)["elapsed_ps"] == pytest.approx(250)
    assert estimate.whole_run(result(0, 0, 0), rows)["elapsed_ps"] == 250


def test_a_figure_the_full_run_lacks_has_no_error():
    errs = estimate.errors({"a": 1.0, "b": 2.0}, {"a": 0.0})
    assert errs == [("a", 1.0, 0.0, None), ("b", 2.0, None, None)]


@pytest.mark.parametrize("field,value,msg", [("sample_max_k", 0, "--sample-max-k: expected 1..100"),
                                             ("sample_max_k", 101, "--sample-max-k: expected 1..100"),
                                             ("sample_warmup", -1, "--sample-warmup: expected 0..100"),
                                             ("sample_functional", 101, "--sample-functional: expected 0..100"),
                                             ("sample_workers", 0, "--sample-workers: expected at least 1"),
                                             ("warmup_insns", 1000, "--warmup-insns: not with --timing sampled")])
def test_bad_sampling_options_get_one_line(field, value, msg):
    from pipeline import execute
    with pytest.raises(InputError, match=msg):
        execute.prepare(RunSpec(topology="gs1280-8", timing="sampled", **{field: value}))


def test_the_key_covers_what_decides_the_estimates_not_the_workers():
    from timing import modes

    def key(timing="sampled", start="restored", **kw):
        spec = RunSpec(timing=timing, **kw)
        return run_key(spec, "t", {}, None, modes.get(timing).key(spec), start)
    assert key() != key(sample_max_k=5) and key() != key(sample_warmup=2) and key() != key(sample_functional=3)
    assert key() == key(sample_workers=7)
    # other modes keep their keys whatever the sampling options say
    assert key("detailed", "booted") == key("detailed", "booted", sample_max_k=3)


def test_regions_are_projected_longest_first_onto_the_least_loaded_worker():
    walls = [10, 8, 6, 4, 2]
    assert sampled.projection(walls, 1) == 30
    assert sampled.projection(walls, 2) == 16        # 10+4+2 / 8+6
    assert sampled.projection(walls, 8) == 10


def test_idle_time_comes_from_the_profile_and_only_busy_time_is_priced_per_instruction():
    # 10 slices of the same code and the same busy time (100); two of them
    # wait for the disk (900 idle each). One cluster, its point a slice
    # without a wait: per instruction, the waits vanish from the estimate.
    idle = [0] * 8 + [900, 900]
    rows = rows_of([(100 + i, 0) for i in idle])
    for r, i in zip(rows, idle):
        r["idle_ps"] = i
    point = estimate.Region(0, 3, 1.0, 2, 1000, estimate.figures(result(0, 0, 0), 100, 100, idle_ps=0))
    actual = estimate.whole_run(result(0, 0, 0), rows)
    assert (actual["elapsed_ps"], actual["idle_ps"], actual["busy_ps"]) == (2800, 1800, 1000)
    plain = estimate.estimate([point], estimate.profile_insns(rows))
    assert plain["elapsed_ps"] == pytest.approx(1000)   # -64 %: what the waits cost a plain estimate
    est = estimate.estimate([point], estimate.profile_insns(rows), estimate.profile_idle(rows))
    assert est["elapsed_ps"] == pytest.approx(2800) and est["idle_ps"] == 1800
    assert est["elapsed_ps.per_insn"] == pytest.approx(1000)
    errs = {f: e for f, _x, _a, e in estimate.errors(est, actual)}
    assert errs["elapsed_ps"] == pytest.approx(0) and errs["elapsed_ps.per_insn"] == pytest.approx(-1800 / 28)
    # a point that waited itself: its wait is not priced per instruction either
    waited = estimate.Region(0, 8, 1.0, 7, 1000, estimate.figures(result(0, 0, 0), 1000, 1000, idle_ps=900))
    assert estimate.estimate([waited], 10_000, 1800)["elapsed_ps"] == pytest.approx(2800)


def test_an_idle_time_longer_than_the_slice_is_capped_at_its_elapsed_time():
    f = estimate.figures(result(0, 0, 0), 100, 100, idle_ps=150)
    assert (f["idle_ps"], f["busy_ps"]) == (100, 0)


def test_a_point_that_waited_less_than_the_profile_is_priced_for_its_busy_time_only():
    # the profile waited 900 in each of two slices; under the detailed model the
    # work overlapping the wait took longer, and the region's slice idled 600:
    # its busy 200 is priced per instruction, the idle time is the profile's
    rows = rows_of([(100, 0)] * 8 + [(1000, 0)] * 2)
    for r, i in zip(rows, [0] * 8 + [900, 900]):
        r["idle_ps"] = i
    busy = estimate.Region(0, 3, 0.8, 2, 1000, estimate.figures(result(0, 0, 0), 100, 100, idle_ps=0))
    waited = estimate.Region(1, 8, 0.2, 7, 1000, estimate.figures(result(0, 0, 0), 800, 800, idle_ps=600))
    est = estimate.estimate([busy, waited], estimate.profile_insns(rows), estimate.profile_idle(rows))
    assert est["idle_ps"] == 1800
    # busy: 8 slices at 100 and 2 at 200 (800 - 600), per instruction; idle: the profile's
    assert est["busy_ps"] == pytest.approx(10 * (0.8 * 100 + 0.2 * 200))
    assert est["elapsed_ps"] == pytest.approx(est["busy_ps"] + 1800)


def cum_rows(per_slice):
    """Profile slices rows: every vCPU's instructions since the run's start at each boundary."""
    total, out = [0] * len(per_slice[0]), []
    for s in per_slice:
        total = [t + x for t, x in zip(total, s)]
        out.append({"cpu_insns": list(total)})
    return out


def test_a_checkpoint_chain_on_the_profile_s_path_is_accepted_from_where_it_started():
    profile = cum_rows([[5000, 7000], [6000, 4000], [3000, 9000], [8000, 2000]])
    # the segment from the snapshot to boundary 2, then one restored at 2 to boundary 4
    assert sampled.on_path(profile, cum_rows([[5000, 7000], [6000, 4000], [1, 0]]), 0, 2, [0, 0], 10000) == 0
    # a few instructions counted otherwise (blocks cut short): within 0.01 % of a slice
    assert sampled.on_path(profile, cum_rows([[3000, 9000], [8000, 2001]]), 2, 4, [11000, 11000], 10000) == 1


def test_a_restored_segment_whose_vcpus_part_from_the_profile_is_refused_naming_the_vcpu():
    profile = cum_rows([[5000, 7000], [6000, 4000], [3000, 9000], [8000, 2000]])
    # the same machine-wide count at the boundary, another interleaving
    with pytest.raises(sampled.OffPath, match=r"slice 4 left the profile's path: restored from slice 2, its "
                                                    r"vCPUs reached the boundary 24 instructions away .* vCPU 0 after "
                                                    r"22012, the profile's after 22000"):
        sampled.on_path(profile, cum_rows([[3000, 9000], [8012, 1988]]), 2, 4, [11000, 11000], 10000)
    with pytest.raises(sampled.SamplingError, match="its segment wrote 1 slices, expected 2"):
        sampled.on_path(profile, cum_rows([[3000, 9000]]), 2, 4, [11000, 11000], 10000)


def test_a_checkpoint_goes_back_to_the_latest_boundary_the_machine_could_be_saved_in_its_slice():
    rows = [{"point_late": x} for x in (0, 0, 40, -1, 9999, 10000, -1)]
    assert sampled.checkpoint_boundary(rows, 2, 10000) == 2       # 40 instructions in: within its slice
    assert sampled.checkpoint_boundary(rows, 6, 10000) == 4       # 6 and 5 not within theirs
    assert sampled.checkpoint_boundary(rows, 3, 10000) == 2
    assert sampled.checkpoint_boundary([{"point_late": -1}] * 3, 2, 10000) == 0  # the snapshot after boot
    assert sampled.checkpoint_boundary([{"point_late": None}] * 3, 2, 10000) == 2  # a profile without the column


def test_a_short_run_gets_what_fits_it_and_says_so():
    """--timing sampled with its defaults on a run of few slices: at most a
    point per two full slices (k = the slices is a perfect fit the BIC always
    takes: every slice detailed), warm-ups that end before its last slice,
    and a sentence saying so (printed and added to the row's limitations)."""
    spec = RunSpec(timing="sampled")  # max k 10, one slice of warm-up
    assert sampled.fit(spec, 50, 49) == (10, 1, 0, "")
    k, warm, func, said = sampled.fit(spec, 5, 4)  # the issue's: 4 full slices and the partial last
    assert (k, warm, func) == (2, 1, 0) and "at most 2 points, not 10 (--sample-max-k)" in said
    assert "one per two of the profile's 4 full slices of 100,000,000 instructions" in said and "warm-up" not in said
    assert sampled.fit(spec, 19, 19, partial=False)[:3] == (9, 1, 0)
    assert sampled.fit(RunSpec(timing="sampled", sample_max_k=3), 8, 7) == (3, 1, 0, "")
    k, warm, func, said = sampled.fit(spec, 1, 1)  # shorter than one slice
    assert (k, warm, func) == (1, 0, 0) and "at most 1 point, not 10" in said and "shorter than one slice" in said
    assert "a warm-up of 0 slices, not 1 (--sample-warmup): the run is 1 slice" in said
    k, warm, func, said = sampled.fit(RunSpec(timing="sampled", sample_warmup=2, sample_functional=5), 4, 3)
    assert (k, warm, func) == (1, 2, 1) and "a warm-up of 2 slices after 1 functional, not 2 after 5" in said
