"""analysis/kit.py, the kit every experiment's results.py is written with:
its declarations create the tables the hand-written SCHEMA steps did, refuse
a row key that is not a column, are what ./run.py browse describes; the
probes' shared readers; the summary's text table."""
import json
import re
import sqlite3

import pytest

import topologies as T
from analysis import datasette_metadata, db, experiment_results, kit
from analysis.kit import RUN_ID, Column, DeclarationError, Table, View
from analysis.schema import MIGRATIONS
from protocol import records as R
from tests.e2e import REPO
from tests.runrows import run_end, run_start

# Each experiment's SCHEMA steps as its results.py wrote them by hand before the kit
BEFORE = REPO / "tests" / "data" / "experiment-schema-before-kit.sql"


def old_steps() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for m in re.finditer(r"^-- step (\w+) (\d+)\n(.*?)(?=^-- step |\Z)", BEFORE.read_text(), re.M | re.S):
        out.setdefault(m[1], []).append(m[3])
        assert len(out[m[1]]) == int(m[2]), m[0][:40]
    return out


def core() -> sqlite3.Connection:
    con = sqlite3.connect(":memory:")
    for step in MIGRATIONS:
        con.executescript(step)
    return con


def created(steps: list[str]) -> dict[str, dict]:
    """What the steps create over the core schema: per table, view and index,
    its columns (PRAGMA table_info), its indexes (index_list and the columns
    of each), its foreign keys; the views' columns."""
    con = core()
    before = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
    for step in steps:
        con.executescript(step)
    out = {}
    for kind, name in con.execute("SELECT type, name FROM sqlite_master ORDER BY name"):
        if name in before:
            continue
        if kind == "index":
            out[name] = {"index on": con.execute("SELECT tbl_name FROM sqlite_master WHERE name = ?",
                                                 (name,)).fetchone()[0],
                         "columns": con.execute(f"PRAGMA index_info('{name}')").fetchall()}
            continue
        out[name] = {"type": kind, "columns": con.execute(f"PRAGMA table_info('{name}')").fetchall(),
                     "indexes": [(i[1:], con.execute(f"PRAGMA index_info('{i[1]}')").fetchall())
                                 for i in con.execute(f"PRAGMA index_list('{name}')")],
                     "foreign keys": con.execute(f"PRAGMA foreign_key_list('{name}')").fetchall()}
    return out


def test_the_declarations_create_the_tables_the_hand_written_steps_did():
    """Column for column, type for type, key for key, index for index, step
    for step (a database that has the old steps counts them in schema_parts,
    and is not migrated again)."""
    old = old_steps()
    have = {n: h.SCHEMA for n in experiment_results.all_results() if (h := experiment_results.results(n)).SCHEMA}
    # every experiment that had hand-written steps has them declared; one
    # written with the kit from the start (tiering) has none to match
    assert set(old) <= set(have)
    for name, steps in old.items():
        # the frozen steps first, as they were; steps declared since (mlockchurn's CPU columns) come after
        assert len(have[name]) >= len(steps), name
        want, got = created(steps), created(list(have[name])[:len(steps)])
        assert got == want, name
        assert any(x["type"] == "table" for x in got.values())
    assert {"v_chunk_cycle", "v_timing_chunks"} <= set(created(list(have["memeater"])))


def test_every_experiment_table_is_declared_and_described_and_browse_shows_its_description(tmp_path):
    """An experiment's tables and views are described where they are
    declared (its results.py TABLES), and datasette_metadata reads them from
    there instead of repeating them."""
    meta = datasette_metadata.metadata("r")["databases"]["r"]["tables"]
    hand = {**datasette_metadata.TABLES, **datasette_metadata.MODEL_TABLES, **datasette_metadata.VIEWS,
            **datasette_metadata.LATER_VIEWS}
    for name in experiment_results.all_results():
        h = experiment_results.results(name)
        made = {n for n, x in created(list(h.SCHEMA)).items() if "type" in x}
        assert made == {t.name for t in h.TABLES}, name  # every table and view its SCHEMA makes is declared
        for t in h.TABLES:
            assert t.doc and t.name not in hand, t.name
            assert meta[t.name]["description"] == t.doc
            assert meta[t.name].get("columns", {}) == t.descriptions()
            if isinstance(t, Table):
                cols = {r[1] for r in created(list(h.SCHEMA))[t.name]["columns"]}
                assert set(t.descriptions()) <= cols == set(t.names)
    con = db.connect(tmp_path / "r.db")  # and browse describes every table of a new database
    assert {n for _, n in db.tables(con)} == set(meta)


def test_insert_refuses_a_key_that_is_not_a_column():
    t = Table("tiny", "a table for the test", (RUN_ID, Column("n", "INTEGER", not_null=True),
                                              Column("v", "REAL", "a value")), key=("run_id", "n"))
    con = core()
    con.executescript(kit.schema(t)[0])
    assert t.insert(con, [{"run_id": 1, "n": 0, "v": 1.5}, {"run_id": 1, "n": 1}]) == 2
    for bad in ({"run_id": 1, "n": 2, "value": 2.0}, [{"run_id": 1, "n": 2}, {"run_id": 1, "n": 3, "vv": 1}]):
        with pytest.raises(DeclarationError) as e:
            t.insert(con, bad)
        assert str(e.value).startswith("table tiny: no column 'v") and "its columns: run_id, n, v" in str(e.value)
    with pytest.raises(DeclarationError, match="table tiny: no column 'w'"):
        t.from_body({}, w=1)
    assert con.execute("SELECT n, v FROM tiny ORDER BY n").fetchall() == [(0, 1.5), (1, None)]
    # a row from a record's body: by column name (or field), then the values given, then the default
    t2 = Table("t2", "another", (RUN_ID, Column("a", "INTEGER", field="alpha"), Column("b", "INTEGER", default=7)))
    assert t2.from_body({"alpha": 1, "junk": 2}, run_id=3) == {"run_id": 3, "a": 1, "b": 7}


def test_declarations_grow_by_steps_and_misdeclarations_are_refused():
    t = Table("grow", "grows", (RUN_ID, Column("a", "INTEGER"), Column("b", "TEXT", step=2)), key=("run_id", "a"),
              indexes=(("a",),))
    v = View("v_grow", "a view of it", "SELECT run_id, a, b FROM grow", step=3)
    steps = kit.schema(t, v)
    assert len(steps) == 3 and "b TEXT" not in steps[0] and steps[1] == "ALTER TABLE grow ADD COLUMN b TEXT;\n"
    assert "CREATE INDEX IF NOT EXISTS grow_a ON grow (a);" in steps[0]
    got = created(steps)
    assert [c[1] for c in got["grow"]["columns"]] == ["run_id", "a", "b"] and "v_grow" in got
    for build, msg in (
            (lambda: Table("x", "x", (RUN_ID,), key=("nope",)), "key or index"),
            (lambda: Table("x", "x", (RUN_ID, Column("a", "INTEGER", step=2)), key=("run_id", "a")),
             "ALTER TABLE cannot add it"),
            (lambda: Table("x", "x", (RUN_ID, Column("a", "INTEGER", step=2), Column("b", "INTEGER"))),
             "must come after"),
            (lambda: Table("x", "x", (RUN_ID, RUN_ID)), "declared twice"),
            (lambda: Column("a", "FLOAT"), "one of INTEGER"),
            (lambda: kit.schema(Table("x", "x", (RUN_ID,), step=2)), "schema step 1: nothing declared")):
        with pytest.raises(DeclarationError, match=msg):
            build()


def test_bodies_and_run_topology_read_a_tiny_database(tmp_path):
    topo = T.load("gs1280-8")
    con = db.connect(tmp_path / "r.db")
    rid = db.start_run(con, run_start(topo, experiment="latprobe"))
    text = "".join("@@VMLAB " + json.dumps(b) + "\n" for b in (
        {"type": "chase", "node": 2}, {"type": "pause", "ns_per_turn": 1.5}, {"type": "chase", "node": 0},
        {"type": "chase", "node": 1}))
    db.finish_run(con, rid, run_end(), R.parse_text(text), topo)
    assert [b["node"] for b in kit.bodies(con, rid, "chase")] == [2, 0, 1]  # in console order
    assert kit.bodies(con, rid, "pause") == [{"type": "pause", "ns_per_turn": 1.5}]
    assert kit.bodies(con, rid, "none") == [] and kit.bodies(con, rid + 1, "chase") == []
    got = kit.run_topology(con, rid)
    assert (got.name, got.nodes, got.hops) == (topo.name, topo.nodes, topo.hops)
    with pytest.raises(LookupError, match="no run 99"):
        kit.run_topology(con, 99)


def test_text_table():
    assert kit.text_table(["name", "n"], [["a", 1], ["long one", None]], left={0}) == [
        "name      n", "--------  -", "a         1", "long one  -"]
    assert kit.text_table(["x", "y"], []) == ["x  y", "-  -"]
