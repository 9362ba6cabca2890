"""A study's stop time (--stop-by): a run's pace from its kind's runs, else
its block's; the coordinator starts only the runs that should end before the
stop time and leaves the rest to do; a bad stop time is one line, exit 2."""
import subprocess
import sys
import time
from datetime import UTC, datetime

import pytest

from analysis import db
from pipeline import runner, study
from pipeline.pace import Pace, parse_stop
from tests.e2e import REPO
from tests.test_study import BASE, FakePool, write


def test_a_run_is_paced_by_its_kind_then_its_block_this_host_s_runs_first():
    p = Pace("here")
    p.add({"kernel": "a", "block": "b1", "repeat": 0}, 600, "here")
    p.add({"kernel": "a", "block": "b1", "repeat": 1}, 1200, "here")
    p.add({"kernel": "a", "block": "b1", "repeat": 2}, 60, "faster host")  # this host has the kind: not counted
    p.add({"kernel": "c", "block": "b1", "repeat": 0}, 60, "here")
    p.add({"kernel": "d", "block": "b2", "repeat": 0}, None, "here")  # no wall time: no pace
    p.add({"kernel": "f", "block": "b3", "repeat": 0}, 300, "faster host")
    assert p.expected({"kernel": "a", "block": "b1", "repeat": 3}) == (900, "its kind's runs")
    assert p.expected({"kernel": "e", "block": "b1", "repeat": 0}) == (620, "its block's runs")
    assert p.expected({"kernel": "f", "block": "b3", "repeat": 1}) == (300, "its kind's runs on other hosts")
    # neither its kind nor its block has a run: the slowest kind so far (this host's)
    slowest = "the slowest kind's runs (none of its own yet)"
    assert p.expected({"kernel": "d", "block": "b2", "repeat": 1}) == (900, slowest)
    assert Pace("here").expected({"kernel": "a"}) == (None, "")  # nothing done yet: unknown, it starts


def test_stop_times_parse_and_bad_ones_say_what_was_expected():
    now = datetime(2026, 11, 29, 12, 0)  # naive: local time, as the user types it
    assert parse_stop("13:55", now) == datetime(2026, 11, 29, 13, 55).timestamp()
    assert parse_stop("11:00", now) == datetime(2026, 11, 30, 11, 0).timestamp()  # past today: tomorrow's
    assert parse_stop("+1h30m", now) == now.timestamp() + 5400
    assert parse_stop("+90m", now) == now.timestamp() + 5400
    assert parse_stop("2026-11-29T15:00", now) == datetime(2026, 11, 29, 15, 0).timestamp()
    assert parse_stop("2026-11-30T15:00+00:00", now) == datetime(2026, 11, 30, 15, tzinfo=UTC).timestamp()
    for bad in ("soon", "+", "+90x", "+1h30", "25:00", "12:60", "+0m", "2026-12-01", "T13:55"):
        with pytest.raises(ValueError, match="expected HH:MM"):
            parse_stop(bad, now)
    with pytest.raises(ValueError, match="already past"):
        parse_stop("2026-11-29T11:00", now)


def test_only_runs_that_should_end_before_the_stop_time_start(tmp_path):
    """Repeat 0 of every kind is done; latprobe's took a minute, memeater's an
    hour. Ten minutes before the stop time, latprobe's repeat 1 starts and
    memeater's waits for the next start, which runs it."""
    s = study.load(write(tmp_path, "repeats = 2\n" + BASE))
    first = {r.key for r in s.runs if r.axes["repeat"] == 0}
    dbp = tmp_path / "study.db"
    sid, _ = runner.execute(s, dbp, FakePool(tmp_path, die=[r.key for r in s.runs if r.key not in first]), retries=0)
    con = db.connect(dbp)
    for r in s.runs:
        if r.key in first:
            con.execute("UPDATE runs SET wall_s = ? WHERE run_key = ?",
                        (60 if r.spec.experiment == "latprobe" else 3600, r.key))
    con.commit()
    pool = FakePool(tmp_path)
    _, t = runner.execute(s, dbp, pool, stop_at=time.time() + 600)
    lat = {r.key for r in s.runs if r.key not in first and r.spec.experiment == "latprobe"}
    mem = {r.key for r in s.runs if r.key not in first and r.spec.experiment == "memeater"}
    assert set(pool.submitted) == lat and t.ok == len(lat) and t.deferred == len(mem) == 2
    said = "not started: at the pace of its kind's runs on other hosts (60 min) it would end after"  # FakePool's hosts
    assert sum(said in x for x in t.lines) == 2
    status = dict(con.execute("SELECT key, status FROM study_runs WHERE study_id = ?", (sid,)).fetchall())
    assert all(status[k] != "ok" for k in mem)
    # the next start, with no stop time, runs what was left
    again = FakePool(tmp_path)
    _, t2 = runner.execute(s, dbp, again)
    assert set(again.submitted) == mem and t2.ok == 2 and t2.deferred == 0


def test_past_the_stop_time_nothing_starts(tmp_path):
    s = study.load(write(tmp_path, BASE))
    pool = FakePool(tmp_path)
    _, t = runner.execute(s, tmp_path / "study.db", pool, stop_at=time.time() - 1)
    assert pool.submitted == [] and t.deferred == len(s.runs)
    assert db.connect(tmp_path / "study.db").execute(
        "SELECT COUNT(*) FROM study_runs WHERE status = 'pending'").fetchone()[0] == len(s.runs)


@pytest.mark.parametrize("cmd", [["study", "studies/numa-cost.toml"], ["seeds", "004"]])
def test_a_bad_stop_time_is_one_line_and_exit_2(tmp_path, cmd):
    p = subprocess.run([sys.executable, str(REPO / "run.py"), *cmd, "--db", str(tmp_path / "r.db"),
                        "--stop-by", "half past"], capture_output=True, text=True, cwd=REPO)
    assert p.returncode == 2
    assert p.stderr.strip().splitlines()[-1].startswith("error: --stop-by: expected HH:MM")
    assert not (tmp_path / "r.db").exists()
