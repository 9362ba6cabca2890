"""A campaign's runs as files (pipeline/archive.py): a database's runs
written out one file each, merged into another database on another
machine, nothing copied twice, a bad file refused in one line."""
import gzip

import pytest

import topologies
from analysis import db
from analysis.rows import insert
from pipeline import archive
from tests.runrows import run_start

TOPO = topologies.load("x86-2s")


def campaign_db(path, tmp_path, keys):
    con = db.connect(path)
    for i, key in enumerate(keys):
        log = tmp_path / f"console-{i}.log"
        log.write_text(f"console of {key}\n")
        rid = db.start_run(con, run_start(TOPO, run_key=key, started_at=f"2026-11-29T08:0{i}:00+0000",
                                          log_path=str(log)))
        with con:
            insert(con, "metrics", [{"run_id": rid, "name": f"pgscan{j}", "value": 10 * i + j, "unit": "pages"}
                                    for j in range(3)])
            con.execute("UPDATE runs SET status = 'ok' WHERE id = ?", (rid,))
    return con


def rows(con):
    return sorted(tuple(r) for r in con.execute(
        "SELECT r.run_key, r.started_at, m.name, m.value FROM runs r JOIN metrics m ON m.run_id = r.id"))


def test_runs_written_out_come_back_whole_in_a_new_database_and_only_once(tmp_path):
    src = campaign_db(tmp_path / "a.db", tmp_path, ["k1", "k2", "k3"])
    folder = tmp_path / "runs"
    written = archive.export(src, folder, keys={"k1", "k3"})
    assert len(written) == 2 and all(p.name.endswith(archive.SUFFIX) for p in written)
    assert archive.export(src, folder, keys={"k1", "k3"}) == []  # append-only: nothing new
    # another machine: a fresh database, the runs' figures and consoles back
    dst = db.connect(tmp_path / "b.db")
    assert archive.load(dst, tmp_path / "b.db", folder) == 2
    assert rows(dst) == [r for r in rows(src) if r[0] != "k2"]
    logs = [r[0] for r in dst.execute("SELECT log_path FROM runs ORDER BY run_key")]
    assert [open(p).read() for p in logs] == ["console of k1\n", "console of k3\n"]
    assert archive.load(dst, tmp_path / "b.db", folder) == 0
    assert dst.execute("SELECT COUNT(*) FROM metrics").fetchone()[0] == 6
    # the first database merges the folder back without a duplicate either
    assert archive.load(src, tmp_path / "a.db", folder) == 0
    assert src.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 3


def test_a_run_s_file_carries_its_profile_summed_over_cpus_and_phases(tmp_path):
    from analysis import profile_report
    src = campaign_db(tmp_path / "a.db", tmp_path, ["k1"])
    sym = [{"run_id": 1, "cpu": cpu, "phase": ph, "phase_name": f"chunk {ph}", "phase_instance": ph, "symbol": s,
            "dso": "[kernel]", "insns": 10 * cpu + ph, "insn_ps": 1, "core_ps": 2, "mem_ps": 3, "lock_ps": 4,
            "fetch_ps": 5, "pause_ps": 6, "pauses": 7, "time_ps": 100 * (cpu + 1) + ph + (50 if s == "a" else 0)}
           for cpu in range(4) for ph in range(5) for s in ("a", "b")]
    with src:
        insert(src, "profile_cpus", [{"run_id": 1, "cpu": cpu, "started": 1, "halted_at_exit": 0, "start_ps": 0,
                                      "clock_ps": 9000, "idle_ps": 700 * cpu, "drift_ps": 3, "insns": 1, "samples": 1,
                                      "sample_failures": 0} for cpu in range(4)])
        insert(src, "profile_symbols", sym)
        insert(src, "profile_stacks", [{"run_id": 1, "cpu": cpu, "phase": ph, "phase_name": "p", "stack": "x;y",
                                        "ps": 11, "samples": 2} for cpu in range(4) for ph in range(5)])
    archive.export(src, tmp_path / "runs")
    dst = db.connect(tmp_path / "b.db")
    archive.load(dst, tmp_path / "b.db", tmp_path / "runs")
    assert dst.execute("SELECT COUNT(*) FROM profile_symbols").fetchone()[0] == 2  # a row a symbol
    assert profile_report.shares(dst, 1) == profile_report.shares(src, 1)  # what the seeds' tables read
    assert tuple(dst.execute("SELECT SUM(insns), SUM(pauses) FROM profile_symbols").fetchone()) == (
        sum(r["insns"] for r in sym), 7 * len(sym))
    assert tuple(dst.execute("SELECT cpu, phase, ps, samples FROM profile_stacks").fetchone()) == (-1, -1, 220, 40)
    # said where every figure's provenance is: the run's limitations
    assert archive.COMPACTED in dst.execute("SELECT limitations FROM runs").fetchone()[0]
    assert archive.COMPACTED not in src.execute("SELECT limitations FROM runs").fetchone()[0]
    assert not list((tmp_path / "runs").glob(".*"))  # no temporary file left in the folder


def test_a_run_still_running_or_aborted_is_not_written(tmp_path):
    src = campaign_db(tmp_path / "a.db", tmp_path, ["k1"])
    db.start_run(src, run_start(TOPO, run_key="k2", started_at="2026-11-29T09:00:00+0000"))
    rid = db.start_run(src, run_start(TOPO, run_key="k3", started_at="2026-11-29T09:01:00+0000"))
    with src:
        src.execute("UPDATE runs SET status = 'aborted' WHERE id = ?", (rid,))
    assert [p.name[:2] for p in archive.export(src, tmp_path / "runs")] == ["k1"]


def test_a_file_that_is_no_run_is_one_line_naming_it(tmp_path):
    folder = tmp_path / "runs"
    folder.mkdir()
    with gzip.open(folder / ("bad" + archive.SUFFIX), "wb") as z:
        z.write(b"not sqlite at all" * 100)
    dst = db.connect(tmp_path / "b.db")
    with pytest.raises(archive.ArchiveError, match=r"bad\.db\.gz: not a run file"):
        archive.load(dst, tmp_path / "b.db", folder)
    assert dst.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0
    assert archive.load(dst, tmp_path / "b.db", tmp_path / "nowhere") == 0  # a campaign's first start
    (tmp_path / "afile").write_text("x")
    with pytest.raises(archive.ArchiveError, match="afile: not a folder"):
        archive.load(dst, tmp_path / "b.db", tmp_path / "afile")


def test_a_campaign_goes_on_from_another_machine_running_only_what_it_lacks(tmp_path):
    from pipeline import runner, study
    from tests.test_study import BASE, FakePool, write
    s = study.load(write(tmp_path, BASE))
    keys = [r.key for r in s.runs]
    folder = tmp_path / "repo" / "runs"
    # the first machine: half the study, each run written out as it is stored
    half = study.load(write(tmp_path, BASE))
    half.runs = half.runs[:3]
    _, t = runner.execute(half, tmp_path / "a.db", FakePool(tmp_path), stored=lambda con, key: archive.export(
        con, folder, {key}))
    assert t.ok == 3 and len(list(folder.glob("*" + archive.SUFFIX))) == 3
    # the second machine: a new database from the folder, only the other half runs
    con = db.connect(tmp_path / "b.db")
    assert archive.load(con, tmp_path / "b.db", folder) == 3
    pool = FakePool(tmp_path)
    _, t2 = runner.execute(s, tmp_path / "b.db", pool)
    assert t2.skipped == 3 and sorted(pool.submitted) == sorted(keys[3:])


def test_the_campaign_s_folder_is_kept_by_git():
    """The seeds campaign's run files are committed: no .gitignore pattern
    (such as the consoles' `runs/`) may hide them."""
    import subprocess

    from tests.e2e import REPO
    for name in ("0123456789abcdef-20261129000000-1" + archive.SUFFIX, "x" + archive.CONSOLE):
        r = subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q", f"studies/seeds-runs/{name}"])
        assert r.returncode == 1, f"studies/seeds-runs/{name} is ignored by git"
