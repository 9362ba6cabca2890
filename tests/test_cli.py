"""Bad input: one line naming the file/field and what was expected, exit 2,
nothing written to the results database."""
import pytest

from tests.e2e import ENV, REPO, vmlab


def run(args, tmp):
    return vmlab(ENV, tmp, *args, runs_dir=False, cwd=tmp)


@pytest.mark.parametrize("args,expect", [
    (["--topology", "nosuch"], "--topology"),
    (["--exp", "nosuch"], "--exp"),
    (["--param", "chunkz=3"], "unknown parameter 'chunkz'"),
    (["--param", "cycles=x"], "'cycles': expected int"),
    (["--kernel", "nosuch-patches"], "patch set"),
    (["--no-stalls", "--timing", "off"], "--no-stalls: only with --timing detailed"),
    (["--no-stalls", "--timing", "fast"], "--no-stalls: only with --timing detailed"),
])
def test_bad_input_one_line_exit_2_no_database(tmp_path, args, expect):
    r = run(args, tmp_path)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and expect in lines[0], r.stderr
    assert not (tmp_path / "r.db").exists()


def test_malformed_topology_file(tmp_path):
    src = (REPO / "topologies" / "gs1280-8.toml").read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(src.replace("dims = [2, 4]", "dims = [3, 4]"))
    r = run(["--topology", str(bad)], tmp_path)
    assert r.returncode == 2
    assert r.stderr.strip() == (f"error: {bad}: field 'interconnect.dims': dimensions whose product equals "
                                f"nodes.count = 8, got [3, 4] (= 12)")
    assert not (tmp_path / "r.db").exists()


def test_help_lists_what_the_repo_holds(tmp_path):
    """The experiments, patch sets and flavors in --help come from the
    folders, and query --help lists the tables a database really has."""
    import experiments
    from images import variants
    r = vmlab(ENV, None, "--help")
    assert r.returncode == 0
    text = "".join(r.stdout.split())  # argparse wraps lines, also at hyphens
    for name in experiments.available() + variants.patchsets() + list(variants.FLAVORS):
        assert name in text, name
    from analysis import db
    con = db.connect(tmp_path / "r.db")
    con.execute("CREATE TABLE my_study_notes (x)")
    con.commit()
    q = vmlab(ENV, tmp_path, "query", "--help", runs_dir=False)
    qtext = "".join(q.stdout.split())
    assert q.returncode == 0 and "my_study_notes" in qtext
    for _kind, name in db.tables(con):
        assert name in qtext, name


def test_list_and_query(tmp_path):
    r = vmlab(ENV, None, "list")
    assert r.returncode == 0 and "gs1280-32" in r.stdout and "4x8 torus" in r.stdout and "chunk_frac" in r.stdout
    from analysis import db
    db.connect(tmp_path / "r.db").close()
    q = vmlab(ENV, tmp_path, "query", "SELECT 1 AS one, 'x' AS two", "--csv", runs_dir=False)
    assert q.returncode == 0 and q.stdout.splitlines() == ["one,two", "1,x"]
    w = vmlab(ENV, tmp_path, "query", "DELETE FROM runs", runs_dir=False)
    assert w.returncode == 2 and "readonly" in w.stderr


@pytest.mark.parametrize("sql, refused", [
    ("ATTACH DATABASE '{out}' AS x", "ATTACH"),
    ("VACUUM INTO '{out}'", "ATTACH"),  # VACUUM INTO attaches its output
    ("CREATE TEMP TABLE t AS SELECT 1", "CREATE TEMP TABLE"),
])
def test_query_refuses_what_writes_and_creates_nothing(tmp_path, sql, refused):
    from analysis import db
    db.connect(tmp_path / "r.db").close()
    before = {p.name for p in tmp_path.iterdir()}
    out = tmp_path / "made-by-the-query.db"
    q = vmlab(ENV, tmp_path, "query", sql.format(out=out), runs_dir=False, cwd=tmp_path)
    assert q.returncode == 2 and q.stdout == ""
    assert q.stderr.splitlines() == [f"error: {tmp_path / 'r.db'}: the query is read-only: {refused} refused"]
    # nothing new but the database's own WAL files, which any read-only query opens
    assert not out.exists() and {p.name for p in tmp_path.iterdir()} - before <= {"r.db-wal", "r.db-shm"}


def test_show_prints_the_stored_summary_and_names_a_missing_run(tmp_path):
    import topologies as T
    from analysis import db, summary
    from protocol import records as R
    from tests.runrows import run_end, run_start
    topo = T.load("gs1280-8")
    con = db.connect(tmp_path / "r.db")
    for ms in (5.5, 7.25):
        rid = db.start_run(con, run_start(topo, params_json='{"chunk_mib": 16, "cpu": 0}'))
        db.finish_run(con, rid, run_end(), R.parse_text(
            '@@VMLAB {"type":"chunk","cycle":0,"chunk":0,"wall_ms":%s,"placement":{"3":16},"free_kib":[1,2]}\n' % ms),
            topo)
    show = lambda *a: vmlab(ENV, tmp_path, "show", *a, runs_dir=False)
    r = show()  # the latest run
    assert r.returncode == 0 and r.stdout.strip() == summary.render(con, 2).strip()
    assert "7.25" in r.stdout and "node 3" in r.stdout   # memeater's own part: chunk times and fill order
    assert show("1").stdout.strip() == summary.render(con, 1).strip()
    bad = show("9")
    assert bad.returncode == 2 and bad.stderr.strip() == f"error: {tmp_path / 'r.db'}: no run 9"


def test_the_test_command_keeps_each_suite_s_times_and_only_the_last_ten(tmp_path, monkeypatch):
    """What a cold suite (CI's) spent its time on stays readable after it:
    pytest writes a JUnit file per run under the cache, old ones pruned; a
    --junitxml of the caller's own is left as it is."""
    import importlib.util
    import os
    from pathlib import Path
    spec = importlib.util.spec_from_file_location("vmlab_run", REPO / "run.py")
    run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run)
    monkeypatch.setenv("VMLAB_CACHE", str(tmp_path))
    calls = []
    reports = tmp_path / "test-reports"
    reports.mkdir()
    for i in range(12):
        f = reports / f"junit-old-{i:02d}.xml"
        f.write_text("<testsuites/>")
        os.utime(f, (1e9 + i, 1e9 + i))  # oldest first

    def pytest(argv, cwd=None):
        calls.append(argv)
        junit = [a for a in argv if a.startswith("--junitxml=")]
        if junit:  # as pytest would
            Path(junit[0].split("=", 1)[1]).write_text("<testsuites/>")
        return 0
    monkeypatch.setattr(run.subprocess, "call", pytest)
    assert run.cmd_test(["-m", "not slow"]) == 0
    junit = [a for a in calls[0] if a.startswith("--junitxml=")]
    assert len(junit) == 1 and junit[0].split("=", 1)[1].startswith(str(reports / "junit-"))
    assert "-n" in calls[0] and calls[0][-2:] == ["-m", "not slow"]
    kept = sorted(p.name for p in reports.glob("junit-*.xml"))
    assert len(kept) == 10 and "junit-old-02.xml" not in kept and "junit-old-03.xml" in kept  # this run's kept
    mine = tmp_path / "mine.xml"
    for own in ([f"--junitxml={mine}"], ["--junit-xml", str(mine)]):
        run.cmd_test(own)
        assert not [a for a in calls[-1] if a.startswith("--junitxml=") and a != f"--junitxml={mine}"]
    monkeypatch.setenv("PYTEST_ADDOPTS", f"-q --junitxml={tmp_path / 'ci.xml'}")
    run.cmd_test([])
    assert not [a for a in calls[-1] if a.startswith("--junitxml")]
    assert len(list(reports.glob("junit-*.xml"))) == 10
