"""./run.py browse (Datasette, read-only) and query --parquet."""
import hashlib
import json
import socket
import subprocess
import time
import urllib.request

import pytest

import topologies
from analysis import browse, datasette_metadata, db, export
from tests import bootstrapped
from tests.e2e import ENV, vmlab, vmlab_cmd
from tests.runrows import run_start


def fresh(tmp_path):
    return db.connect(tmp_path / "r.db")


def test_every_table_and_view_is_described_and_every_description_exists(tmp_path):
    con = fresh(tmp_path)
    have = {n for _, n in db.tables(con)}
    meta = datasette_metadata.metadata("r")["databases"]["r"]["tables"]
    assert have - set(meta) == set(), "tables without a description"
    assert set(meta) - have == set(), "descriptions of tables that do not exist"
    for name, m in meta.items():
        cols = {r[1] for r in con.execute(f"PRAGMA table_info('{name}')")}
        assert set(m.get("columns", {})) <= cols, name


def test_every_canned_query_runs_on_a_new_database(tmp_path):
    con = fresh(tmp_path)
    db.start_run(con, run_start(topologies.load("x86-2s")))
    queries = datasette_metadata.metadata("r")["databases"]["r"]["queries"]
    assert len(queries) >= 6
    for q in queries.values():
        con.execute(q["sql"]).fetchall()  # raises on a wrong table or column


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def get(url: str):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.status, r.read().decode()


def test_browse_serves_the_database_read_only(tmp_path):
    con = fresh(tmp_path)
    db.start_run(con, run_start(topologies.load("gs1280-8")))
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    before = hashlib.sha256((tmp_path / "r.db").read_bytes()).hexdigest()
    port = free_port()
    p = subprocess.Popen(vmlab_cmd(tmp_path, "browse", "--port", str(port), runs_dir=False), env=ENV,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        end = time.monotonic() + 60
        while True:
            try:
                get(base + "/")
                break
            except OSError:
                assert p.poll() is None and time.monotonic() < end, "datasette did not start"
                time.sleep(0.5)
        status, page = get(base + "/r/runs")
        assert status == 200 and "gs1280-8" in page
        # the table's description from our metadata is on its page
        assert "how it was produced" in page
        status, body = get(base + "/r/latest_runs.json?_shape=array")
        rows = json.loads(body)
        assert rows and rows[0]["topology"] == "gs1280-8"
        # a write through SQL is refused
        req = urllib.request.Request(base + "/r.json?sql=" + urllib.parse.quote("DELETE FROM runs"))
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                out = json.loads(r.read())
                assert not out.get("ok", False)
        except urllib.error.HTTPError as e:
            assert e.code >= 400
    finally:
        p.terminate()
        p.wait(timeout=30)
    with pytest.raises(OSError):  # Datasette went down with it, port and all
        urllib.request.urlopen(base, timeout=5)
    assert hashlib.sha256((tmp_path / "r.db").read_bytes()).hexdigest() == before
    c = db.connect(tmp_path / "r.db", readonly=True)
    assert c.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1


def test_browse_without_a_database_is_one_line(tmp_path, capsys):
    assert browse.main(["--db", str(tmp_path / "none.db")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "none.db" in err[0]


def test_parquet_round_trips_types_and_nulls(tmp_path):
    pq = bootstrapped.pip("pyarrow.parquet", "pyarrow")
    cols = ["i", "f", "mixed", "s", "empty"]
    rows = [(1, 1.5, 1, "a", None), (None, None, 2.5, None, None), (3, 2.0, 3, "c", None)]
    assert export.parquet(cols, rows, tmp_path / "o.parquet") == 3
    t = pq.read_table(tmp_path / "o.parquet")
    assert [str(x) for x in t.schema.types] == ["int64", "double", "double", "string", "string"]
    assert t.to_pydict() == {"i": [1, None, 3], "f": [1.5, None, 2.0], "mixed": [1.0, 2.5, 3.0],
                             "s": ["a", None, "c"], "empty": [None, None, None]}


def test_parquet_to_an_unwritable_place_fails_cleanly(tmp_path):
    with pytest.raises(export.ExportError):
        export.parquet(["a"], [(1,)], tmp_path / "no" / "such" / "dir" / "o.parquet")
    assert not list(tmp_path.rglob("*parquet*"))


def test_query_parquet_end_to_end(tmp_path):
    pq = bootstrapped.pip("pyarrow.parquet", "pyarrow")
    con = fresh(tmp_path)
    for name in ("x86-2s", "gs1280-8"):
        db.start_run(con, run_start(topologies.load(name)))
    con.close()
    out = tmp_path / "runs.parquet"
    r = vmlab(ENV, tmp_path, "query", "SELECT id, topology, nodes FROM runs", "--parquet", str(out), runs_dir=False)
    assert r.returncode == 0, r.stderr
    assert "2 rows, 3 columns" in r.stdout
    assert pq.read_table(out).to_pydict() == {"id": [1, 2], "topology": ["x86-2s", "gs1280-8"], "nodes": [2, 8]}
