"""Studies without guests: expansion and keys, bad study files, the merge of
worker databases, and the coordinator's retry and resume with a pool whose
tasks return real run databases (made by the real schema, no QEMU)."""
import sqlite3
import threading
import zlib
from concurrent.futures import Future
from pathlib import Path

import pytest

import topologies
from analysis import db
from analysis.rows import insert
from pipeline import merge, runner, study
from pipeline.spec import InputError, RunSpec
from tests.e2e import REPO
from tests.runrows import run_end, run_start


def write(tmp_path, text, name="s.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


BASE = """
name = "t"
[axes]
topology = ["x86-2s", "gs1280-8"]
experiment = ["latprobe", "memeater"]
kernel = ["vanilla"]
[experiment.latprobe.params]
laps = [1, 2]
swap = "none"
"""


def test_the_product_expands_with_per_experiment_parameter_axes(tmp_path):
    s = study.load(write(tmp_path, BASE))
    # latprobe: 2 topologies x 2 laps; memeater: 2 topologies
    assert len(s.runs) == 6
    lat = [r for r in s.runs if r.spec.experiment == "latprobe"]
    assert sorted((r.spec.topology, dict(r.spec.params)["laps"]) for r in lat) == [
        ("gs1280-8", "1"), ("gs1280-8", "2"), ("x86-2s", "1"), ("x86-2s", "2")]
    assert all("param.laps" in r.axes for r in lat)
    assert len({r.key for r in s.runs}) == 6


def test_keys_follow_what_defines_a_run_and_nothing_else(tmp_path):
    a = study.load(write(tmp_path, BASE)).runs
    # a timeout is a limit, not a definition: same keys
    b = study.load(write(tmp_path, BASE + "[run]\ntimeout = 999\n", "b.toml")).runs
    assert [r.key for r in a] == [r.key for r in b]
    # a seed changes every key
    c = study.load(write(tmp_path, BASE + "[run]\nseed = 7\n", "c.toml")).runs
    assert not {r.key for r in a} & {r.key for r in c}
    # the key follows the topology's content, not its name
    topo = (Path(topologies.__file__).parent / "x86-2s.toml").read_text()
    (tmp_path / "x86-2s.toml").write_text(topo)
    (tmp_path / "x86-2s-edited.toml").write_text(topo.replace("81.0", "82.0", 1))
    base = dict(experiment="memeater")
    from pipeline.execute import prepare
    same = prepare(RunSpec(topology=str(tmp_path / "x86-2s.toml"), **base)).key
    assert same == prepare(RunSpec(topology="x86-2s", **base)).key
    assert same != prepare(RunSpec(topology=str(tmp_path / "x86-2s-edited.toml"), **base)).key


def test_boot_makes_every_run_boot_in_a_study_of_its_own(tmp_path):
    """`./run.py study F --boot` (and `seeds --boot`): the same runs booted, with
    their own keys, recorded as another study, so neither's tables mix them."""
    p = write(tmp_path, BASE)
    restored, booted = study.load(p), study.load(p, boot=True)
    assert [r.spec.boot for r in restored.runs] == [False] * 6 and all(r.spec.boot for r in booted.runs)
    assert all(r.prep.start == "restored" for r in restored.runs)
    assert all(r.prep.start == "booted" for r in booted.runs)
    assert not {r.key for r in restored.runs} & {r.key for r in booted.runs}
    assert booted.name == "t (booted)" and booted.sha256 != restored.sha256
    assert [r.axes for r in booted.runs] == [r.axes for r in restored.runs]


def test_a_topology_filter_keeps_that_machine_s_runs_with_their_keys_and_positions(tmp_path):
    """Re-measuring one machine's columns (e.g. x86 after an engine change)
    runs the same keys a whole run would, and nothing else; a machine the
    blocks do not use is one line naming the file and the machines they do."""
    p = write(tmp_path, BASE)
    whole = study.load(p).runs
    x86 = study.load(p, topologies=["x86-2s"]).runs
    assert x86 and {r.spec.topology for r in x86} == {"x86-2s"}
    assert [(r.key, r.position) for r in x86] == [(r.key, r.position) for r in whole if r.spec.topology == "x86-2s"]
    assert len(x86) < len(whole)
    with pytest.raises(InputError) as e:
        study.load(p, topologies=["x86-2s", "x86-8s"])
    msg = str(e.value)
    assert "\n" not in msg and str(p) in msg and "'x86-8s'" in msg and "gs1280-8, x86-2s" in msg


def test_repeats_get_their_own_keys_and_duplicates_collapse(tmp_path):
    s = study.load(write(tmp_path, """
name = "r"
repeats = 3
[[matrix]]
axes.topology = ["x86-2s"]
axes.experiment = ["memeater"]
[[matrix]]
axes.topology = ["x86-2s"]
axes.experiment = ["memeater"]
"""))
    assert len(s.runs) == 3 and sorted(r.spec.repeat for r in s.runs) == [0, 1, 2]


@pytest.mark.parametrize("text, field", [
    ('name = "x"\n[axes]\ntopology = ["x86-2s"]\nexperiment = ["nope"]\n', "nope"),
    ('name = "x"\n[axes]\ntopology = ["x86-2s"]\nexperiment = ["memeater"]\ncolour = ["red"]\n', "axes.colour"),
    ('name = "x"\n[axes]\ntopology = ["x86-2s"]\nexperiment = ["memeater"]\n[run]\ntimeout = -5\n', "--timeout"),
    ('name = "x"\n[axes]\ntopology = ["x86-2s"]\nexperiment = ["memeater"]\n[params]\nchunks = "many"\n', "chunks"),
    ('name = "x"\nrepeats = 0\n[axes]\ntopology = ["x86-2s"]\nexperiment = ["memeater"]\n', "repeats"),
    ('[axes]\nexperiment = ["memeater"]\n', "name"),
    ('name = "x"\n[axes]\ntopology = ["x86-2s"]\n', "axes.experiment"),
    ('name = "x"\n[axes]\ntopology = ["x86-2s"]\nexperiment = ["memeater"]\nseed = [{"a" = 1}]\n', "axes.seed"),
    ('name = "x"\n[axes]\nexperiment = ["memeater"]\nseed = ' + repr(list(range(400))) + '\n'
     '[params]\ncycles = ' + repr(list(range(1, 20))) + '\n', "at most"),
])
def test_a_bad_study_is_one_line_naming_the_file_and_field(tmp_path, text, field):
    p = write(tmp_path, text)
    with pytest.raises(InputError) as e:
        study.load(p)
    msg = str(e.value)
    assert "\n" not in msg and str(p) in msg and field in msg


# --- merge and the coordinator, with real run databases -------------------------
TOPO = topologies.load("x86-2s")


def worker_db(path: Path, key: str, status="ok", host="w1", n_metrics=3, reason=None, start="booted") -> bytes:
    con = db.connect(path)
    rid = db.start_run(con, run_start(TOPO, run_key=key, host=host, started_at=f"t-{key}", start=start))
    # hang rows off the run in two tables, so remapping is visible
    with con:
        insert(con, "metrics", [{"run_id": rid, "name": f"m{i}", "value": i, "unit": "x"} for i in range(n_metrics)])
        insert(con, "vcpu_clocks", [{"run_id": rid, "cpu": 0, "insns": 5, "stall_ps": 0, "clock_ps": 9}])
    con.execute("UPDATE runs SET status = ?, reason = ? WHERE id = ?", (status, reason, rid))
    con.commit()
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.execute("PRAGMA journal_mode=DELETE")
    con.close()
    return path.read_bytes()


def test_merge_remaps_run_ids_and_never_copies_a_run_twice(tmp_path):
    dst = db.connect(tmp_path / "study.db")
    # the study database already has runs, so worker ids 1.. collide
    for i in range(3):
        db.start_run(dst, run_start(TOPO, started_at=f"old{i}"))
    worker_db(tmp_path / "w.db", "k1")
    m = merge.merge(dst, tmp_path / "w.db", {1: "/new/console.log"})
    assert m == {1: 4}
    r = dst.execute("SELECT run_key, log_path, status FROM runs WHERE id = 4").fetchone()
    assert tuple(r) == ("k1", "/new/console.log", "ok")
    assert dst.execute("SELECT COUNT(*) FROM metrics WHERE run_id = 4").fetchone()[0] == 3
    assert dst.execute("SELECT insns FROM vcpu_clocks WHERE run_id = 4").fetchone()[0] == 5
    # the same file again: found, not duplicated
    assert merge.merge(dst, tmp_path / "w.db") == {1: 4}
    assert dst.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 4
    assert dst.execute("SELECT COUNT(*) FROM metrics").fetchone()[0] == 3


def test_merge_refuses_a_worker_with_another_schema(tmp_path):
    dst = db.connect(tmp_path / "study.db")
    worker_db(tmp_path / "w.db", "k1")
    c = sqlite3.connect(tmp_path / "w.db")
    c.execute("PRAGMA user_version = 99")
    c.commit()
    c.close()
    with pytest.raises(merge.MergeError, match="another vmlab version"):
        merge.merge(dst, tmp_path / "w.db")
    assert dst.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0


class FakePool:
    """Tasks answer at once with a real worker database; keys in `die` lose
    their worker on the first attempt (as a Dask KilledWorker would)."""
    workers = 2
    where = "fake pool"

    def __init__(self, tmp, die=(), fail=(), console: bytes | None = None, reason="timeout: ran past 9 s",
                 start="booted"):
        self.tmp, self.die, self.fail, self.reason, self.start = tmp, set(die), set(fail), reason, start
        self.console = zlib.compress(console) if console is not None else None
        self.submitted = []
        self.lock = threading.Lock()

    def submit(self, key, spec_json, workdir=None):
        with self.lock:
            self.submitted.append(key)
            n = self.submitted.count(key)
        f = Future()
        if key in self.die and n == 1:
            f.set_exception(RuntimeError("worker died"))
        else:
            failed = key in self.fail
            data = worker_db(self.tmp / f"w-{key[:8]}-{n}.db", key, "failed" if failed else "ok",
                             host=f"w{n}", reason=self.reason if failed else None, start=self.start)
            f.set_result({"db": data, "console": self.console, "where": f"w{n}", "rc": 0})
        return f

    def close(self, cancel=False):
        pass


def test_the_coordinator_retries_lost_runs_and_a_second_start_runs_nothing(tmp_path):
    s = study.load(write(tmp_path, BASE))
    keys = [r.key for r in s.runs]
    pool = FakePool(tmp_path, die=[keys[0]], fail=[keys[1]])
    sid, t = runner.execute(s, tmp_path / "study.db", pool, retries=1)
    assert (t.ok, t.failed, t.lost, t.retried) == (5, 1, 0, 1)
    con = db.connect(tmp_path / "study.db")
    rows = {r["key"]: r for r in con.execute("SELECT * FROM study_runs WHERE study_id = ?", (sid,))}
    assert rows[keys[0]]["status"] == "ok" and rows[keys[0]]["attempts"] == 2
    assert rows[keys[0]]["executed_on"] == "w2"
    assert rows[keys[1]]["status"] == "failed"
    # every study row points at its own merged run, with the right key
    for k, r in rows.items():
        assert con.execute("SELECT run_key FROM runs WHERE id = ?", (r["run_id"],)).fetchone()[0] == k
    assert con.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 6
    # resume: only the failed key runs again
    pool2 = FakePool(tmp_path)
    sid2, t2 = runner.execute(s, tmp_path / "study.db", pool2)
    assert sid2 == sid and pool2.submitted == [keys[1]] and t2.skipped == 5 and t2.ok == 1


def test_a_failed_run_keeps_its_own_console_when_its_key_runs_again(tmp_path):
    """The failed attempt's row names its console; the retry's console goes
    to a file of its own, so the failure's evidence is not overwritten."""
    s = study.load(write(tmp_path, BASE))
    k = s.runs[0].key
    runner.execute(s, tmp_path / "study.db", FakePool(tmp_path, fail=[k], console=b"Kernel panic first\n"))
    again = FakePool(tmp_path, console=b"second: ok\n")
    again.submitted = [k]  # its worker is "w2": another run of the key, not the first one found again
    runner.execute(s, tmp_path / "study.db", again)
    con = db.connect(tmp_path / "study.db")
    rows = con.execute("SELECT status, log_path FROM runs WHERE run_key = ? ORDER BY id", (k,)).fetchall()
    assert [r["status"] for r in rows] == ["failed", "ok"]
    assert rows[0]["log_path"] != rows[1]["log_path"]
    assert Path(rows[0]["log_path"]).read_bytes() == b"Kernel panic first\n"
    assert Path(rows[1]["log_path"]).read_bytes() == b"second: ok\n"


@pytest.mark.parametrize("reason, start, settled", [
    ("experiment exited with status 137", "restored", True),
    ("Kernel panic - not syncing: Out of memory and no killable processes...", "restored", True),
    ("experiment exited with status 137", "booted", False),   # a booted guest need not repeat itself
    ("timeout: experiment ran past 2682 s", "restored", False),  # the host's, not the guest's
    ("guest stopped before its end record (QEMU exit status -9)", "restored", False),
])
def test_a_failure_in_a_restored_guest_settles_its_key_unless_asked(tmp_path, reason, start, settled):
    """A restored guest repeats exactly, so its own failure (exit status,
    panic) is the key's result; a timeout or a booted run is run again, and
    --rerun-failed runs a settled key again."""
    s = study.load(write(tmp_path, BASE))
    k = s.runs[0].key
    sid, _ = runner.execute(s, tmp_path / "study.db", FakePool(tmp_path, fail=[k], reason=reason, start=start))
    again = FakePool(tmp_path, start=start)
    _, t = runner.execute(s, tmp_path / "study.db", again)
    assert again.submitted == ([] if settled else [k])
    assert t.settled == (1 if settled else 0) and t.skipped == len(s.runs) - (0 if settled else 1)
    con = db.connect(tmp_path / "study.db")
    row = con.execute("SELECT status, run_id FROM study_runs WHERE study_id = ? AND key = ?", (sid, k)).fetchone()
    assert row["status"] == ("failed" if settled else "ok")
    assert con.execute("SELECT run_key FROM runs WHERE id = ?", (row["run_id"],)).fetchone()[0] == k
    if settled:
        forced = FakePool(tmp_path, start=start)
        _, t3 = runner.execute(s, tmp_path / "study.db", forced, rerun_failed=True)
        assert forced.submitted == [k] and t3.ok == 1 and t3.settled == 0


def test_a_settled_key_stays_settled_in_a_database_made_from_the_archive(tmp_path):
    """A campaign moved to another host merges its folder into a new
    database: the settling failure comes with it, so the key is not run."""
    from pipeline import archive
    s = study.load(write(tmp_path, BASE))
    k = s.runs[1].key
    runner.execute(s, tmp_path / "a.db", FakePool(tmp_path, fail=[k], reason="experiment exited with status 1",
                                                  start="restored"))
    archive.export(db.connect(tmp_path / "a.db"), tmp_path / "folder")
    dbb = tmp_path / "b.db"
    archive.load(db.connect(dbb), dbb, tmp_path / "folder")
    pool = FakePool(tmp_path, start="restored")
    _, t = runner.execute(s, dbb, pool)
    assert pool.submitted == [] and t.settled == 1 and t.skipped == len(s.runs)


def test_a_key_another_coordinator_finished_meanwhile_is_not_run_again(tmp_path):
    """Two lanes of one study: each took its list at its start; a key the
    other lane finished since is skipped, not run a second time."""
    s = study.load(write(tmp_path, BASE))
    keys = [r.key for r in s.runs]

    class OtherLaneFinishes(FakePool):
        workers = 1

        def submit(self, key, spec_json, workdir=None):
            if key == keys[0]:  # while ours runs the first key, the other lane stores the second
                other = db.connect(tmp_path / "study.db")
                rid = db.start_run(other, run_start(TOPO, run_key=keys[1], started_at="other lane"))
                with other:
                    other.execute("UPDATE runs SET status = 'ok' WHERE id = ?", (rid,))
                other.close()
            return super().submit(key, spec_json, workdir)

    pool = OtherLaneFinishes(tmp_path)
    _, t = runner.execute(s, tmp_path / "study.db", pool)
    assert keys[1] not in pool.submitted and keys[0] in pool.submitted
    assert t.skipped == 1 and t.ok == len(keys) - 1


def test_a_key_another_coordinator_s_restored_guest_failed_meanwhile_is_settled(tmp_path):
    """The other lane's run of a key failed in the guest since this lane
    took its list: that failure is the key's result, so this lane skips it
    and says why, rather than run it to fail the same way."""
    s = study.load(write(tmp_path, BASE))
    keys = [r.key for r in s.runs]

    class OtherLaneFails(FakePool):
        workers = 1

        def submit(self, key, spec_json, workdir=None):
            if key == keys[0]:
                other = db.connect(tmp_path / "study.db")
                rid = db.start_run(other, run_start(TOPO, run_key=keys[1], started_at="other lane", start="restored"))
                with other:
                    other.execute("UPDATE runs SET status = 'failed', reason = 'experiment exited with status 137' "
                                  "WHERE id = ?", (rid,))
                other.close()
            return super().submit(key, spec_json, workdir)

    pool = OtherLaneFails(tmp_path, start="restored")
    _, t = runner.execute(s, tmp_path / "study.db", pool)
    assert keys[1] not in pool.submitted and t.settled == 1 and t.skipped == 1 and t.ok == len(keys) - 1
    assert any("failed in the guest" in x for x in t.lines) and not any("done meanwhile" in x for x in t.lines)


def test_a_run_done_outside_the_study_counts_for_its_key(tmp_path):
    s = study.load(write(tmp_path, BASE))
    con = db.connect(tmp_path / "study.db")
    rid = db.start_run(con, run_start(TOPO, run_key=s.runs[2].key))
    db.finish_run(con, rid, run_end(), __import__("protocol.records", fromlist=["x"]).parse_bytes(b""), TOPO)
    pool = FakePool(tmp_path)
    sid, t = runner.execute(s, tmp_path / "study.db", pool)
    assert s.runs[2].key not in pool.submitted and t.skipped == 1
    assert con.execute("SELECT run_id FROM study_runs WHERE key = ?", (s.runs[2].key,)).fetchone()[0] == rid


def test_a_task_that_finished_after_the_coordinator_died_is_adopted(tmp_path):
    s = study.load(write(tmp_path, BASE))
    con = db.connect(tmp_path / "study.db")
    sid = runner.register(con, s)
    # what a local task leaves in its directory when it outlives the coordinator
    wd = runner.work_root(tmp_path / "study.db", sid) / s.runs[0].key
    wd.mkdir(parents=True)
    worker_db(wd / "run.db", s.runs[0].key)
    pool = FakePool(tmp_path)
    _, t = runner.execute(s, tmp_path / "study.db", pool)
    assert s.runs[0].key not in pool.submitted and not wd.exists()
    assert any("adopted" in line for line in t.lines)
    assert con.execute("SELECT COUNT(*) FROM runs WHERE run_key = ?", (s.runs[0].key,)).fetchone()[0] == 1


def test_a_study_in_another_database_beside_it_leaves_its_running_tasks_alone(tmp_path):
    """Two studies whose databases share a folder are both study 1 in their
    own file; the second one starting must not adopt, kill or delete the
    first one's task directories (2026-11-25: it killed two running guests)."""
    s = study.load(write(tmp_path, BASE))
    sid = runner.register(db.connect(tmp_path / "a.db"), s)
    assert runner.work_root(tmp_path / "a.db", sid) != runner.work_root(tmp_path / "b.db", sid)
    wd = runner.work_root(tmp_path / "a.db", sid) / s.runs[0].key
    wd.mkdir(parents=True)
    worker_db(wd / "run.db", s.runs[0].key)      # a's task, finished but not yet merged
    other = study.load(write(tmp_path, BASE.replace('name = "', 'name = "other-', 1)))
    sid_b, _ = runner.execute(other, tmp_path / "b.db", FakePool(tmp_path))
    assert sid_b == sid and wd.exists() and (wd / "run.db").exists()
    assert db.connect(tmp_path / "b.db").execute("SELECT COUNT(*) FROM runs").fetchone()[0] == len(other.runs)
    # a's own coordinator still adopts it
    _, t = runner.execute(s, tmp_path / "a.db", FakePool(tmp_path))
    assert any("adopted" in line for line in t.lines) and not wd.exists()


def test_two_databases_in_one_folder_keep_their_own_consoles(tmp_path):
    """Both number their first study 1 and run the same keys: each run's
    log_path must still be its own console, not the other database's."""
    s = study.load(write(tmp_path, BASE))
    for name in ("a", "b"):
        (tmp_path / f"pool-{name}").mkdir()  # each pool's worker databases apart, as real workers' are
        runner.execute(s, tmp_path / f"{name}.db", FakePool(tmp_path / f"pool-{name}",
                                                            console=f"console of {name}".encode()))
    for name in ("a", "b"):
        logs = [r[0] for r in db.connect(tmp_path / f"{name}.db").execute("SELECT log_path FROM runs")]
        assert len(logs) == len(s.runs) and all(Path(p).read_text() == f"console of {name}" for p in logs)


def test_stop_signals_are_taken_even_when_sigint_was_ignored(tmp_path):
    """`nohup ./run.py study ... &` from a script starts the coordinator with
    SIGINT ignored, and its workers inherit that: take_stop_signals() makes
    SIGINT and SIGTERM stop them as Ctrl-C does."""
    import signal
    import subprocess
    import sys
    code = ("import os, signal, sys\n"
            "from pipeline.worker import take_stop_signals\n"
            "assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN\n"
            "take_stop_signals()\n"
            "for s in (signal.SIGINT, signal.SIGTERM):\n"
            "    try:\n"
            "        os.kill(os.getpid(), s)\n"
            "        sys.exit(f'{s} did not stop us')\n"
            "    except KeyboardInterrupt:\n"
            "        pass\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                       preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("path", sorted((REPO / "studies").glob("*.toml")), ids=lambda p: p.name)
def test_every_shipped_study_expands_with_distinct_keys_and_perturbed_repeats(path):
    """A shipped study names real topologies, experiments, kernels and
    parameters (load checks each run like a single run), and its repeats are
    distinct runs: each its own key and its own perturbation of the guest."""
    from engine import qemu
    st = study.load(path)
    assert st.runs
    assert len({r.key for r in st.runs}) == len(st.runs)
    words = {(r.spec.seed, r.spec.repeat): qemu.perturbation(r.spec.seed, r.spec.repeat) for r in st.runs}
    assert len(set(words.values())) == len(words)


def test_a_coordinator_leaves_a_key_alone_that_another_version_of_its_study_is_running(tmp_path):
    """Two lanes from checkouts whose study files differ (a comment: another
    sha256, so another study id over the same database) plan the same keys:
    the second must not run a key the first, alive, is running; once the
    first is gone it may."""
    s = study.load(write(tmp_path, BASE))
    con = db.connect(tmp_path / "study.db")
    other_sid = runner.register(con, study.load(write(tmp_path, BASE + "\n# another version\n", "v2.toml")))
    first = runner.Claim(runner.work_root(tmp_path / "study.db", other_sid))
    first.claim(runner.work_root(tmp_path / "study.db", other_sid) / s.runs[0].key)
    pool = FakePool(tmp_path)
    _, t = runner.execute(s, tmp_path / "study.db", pool)
    assert runner.register(con, s) != other_sid
    assert s.runs[0].key not in pool.submitted and len(pool.submitted) == len(s.runs) - 1 and t.elsewhere == 1
    first.release()
    pool2 = FakePool(tmp_path)
    runner.execute(s, tmp_path / "study.db", pool2)
    assert s.runs[0].key in pool2.submitted


def test_a_second_coordinator_of_the_same_study_leaves_the_first_ones_tasks_alone(tmp_path):
    """Two lanes of one study over one database (`./run.py seeds 003` and
    `./run.py seeds 004` at once are study 1 both): the second starting must
    not take the first's task for an orphan (2026-11-28: it killed the
    first's running guest), nor run its key; once the first coordinator is
    gone, its task is an orphan again and is adopted."""
    s = study.load(write(tmp_path, BASE))
    con = db.connect(tmp_path / "study.db")
    sid = runner.register(con, s)
    root = runner.work_root(tmp_path / "study.db", sid)
    first = runner.Claim(root)                      # the first coordinator, alive
    wd = root / s.runs[0].key
    first.claim(wd)
    worker_db(wd / "run.db", s.runs[0].key)         # its task, finished but not yet merged by it
    pool = FakePool(tmp_path)
    _, t = runner.execute(s, tmp_path / "study.db", pool)
    assert s.runs[0].key not in pool.submitted and (wd / "run.db").exists()
    assert any("another coordinator" in line for line in t.lines) and not any("adopted" in x for x in t.lines)
    assert len(pool.submitted) == len(s.runs) - 1 and t.elsewhere == 1
    first.release()                                 # the first coordinator dies
    _, t2 = runner.execute(s, tmp_path / "study.db", FakePool(tmp_path))
    assert any("adopted" in line for line in t2.lines) and not wd.exists()
    assert con.execute("SELECT COUNT(*) FROM runs WHERE run_key = ?", (s.runs[0].key,)).fetchone()[0] == 1
