"""Bad input: one line naming the file/field and what was expected, exit 2,
nothing written to the results database."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
ENV = dict(os.environ, VMLAB_IN_VENV="1")


def run(args, tmp):
    return subprocess.run([sys.executable, str(REPO / "run.py"), *args, "--db", str(tmp / "r.db")],
                          env=ENV, capture_output=True, text=True, cwd=tmp)


@pytest.mark.parametrize("args,expect", [
    (["--topology", "nosuch"], "--topology"),
    (["--exp", "nosuch"], "--exp"),
    (["--param", "chunkz=3"], "unknown parameter 'chunkz'"),
    (["--param", "cycles=x"], "'cycles': expected int"),
    (["--kernel", "nosuch-patches"], "patch set"),
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


def test_help_explains_every_option(tmp_path):
    r = subprocess.run([sys.executable, str(REPO / "run.py"), "--help"], env=ENV, capture_output=True, text=True)
    assert r.returncode == 0
    for opt in ("--topology", "--exp", "--param", "--kernel", "--flavor", "--qemu-mode", "--timing", "--timeout", "--db"):
        assert opt in r.stdout
    assert "query SQL" in r.stdout and "list" in r.stdout


def test_list_and_query(tmp_path):
    r = subprocess.run([sys.executable, str(REPO / "run.py"), "list"], env=ENV, capture_output=True, text=True)
    assert r.returncode == 0 and "gs1280-32" in r.stdout and "4x8 torus" in r.stdout and "chunk_frac" in r.stdout
    import sqlite3
    from analysis import db
    db.connect(tmp_path / "r.db").close()
    q = subprocess.run([sys.executable, str(REPO / "run.py"), "query", "SELECT 1 AS one, 'x' AS two", "--csv",
                        "--db", str(tmp_path / "r.db")], env=ENV, capture_output=True, text=True)
    assert q.returncode == 0 and q.stdout.splitlines() == ["one,two", "1,x"]
    w = subprocess.run([sys.executable, str(REPO / "run.py"), "query", "DELETE FROM runs",
                        "--db", str(tmp_path / "r.db")], env=ENV, capture_output=True, text=True)
    assert w.returncode == 2 and "readonly" in w.stderr
