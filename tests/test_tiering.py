"""experiments/tiering: the manifest against the study's machines (sizes,
knobs, bad input in one line), its results from records (tables, metrics,
absent counters, the summary and the verdict on one tier), the study's
machines beside spr-2s-cxl, and the results page's parameters column."""
import json

import pytest

import experiments as E
import topologies as T
from analysis import db, experiment_results as ER, pages
from experiments.tiering import results as R
from protocol import records
from tests.runrows import run_end, run_start

MACHINES = ("spr-1s-dram", "spr-1s-cxl-2to1", "spr-1s-cxl-1to2")
COUNTERS = dict.fromkeys(R.COUNTERS, 0)


# --- the manifest ------------------------------------------------------------------------
def test_defaults_on_the_study_machines_give_one_set():
    e = E.load("tiering")
    for name in MACHINES:
        p = e.resolve(T.load(name), {})
        assert p.derived == {"set_mib": 288, "hot_mib": 72, "swap_interval": 12, "cold_every": 10000}
        assert "--set-mib 288 --hot-mib 72 --intervals 24 --interval-ms 250 --swap-at 12" in p.command
    p = e.resolve(T.load("spr-1s-cxl-2to1"), {"swap_at": "3", "intervals": "4", "cold_share": "0"})
    assert p.derived["swap_interval"] == 3 and p.derived["cold_every"] == 0


def test_tiering_knobs_are_the_manifests_and_left_to_the_kernel_by_default():
    e = E.load("tiering")
    t = T.load("spr-1s-cxl-2to1")
    knobs = {name: (path, value) for name, path, value in e.resolve(t, {}).knobs()}
    assert "demotion_enabled" not in knobs and "promote_rate_limit_mbps" not in knobs
    assert knobs["thp"] == ("/sys/kernel/mm/transparent_hugepage/enabled", "never")
    on = {name: (path, value) for name, path, value in e.resolve(t, E.parse_overrides(
        ["demotion_enabled=true,numa_balancing=2,promote_rate_limit_mbps=256"])).knobs()}
    assert on["demotion_enabled"] == ("/sys/kernel/mm/numa/demotion_enabled", "true")
    assert on["numa_balancing"] == ("/proc/sys/kernel/numa_balancing", 2)
    assert on["promote_rate_limit_mbps"] == ("/proc/sys/kernel/numa_balancing_promote_rate_limit_MBps", 256)


def test_no_new_common_parameter_so_no_run_key_changes():
    """A parameter in common.toml enters every experiment's resolved
    parameters (so every run key): the tiering knobs are the manifest's."""
    assert set(E.common_params()) == {"zone_reclaim_mode", "thp", "numa_balancing", "watermark_boost_factor",
                                      "swap", "swap_frac"}
    assert E.common_params()["numa_balancing"].default == 1
    # the tiering mode is a value every experiment may now ask for
    assert E.load("memeater").resolve(T.load("spr-2s-cxl"), {"numa_balancing": "2"}).params["numa_balancing"] == 2


@pytest.mark.parametrize("overrides, expect", [
    ({"hot_frac": "0"}, "parameter 'hot_frac': expected a fraction of the set above 0 (and at most 0.5), got 0.0"),
    ({"hot_frac": "1.5"}, "parameter 'hot_frac': expected <= 0.5, got 1.5"),
    ({"set_frac": "0"}, "parameter 'set_frac': expected a fraction of total memory above 0"),
    ({"set_frac": "0.9"}, "parameter 'set_frac': expected <= 0.85, got 0.9"),
    ({"cold_share": "-0.1"}, "parameter 'cold_share': expected >= 0.0, got -0.1"),
    ({"swap_at": "24"}, "parameter 'swap_at': expected an interval number below intervals, or -1"),
    ({"interval_ms": "5"}, "parameter 'interval_ms': expected >= 10, got 5"),
    ({"numa_balancing": "4"}, "parameter 'numa_balancing': expected one of 0, 1, 2, 3, got 4"),
    ({"demotion_enabled": "yes"}, "parameter 'demotion_enabled': expected one of true, false, got 'yes'"),
    ({"promote_rate_limit_mbps": "-1"}, "parameter 'promote_rate_limit_mbps': expected >= 0, got -1"),
    ({"cpu": "4"}, "parameter 'cpu': expected a CPU number below the topology's CPU count, got 4"),
])
def test_bad_input_is_one_line_naming_the_field(overrides, expect):
    with pytest.raises(E.ExperimentError) as e:
        E.load("tiering").resolve(T.load("spr-1s-cxl-2to1"), overrides)
    msg = str(e.value)
    assert msg.startswith("--param: ") and expect in msg and "\n" not in msg, msg


# --- the machines ------------------------------------------------------------------------
def test_the_study_machines_are_one_socket_of_spr_2s_cxl_with_one_total():
    spr = T.load("spr-2s-cxl")
    for name, dram, cxl in (("spr-1s-dram", 384, None), ("spr-1s-cxl-2to1", 256, 128), ("spr-1s-cxl-1to2", 128, 256)):
        t = T.load(name)
        assert (t.cpu_nodes, t.cpus, t.memory_mib, t.total_memory_mib, t.scale) == (1, 4, dram, 384, spr.scale)
        assert (t.core, t.caches, t.clock_ghz, t.tlb) == (spr.core, spr.caches, spr.clock_ghz, spr.tlb)
        assert t.latency_ns(0, 0) == spr.latency_ns(0, 0) and t.bandwidth_gbps(0, 0) == spr.bandwidth_gbps(0, 0)
        assert t.sources and all(s in t.sources for s in spr.sources)
        if cxl is None:
            assert not t.memory_nodes and t.slit() == [[10]]
        else:
            assert t.node_memory_mib(1) == cxl and t.node_cpus(1) == []
            assert t.latency_ns(0, 1) == spr.latency_ns(0, 2) == 253.0
            assert t.bandwidth_gbps(0, 1) == spr.bandwidth_gbps(0, 2) == 17.7
            assert t.slit() == [[10, 26], [26, 10]]


# --- results -----------------------------------------------------------------------------
def rec(type_, **body) -> str:
    return "@@VMLAB " + json.dumps({"type": type_, **body})


def where(dram, slow, absent=0):
    return {"dram": dram, "slow": slow, "absent": absent, "sampled": dram + slow + absent}


def lines(tiers, n=4, swap=2, vm=None, promote=(0, 5, 0, 7), absent=()):
    vm = vm or COUNTERS
    out = [rec("tiering_start", set_mib=288, hot_mib=72, intervals=n, interval_ms=250, swap_at=swap,
               cold_every=10000, cpu=0, fill_ms=64.0, dram_nodes=[0],
               fill_vmstat={**vm, "pgdemote_kswapd": 30, "pgdemote_direct": 3}, fill_absent=[],
               numa_balancing="2", demotion_enabled="true",
               promote_rate_limit_mbps="65536", tiers=tiers, window_a=where(80, 20), window_b=where(75, 25),
               set=where(78, 22), free_kib=[2000, 50000])]
    for i in range(n):
        counters = {**vm, "pgpromote_success": promote[i], "pgdemote_kswapd": 2 * promote[i]}
        counters.update(dict.fromkeys(absent))
        out.append(rec("tiering_interval", interval=i, phase=int(i >= swap), t_ms=250.0 * i, ms=250.0,
                       accesses=1_000_000 + 100_000 * i, accesses_per_s=4e6 + 4e5 * i, ns_per_access=250.0,
                       hot=where(70 + 10 * i, 30 - 10 * i), other=where(80, 20), cold=where(78, 22),
                       vmstat=counters, absent=list(absent), free_kib=[2000 + i, 50000]))
    out.append(rec("tiering_done", accesses=4.6e6, ms=1000.0, accesses_per_s=4.6e6, phase0_accesses_per_s=4.2e6,
                   phase1_accesses_per_s=5.0e6))
    return out


def store(tmp_path, text_lines, topo="spr-1s-cxl-2to1"):
    t = T.load(topo)
    con = db.connect(tmp_path / "t.db")
    rid = db.start_run(con, run_start(t, experiment="tiering", params_json=json.dumps({"numa_balancing": 2})))
    db.finish_run(con, rid, run_end(), records.parse_bytes("\n".join(text_lines).encode()), t)
    return con, rid


def test_intervals_runs_and_metrics_from_the_records(tmp_path):
    con, rid = store(tmp_path, lines({"memory_tier4": "0", "memory_tier144": "1"}))
    rows = con.execute("SELECT * FROM tiering_intervals WHERE run_id = ? ORDER BY interval", (rid,)).fetchall()
    assert [r["phase"] for r in rows] == [0, 0, 1, 1]
    assert [r["hot_dram_share"] for r in rows] == [0.7, 0.8, 0.9, 1.0]
    assert rows[1]["pgpromote_success"] == 5 and rows[1]["pgdemote_kswapd"] == 10 and rows[0]["absent_counters"] is None
    assert rows[0]["dram_free_kib"] == 2000 and rows[0]["slow_free_kib"] == 50000
    run = con.execute("SELECT * FROM tiering_runs WHERE run_id = ?", (rid,)).fetchone()
    assert run["tiers"] == "memory_tier4: 0; memory_tier144: 1" and run["tier_count"] == 2
    assert (run["start_a_dram_share"], run["start_b_dram_share"], run["dram_nodes"]) == (0.8, 0.75, "0")
    assert run["fill_pgdemote"] == 33
    m = dict(con.execute("SELECT name, value FROM metrics WHERE run_id = ? AND name LIKE 'tiering.%'", (rid,)))
    assert m["tiering.maccesses_per_s"] == 4.6 and m["tiering.phase1_maccesses_per_s"] == 5.0
    assert (m["tiering.hot_dram_share_start"], m["tiering.hot_dram_share_phase0"],
            m["tiering.hot_dram_share_phase1"]) == (0.8, 0.8, 1.0)
    assert m["tiering.pgpromote_success"] == 12 and m["tiering.pgdemote"] == 24
    phases = con.execute("SELECT * FROM v_tiering_phases WHERE run_id = ? ORDER BY phase", (rid,)).fetchall()
    assert [(p["hot_dram_share_first"], p["hot_dram_share_last"], p["pgpromote_success"]) for p in phases] == \
        [(0.7, 0.8, 5), (0.9, 1.0, 7)]
    # every figure it stores is declared in its manifest
    exp = E.load("tiering")
    assert all(exp.metric(name) is not None for name in m)


def test_a_counter_the_kernel_lacks_is_absent_not_zero(tmp_path):
    con, rid = store(tmp_path, lines({"memory_tier4": "0,1"}, absent=("pgpromote_candidate", "numa_pte_updates")))
    rows = con.execute("SELECT * FROM tiering_intervals WHERE run_id = ?", (rid,)).fetchall()
    assert all(r["pgpromote_candidate"] is None and r["absent_counters"] == "pgpromote_candidate,numa_pte_updates"
               for r in rows)
    names = {n for (n,) in con.execute("SELECT name FROM metrics WHERE run_id = ?", (rid,))}
    assert "tiering.pgpromote_candidate" not in names and "tiering.pgpromote_success" in names
    out = []
    r = con.execute("SELECT * FROM runs WHERE id = ?", (rid,)).fetchone()
    ER.results("tiering").figures(con, rid, r, {}, out.append)
    text = "\n".join(out)
    assert "has no numa_pte_updates, pgpromote_candidate: shown as -" in text


def test_the_summary_prints_the_intervals_and_the_verdict_names_one_tier(tmp_path):
    con, rid = store(tmp_path, lines({"memory_tier4": "0,1"}))
    r = con.execute("SELECT * FROM runs WHERE id = ?", (rid,)).fetchone()
    out = []
    hooks = ER.results("tiering")
    hooks.figures(con, rid, r, {}, out.append)
    hooks.verdict(con, rid, r, {}, out.append)
    text = "\n".join(out)
    assert "memory tiers (1): memory_tier4: 0,1" in text and "hot on DRAM" in text
    assert "phase 1: 5.00 M accesses/s; hot window on DRAM 90 % -> 100 %; promoted 7, demoted 14" in text
    assert "verdict: the kernel formed one memory tier (memory_tier4: 0,1)" in out[-1]
    # two tiers: what promotion did
    two = tmp_path / "two"
    two.mkdir()
    con2, rid2 = store(two, lines({"memory_tier4": "0", "memory_tier144": "1"}))
    out2 = []
    hooks.verdict(con2, rid2, con2.execute("SELECT * FROM runs WHERE id = ?", (rid2,)).fetchone(), {}, out2.append)
    assert out2 == ["  verdict: over the intervals promoted 12 and demoted 24 pages (33 demoted during the fill); the "
                    "hot window on DRAM 70 % in the first interval, 100 % in the last"]


def test_the_results_page_shows_the_parameters_its_rows_differ_in():
    assert pages.differing([{"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 1}]) == ["b"]
    assert pages.differing([{"a": 1}, {"a": 1}]) == []


def test_the_headline_table_has_a_parameters_column_only_when_rows_differ(tmp_path):
    t = T.load("spr-1s-cxl-2to1")
    con = db.connect(tmp_path / "p.db")
    ids = []
    for nb, dem in ((1, "false"), (2, "true")):
        params = {"numa_balancing": nb, "demotion_enabled": dem, "set_mib": 288}
        rid = db.start_run(con, run_start(t, experiment="tiering", params_json=json.dumps(params)))
        db.finish_run(con, rid, run_end(), records.parse_bytes("\n".join(lines({"memory_tier4": "0"})).encode()), t)
        ids.append(rid)
    runs = pages.runs_of(con, ids)
    text = "\n".join(pages.headline_tables(con, runs))
    assert "| start | parameters | runs |" in text
    assert "| demotion_enabled=false, numa_balancing=1 | 1 |" in text
    assert "| demotion_enabled=true, numa_balancing=2 | 2 |" in text
    one = "\n".join(pages.headline_tables(con, runs[:1]))
    assert "parameters" not in one
