"""Kernel comparisons without QEMU: a synthetic database with two or three
runs, the table compare-kernels style, the stored comparison, the CLI."""
import pytest

import topologies as T
from analysis import compare, db
from protocol import records as R
from tests.e2e import ENV, vmlab
from tests.runrows import run_end, run_start


def add_run(con, topo, patch_set, vmstat, metrics, kswapd=(0.5, 1.5), **over):
    row = run_start(topo, patch_set=patch_set, kernel_config_sha256="c0ffee", **over)
    rid = db.start_run(con, row)
    lines = ['@@VMLAB {"type":"machine","nodes":[],"distances":[],"zone_reclaim_mode":"%s","release":"6.1"}'
             % metrics.pop("zrm"),
             '@@VMLAB {"type":"init","step":"thp","ok":1}']
    for phase, mult in (("before", 0), ("after", 1)):
        lines.append('@@VMLAB {"type":"vmstat","phase":"%s","counters":{%s}}' % (
            phase, ",".join(f'"{k}":{100 + v * mult}' for k, v in vmstat.items())))
        lines.append('@@VMLAB {"type":"kswapd","phase":"%s","clk_tck":100,"kswapd":{"0":%d}}'
                     % (phase, kswapd[mult] * 100))
    for i, ms in enumerate(metrics.pop("chunks")):
        lines.append('@@VMLAB {"type":"chunk","cycle":0,"chunk":%d,"wall_ms":%s,"majflt":%d,"swap_used_kib":0}'
                     % (i, ms, i))
    lines.append('@@VMLAB {"type":"memeater_done","total_ms":%s}' % metrics.pop("total"))
    parsed = R.parse_bytes("\n".join(lines).encode())
    db.finish_run(con, rid, run_end(), parsed, topo)
    return rid


@pytest.fixture
def three(tmp_path):
    topo = T.load("gs1280-8")
    con = db.connect(tmp_path / "r.db")
    base = add_run(con, topo, "vanilla", {"pswpout": 0, "pgscan_kswapd": 200, "pgfault": 7, "nr_free_pages": 5},
                   {"zrm": "0", "chunks": [10, 20], "total": 30})
    zra = add_run(con, topo, "zone-reclaim-auto", {"pswpout": 40, "pgscan_kswapd": 300, "pgfault": 7,
                                                   "nr_free_pages": 9},
                  {"zrm": "1", "chunks": [10, 50], "total": 60}, kswapd=(0.5, 3.5))
    other = add_run(con, T.load("gs1280-16"), "kswapd-no-backoff", {"pswpout": 0}, {"zrm": "0", "chunks": [1],
                                                                                     "total": 1})
    return con, tmp_path, (base, zra, other)


def cells(text, figure):
    import re
    for line in text.splitlines():
        parts = re.split(r"\s{2,}", line.strip())
        name = parts[0].removeprefix("* ")  # a headline figure is marked
        if name == figure or name.startswith(figure + " ["):
            return parts[1:]
    raise AssertionError(f"no row {figure!r} in\n{text}")


def test_table_one_row_per_figure_with_percent_against_the_first(three):
    con, _, (base, zra, _) = three
    out = compare.render(con, [base, zra])
    assert "vanilla (run 1)" in out and "zone-reclaim-auto (run 2)" in out
    assert cells(out, "vmstat.pgscan_kswapd") == ["200", "300", "+50.00%"]
    assert cells(out, "vmstat.pswpout") == ["0", "40", "new"]
    assert cells(out, "vmstat.pgfault") == ["7", "7", "0.00%"]
    assert cells(out, "guest.zone_reclaim_mode") == ["0", "1", "new"]
    # declared in memeater's manifest: lower is better, so these are worse
    assert cells(out, "memeater.total_ms") == ["30", "60", "+100.00% worse"]
    assert cells(out, "chunks.max_ms") == ["20", "50", "+150.00% worse"]
    assert cells(out, "kswapd.cpu_s") == ["1", "3", "+200.00%"]
    # not figures: guest bookkeeping, counters outside the reclaim set, text
    for absent in ("init.thp", "vmstat.nr_free_pages", "guest.release"):
        assert absent not in out
    assert "WARNING" not in out
    # reversed baseline: the % follows the first run, and so does the verdict
    rev = compare.render(con, [zra, base])
    assert cells(rev, "vmstat.pgscan_kswapd") == ["300", "200", "-33.33%"]
    assert cells(rev, "memeater.total_ms") == ["60", "30", "-50.00% better"]


def test_headline_figures_come_first_and_undeclared_ones_are_not_judged(three):
    con, _, (base, zra, _) = three
    rows = [ln.split("  ")[0] for ln in compare.render(con, [base, zra]).splitlines() if ln[:1] in ("*", "c", "v")]
    table = [r for r in rows if not r.startswith("comparison")]
    assert table[0].startswith("* memeater.total_ms")   # memeater's manifest: headline = true
    assert not any(r.startswith("* ") for r in table[table.index(next(r for r in table if not r.startswith("* "))):])
    line = next(ln for ln in compare.lines(con, compare.runs_of(con, [base, zra])) if ln.name == "vmstat.pswpout")
    assert line.verdicts == [""] and not line.headline   # not a declared metric: no direction


@pytest.mark.parametrize("col,value", [("engine_version", "QEMU 10.0.2 + vmlab series 000000000000"),
                                       ("timing_plugin", "vmlab_timing model 3 sha256 000000000000"),
                                       ("start", "restored")])
def test_runs_made_by_another_engine_model_or_start_are_flagged(three, col, value):
    """Kernels compared on figures another engine, timing model or start
    produced: one visible line names what differs."""
    con, _, (base, zra, _) = three
    assert "WARNING" not in compare.render(con, [base, zra])
    con.execute(f"UPDATE runs SET {col} = ? WHERE id = ?", (value, zra))
    assert f"WARNING: the runs differ in {col}" in compare.render(con, [base, zra])


def test_runs_that_differ_beyond_the_kernel_are_flagged(three):
    con, _, (base, _, other) = three
    out = compare.render(con, [base, other])
    assert "WARNING: the runs differ in topology_sha256" in out
    with pytest.raises(compare.CompareError, match="no run 99"):
        compare.render(con, [base, 99])
    with pytest.raises(compare.CompareError, match="two runs or more"):
        compare.render(con, [base])


def test_stored_comparison_and_cli(three):
    con, tmp, (base, zra, _) = three
    cid = compare.start(con, "memeater on gs1280-8: vanilla,zone-reclaim-auto")
    compare.add_run(con, cid, 0, base)
    compare.add_run(con, cid, 1, zra)
    assert compare.runs_in(con, cid) == [base, zra]
    assert [tuple(r) for r in con.execute("SELECT position, patch_set FROM v_compare ORDER BY position")] == \
        [(0, "vanilla"), (1, "zone-reclaim-auto")]
    con.close()
    cli = lambda *a: vmlab(ENV, tmp, "compare", *a, runs_dir=False)
    latest, by_ids = cli(), cli(str(base), str(zra))
    assert latest.returncode == 0 and latest.stdout == by_ids.stdout
    assert cells(latest.stdout, "vmstat.pswpout") == ["0", "40", "new"]
    bad = cli("1", "42")
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [f"error: {tmp / 'r.db'}: no run 42 in the database"]


@pytest.mark.parametrize("kernels,expect", [
    ("vanilla,nosuch", "--kernel: expected a patch set under images/patches/"),
    ("vanilla,vanilla", "--kernel: expected patch set names separated by commas, each once"),
    ("vanilla,", "--kernel: expected patch set names"),
])
def test_bad_kernel_list_one_line_exit_2_nothing_written(tmp_path, kernels, expect):
    r = vmlab(ENV, tmp_path, "--kernel", kernels, runs_dir=False, cwd=tmp_path)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and expect in lines[0], r.stderr
    assert not (tmp_path / "r.db").exists() and not (tmp_path / "runs").exists()
