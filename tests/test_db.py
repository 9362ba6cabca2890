import sqlite3

import pytest

import topologies as T
from analysis import db, schema
from protocol import records as R
from tests.runrows import run_end, run_start

DATA = __import__("pathlib").Path(__file__).parent / "data"


def test_fresh_database_gets_current_schema(tmp_path):
    con = db.connect(tmp_path / "r.db")
    assert con.execute("PRAGMA user_version").fetchone()[0] == db.SCHEMA_VERSION
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    names = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
    assert {"runs", "records", "chunk_times", "v_vmstat_delta", "v_runs"} <= names


def test_migration_from_version_1_keeps_rows(tmp_path):
    path = tmp_path / "old.db"
    con = sqlite3.connect(path)
    con.executescript(schema.MIGRATIONS[0] + "PRAGMA user_version = 1;")
    con.execute("INSERT INTO runs (status, started_at, host, topology, topology_sha256, topology_toml, topology_shape,"
                " nodes, cpus, memory_mib_per_node, scale, native_isa, guest_isa, experiment, params_json, kernel_arch,"
                " patch_set, kernel_flavor, engine, engine_version, qemu_mode, timing_mode, seed, command_line,"
                " limitations) VALUES ('ok', 'x', 'h', 't', 's', '', '', 1, 1, 64, 1, 'a', 'a', 'e', '{}', 'x86_64',"
                " 'vanilla', 'default', 'qemu', '10', 'icount', 'off', 0, '', '')")
    con.commit()
    con.close()
    con = db.connect(path)
    assert con.execute("PRAGMA user_version").fetchone()[0] == db.SCHEMA_VERSION
    assert con.execute("SELECT COUNT(*) FROM v_runs").fetchone()[0] == 1


def _schema(con):
    """Every table's and view's columns (name, type, not null, primary key)."""
    out = {}
    for name, in con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"):
        out[name] = [tuple(c[1:3]) + (c[3], c[5]) for c in con.execute(f"PRAGMA table_info({name})")]
    return out


def test_a_database_from_before_experiments_owned_their_tables_ends_like_a_new_one(tmp_path):
    """Schema 6 created chunk_times, qsbench_procs, ... in the core's
    migrations; now each experiment's results.py does. Both paths must give
    the same tables, columns and views."""
    old = sqlite3.connect(tmp_path / "old.db")
    old.executescript((DATA / "schema-v6.sql").read_text())
    old.close()
    migrated = db.connect(tmp_path / "old.db")
    fresh = db.connect(tmp_path / "new.db")
    assert _schema(migrated) == _schema(fresh)
    assert {"chunk_times", "qsbench_procs", "kvio_levels", "v_timing_chunks"} <= set(_schema(fresh))
    from analysis import experiment_results
    parts = dict(fresh.execute("SELECT part, version FROM schema_parts"))
    assert parts == {f"experiment {n}": len(m.SCHEMA) for n, m in experiment_results.all_results().items()
                     if getattr(m, "SCHEMA", None)}
    assert parts == dict(migrated.execute("SELECT part, version FROM schema_parts"))


def test_an_experiment_schema_newer_than_vmlab_is_refused(tmp_path):
    db.connect(tmp_path / "r.db").close()
    con = sqlite3.connect(tmp_path / "r.db")
    con.execute("UPDATE schema_parts SET version = 99 WHERE part = 'experiment memeater'")
    con.commit()
    con.close()
    with pytest.raises(db.SchemaError, match="experiment memeater's schema version 99 is newer"):
        db.connect(tmp_path / "r.db", readonly=True)


def test_the_typed_run_records_are_the_runs_columns(tmp_path):
    cols = {c[1] for c in db.connect(tmp_path / "r.db").execute("PRAGMA table_info(runs)")}
    topo = T.load("gs1280-8")
    assert set(row(topo).columns()) <= cols and set(end().columns()) <= cols


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "new.db"
    con = sqlite3.connect(path)
    con.execute(f"PRAGMA user_version = {db.SCHEMA_VERSION + 1}")
    con.close()
    with pytest.raises(db.SchemaError, match="newer"):
        db.connect(path)


def row(topo, experiment="memeater"):
    return run_start(topo, experiment=experiment)


def end():
    return run_end()


CONSOLE = """
@@VMLAB {"type":"machine","nodes":[{"node":0,"cpus":"0","mem_total_kib":60000},{"node":1,"cpus":"1","mem_total_kib":60000}],"distances":[[10,13],[13,10]],"zone_reclaim_mode":"0","uptime":"1.5 1.0"}
@@VMLAB {"type":"vmstat","phase":"before","counters":{"pgfault":100,"pswpout":0}}
@@VMLAB {"type":"nodemem","phase":"before","nodes":[{"node":0,"MemTotal":60000,"MemUsed":10000},{"node":1,"MemTotal":60000,"MemUsed":5000}]}
@@VMLAB {"type":"chunk","cycle":0,"chunk":0,"wall_ms":5.5,"cpu_ms":5.4,"placement":{"0":12,"1":4},"absent":0,"sampled":16,"free_kib":[30000,55000],"swap_used_kib":0}
@@VMLAB {"type":"chunk","cycle":0,"chunk":1,"wall_ms":6.5,"cpu_ms":6.4,"placement":{"1":16},"absent":0,"sampled":16,"free_kib":[30000,40000],"swap_used_kib":0}
garbage @@VMLAB {"type":
@@VMLAB {"type":"vmstat","phase":"after","counters":{"pgfault":900,"pswpout":7}}
@@VMLAB {"type":"nodemem","phase":"after","nodes":[{"node":0,"MemTotal":60000,"MemUsed":30000},{"node":1,"MemTotal":60000,"MemUsed":25000}]}
@@VMLAB {"type":"kswapd","phase":"before","clk_tck":100,"kswapd":{"0":0,"1":0}}
@@VMLAB {"type":"kswapd","phase":"after","clk_tck":100,"kswapd":{"0":150,"1":0}}
@@VMLAB {"type":"nodestat","phase":"before","nodes":[{"numa_miss":0,"nr_vmscan_write":3},{"numa_miss":5,"nr_vmscan_write":0}]}
@@VMLAB {"type":"nodestat","phase":"after","nodes":[{"numa_miss":0,"nr_vmscan_write":10},{"numa_miss":9,"nr_vmscan_write":0}]}
@@VMLAB {"type":"end","rc":0}
"""  # noqa: E501 (records as the guest prints them, one a line)


def test_records_land_in_typed_tables(tmp_path):
    text = open(T.resolve("gs1280-8")).read()
    topo = T.parse(text.replace("count = 8", "count = 2").replace("dims = [2, 4]", "dims = [2]"), tmp_path / "two.toml")
    con = db.connect(tmp_path / "r.db")
    rid = db.start_run(con, row(topo))
    parsed = R.parse_text(CONSOLE)
    db.finish_run(con, rid, end(), parsed, topo)
    r = con.execute("SELECT status, ingest_errors FROM runs WHERE id = ?", (rid,)).fetchone()
    assert tuple(r) == ("ok", 1)
    assert con.execute("SELECT COUNT(*) FROM records WHERE run_id = ?", (rid,)).fetchone()[0] == 12
    chunks = con.execute("SELECT chunk, wall_ms, main_node FROM chunk_times ORDER BY chunk").fetchall()
    assert [tuple(c) for c in chunks] == [(0, 5.5, 0), (1, 6.5, 1)]
    d = dict(con.execute("SELECT counter, delta FROM v_vmstat_delta").fetchall())
    assert d == {"pgfault": 800, "pswpout": 7}
    used = dict(con.execute("SELECT node, delta_kib FROM v_node_mem_delta WHERE field = 'MemUsed'").fetchall())
    assert used == {0: 20000, 1: 20000}
    assert con.execute("SELECT cpu_s FROM kswapd WHERE phase='after' AND node=0").fetchone()[0] == 1.5
    dist = con.execute("SELECT distance, expected, hops FROM guest_distances WHERE src=0 AND dst=1").fetchone()
    assert tuple(dist) == (13, 13, 1)
    assert con.execute("SELECT COUNT(*) FROM node_free").fetchone()[0] == 4
    written = dict(con.execute("SELECT node, delta FROM v_node_stat_delta WHERE counter = 'nr_vmscan_write'"))
    assert written == {0: 7, 1: 0}
    miss = dict(con.execute("SELECT node, delta FROM v_node_stat_delta WHERE counter = 'numa_miss'"))
    assert miss == {0: 0, 1: 4}


def test_failed_ingest_leaves_status_running_not_half_written(tmp_path):
    topo = T.load("gs1280-8")
    con = db.connect(tmp_path / "r.db")
    rid = db.start_run(con, row(topo))
    bad = R.Parsed(records=[R.Record(1, "chunk", {"cycle": 0, "chunk": 0, "wall_ms": None})])  # NOT NULL violated
    with pytest.raises(sqlite3.IntegrityError):
        db.finish_run(con, rid, end(), bad, topo)
    assert con.execute("SELECT status FROM runs WHERE id = ?", (rid,)).fetchone()[0] == "running"
    assert con.execute("SELECT COUNT(*) FROM records").fetchone()[0] == 0


def test_stale_running_rows_are_reaped(tmp_path):
    topo = T.load("gs1280-8")
    con = db.connect(tmp_path / "r.db")
    rid = db.start_run(con, row(topo))
    con.execute("UPDATE runs SET pid = 999999999 WHERE id = ?", (rid,))
    con.commit()
    assert db.reap_stale(con, "h") == 1
    assert con.execute("SELECT status FROM runs WHERE id = ?", (rid,)).fetchone()[0] == "aborted"


def _first_connect(path):
    db.connect(path).close()
    return True


def test_concurrent_first_runs_migrate_once_and_none_is_lost(tmp_path):
    """Issue 10's finding: six runs started at once on a new database, and one
    died on 'duplicate column name' (two processes migrating at once)."""
    import concurrent.futures
    import multiprocessing
    path = tmp_path / "new.db"
    ctx = multiprocessing.get_context("spawn")   # separate processes, separate connections
    with concurrent.futures.ProcessPoolExecutor(8, mp_context=ctx) as pool:
        results = list(pool.map(_first_connect, [path] * 8))
    assert results == [True] * 8
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA user_version").fetchone()[0] == db.SCHEMA_VERSION
    cols = [r[1] for r in con.execute("PRAGMA table_info(runs)")]
    assert len(cols) == len(set(cols)) and "clock_model" in cols


def test_a_run_waits_for_another_holding_the_database_past_sqlites_5_s(tmp_path):
    """Two runs started together into one new database (the determinism
    pairs): one died on 'database is locked' at its first PRAGMA while the
    other held the file on a loaded host longer than sqlite3's default 5 s
    busy timeout. A writer now waits (db.BUSY_TIMEOUT_S)."""
    import subprocess
    import sys
    path = tmp_path / "busy.db"
    # a new file, not yet in WAL mode, that another process is reading: the
    # switch to WAL needs it alone
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sqlite3, sys, time\n"
        f"c = sqlite3.connect({str(path)!r}, isolation_level=None)\n"
        "c.execute('CREATE TABLE t (x)'); c.execute('BEGIN'); c.execute('SELECT * FROM t').fetchall()\n"
        "print('held', flush=True); time.sleep(6); c.execute('COMMIT')")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        con = db.connect(path)   # sqlite3's default would raise 'database is locked' after 5 s
        assert con.execute("PRAGMA user_version").fetchone()[0] == db.SCHEMA_VERSION
        assert holder.poll() is not None or holder.wait(timeout=30) == 0
    finally:
        holder.kill()
    assert db.BUSY_TIMEOUT_S > 6


def test_memeater_cycles_land_with_their_reclaim_deltas(tmp_path):
    """A record type added to one experiment: the guest prints it
    (memeater.c), its results.py stores it (SCHEMA step 2), and an old
    database gains the table on its next connect."""
    con = db.connect(tmp_path / "r.db")
    con.execute("DROP TABLE memeater_cycles")  # as a database made before the step
    con.execute("UPDATE schema_parts SET version = 1 WHERE part = 'experiment memeater'")
    con.commit()
    con.close()
    con = db.connect(tmp_path / "r.db")
    topo = T.load("gs1280-8")
    rid = db.start_run(con, row(topo))
    text = "".join('@@VMLAB {"type":"memeater_cycle","cycle":%d,"wall_ms":%s,"swap_used_kib":%d,'
                   '"vmstat":{"pswpout":%d,"pgscan_kswapd":%d,"pgmajfault":0}}\n' % c
                   for c in ((0, 812.5, 0, 0, 10), (1, 2400.0, 51200, 12800, 40000)))
    db.finish_run(con, rid, end(), R.parse_text(text), topo)
    rows = con.execute("SELECT cycle, wall_ms, swap_used_kib, pswpout, pgscan_kswapd, pswpin FROM memeater_cycles "
                       "WHERE run_id = ? ORDER BY cycle", (rid,)).fetchall()
    assert [tuple(r) for r in rows] == [(0, 812.5, 0, 0, 10, None), (1, 2400.0, 51200, 12800, 40000, None)]
