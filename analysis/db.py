"""Results stage: one SQLite file (WAL), schema versioned by PRAGMA user_version.

A `runs` row holds everything needed to repeat a run; what the guest
reported hangs off it: the raw records (kept verbatim, so any figure can be
re-derived), and typed tables for the common questions. A run is written in
two transactions: the row as `running` when the guest starts, then the
records and the final status together, so a crash or Ctrl-C never leaves
records without a status.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
from pathlib import Path

import experiments
from analysis import ingest as core_ingest
from analysis.runrow import RunEnd, RunStart

# Each entry moves the core schema one version up; never edit a released
# entry. (Entries 1, 2, 3 and 5 once also created experiments' tables and
# views: chunk_times, v_chunk_cycle, v_timing_chunks, mlockchurn_chunks,
# kvio_levels, forkstorm_*, qsbench_procs. Those now live in each
# experiment's results.py SCHEMA with the same DDL and IF NOT EXISTS, so
# databases made before and after the move end up the same.)
MIGRATIONS = [
    # 1: runs and what hangs off them
    """
    CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        status TEXT NOT NULL CHECK (status IN ('running', 'ok', 'failed', 'aborted')),
        reason TEXT,
        started_at TEXT NOT NULL,
        ended_at TEXT,
        wall_s REAL,
        boot_wall_s REAL,
        host TEXT NOT NULL,
        pid INTEGER,
        vmlab_version TEXT,
        topology TEXT NOT NULL,
        topology_sha256 TEXT NOT NULL,
        topology_toml TEXT NOT NULL,
        topology_shape TEXT NOT NULL,
        nodes INTEGER NOT NULL,
        cpus INTEGER NOT NULL,
        memory_mib_per_node INTEGER NOT NULL,
        scale REAL NOT NULL,
        native_isa TEXT NOT NULL,
        guest_isa TEXT NOT NULL,
        experiment TEXT NOT NULL,
        params_json TEXT NOT NULL,
        kernel_arch TEXT NOT NULL,
        kernel_release TEXT,
        kernel_source TEXT,
        patch_set TEXT NOT NULL,
        kernel_flavor TEXT NOT NULL,
        kernel_config_sha256 TEXT,
        kernel_sha256 TEXT,
        initramfs_sha256 TEXT,
        engine TEXT NOT NULL,
        engine_version TEXT NOT NULL,
        qemu_mode TEXT NOT NULL,
        timing_mode TEXT NOT NULL,
        seed INTEGER NOT NULL,
        command_line TEXT NOT NULL,
        log_path TEXT,
        log_sha256 TEXT,
        limitations TEXT NOT NULL,
        ingest_errors INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE records (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        lineno INTEGER NOT NULL,
        type TEXT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (run_id, lineno)
    );
    CREATE TABLE guest_nodes (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        node INTEGER NOT NULL,
        cpus TEXT NOT NULL,
        mem_total_kib INTEGER,
        hmat_read_latency_ns INTEGER,
        PRIMARY KEY (run_id, node)
    );
    CREATE TABLE guest_distances (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        src INTEGER NOT NULL,
        dst INTEGER NOT NULL,
        distance INTEGER NOT NULL,
        expected INTEGER NOT NULL,
        hops INTEGER NOT NULL,
        PRIMARY KEY (run_id, src, dst)
    );
    CREATE TABLE node_free (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        cycle INTEGER,
        chunk INTEGER,
        node INTEGER NOT NULL,
        free_kib INTEGER NOT NULL,
        PRIMARY KEY (run_id, seq, node)
    );
    CREATE TABLE node_mem (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        phase TEXT NOT NULL,
        node INTEGER NOT NULL,
        field TEXT NOT NULL,
        kib INTEGER NOT NULL,
        PRIMARY KEY (run_id, phase, node, field)
    );
    CREATE TABLE node_stat (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        phase TEXT NOT NULL,
        node INTEGER NOT NULL,
        counter TEXT NOT NULL,
        value INTEGER NOT NULL,
        PRIMARY KEY (run_id, phase, node, counter)
    );
    CREATE TABLE vmstat (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        phase TEXT NOT NULL,
        counter TEXT NOT NULL,
        value INTEGER NOT NULL,
        PRIMARY KEY (run_id, phase, counter)
    );
    CREATE TABLE kswapd (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        phase TEXT NOT NULL,
        node INTEGER NOT NULL,
        cpu_s REAL NOT NULL,
        PRIMARY KEY (run_id, phase, node)
    );
    CREATE TABLE metrics (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        value REAL,
        text TEXT,
        unit TEXT,
        PRIMARY KEY (run_id, name)
    );
    """,
    # 2: views for the common cross-run questions
    """
    CREATE VIEW v_vmstat_delta AS
        SELECT a.run_id, a.counter, a.value - b.value AS delta
        FROM vmstat a JOIN vmstat b ON a.run_id = b.run_id AND a.counter = b.counter
        WHERE a.phase = 'after' AND b.phase = 'before';
    CREATE VIEW v_node_mem_delta AS
        SELECT a.run_id, a.node, a.field, b.kib AS before_kib, a.kib AS after_kib, a.kib - b.kib AS delta_kib
        FROM node_mem a JOIN node_mem b ON a.run_id = b.run_id AND a.node = b.node AND a.field = b.field
        WHERE a.phase = 'after' AND b.phase = 'before';
    CREATE VIEW v_node_stat_delta AS
        SELECT a.run_id, a.node, a.counter, a.value - b.value AS delta
        FROM node_stat a JOIN node_stat b ON a.run_id = b.run_id AND a.node = b.node AND a.counter = b.counter
        WHERE a.phase = 'after' AND b.phase = 'before';
    CREATE VIEW v_runs AS
        SELECT id, status, topology, topology_shape, nodes, experiment, patch_set, kernel_flavor,
               kernel_release, qemu_mode, timing_mode, scale, started_at, wall_s, reason
        FROM runs;
    """,
    # 3: the timing model's results (timing/; analysis/timing.py ingests them)
    """
    ALTER TABLE runs ADD COLUMN timing_plugin TEXT;
    ALTER TABLE runs ADD COLUMN qemu_maxrss_kib INTEGER;
    CREATE TABLE timing_run (
        run_id INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
        mode TEXT NOT NULL, cycle_ps INTEGER, l2_ps INTEGER, ctrl_ps INTEGER, half_hop_ps INTEGER,
        state_bytes INTEGER, windows INTEGER, unmapped INTEGER, address_map TEXT
    );
    CREATE TABLE timing_cpu (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        cpu INTEGER NOT NULL, node INTEGER NOT NULL,
        insns INTEGER, time_ps INTEGER, stall_ps INTEGER, loads INTEGER, stores INTEGER, atomics INTEGER,
        l1_hits INTEGER, l2_hits INTEGER, misses INTEGER, remote INTEGER, c2c INTEGER, upgrades INTEGER,
        invals INTEGER, writebacks INTEGER, lock_xfers INTEGER, lock_ps INTEGER, io INTEGER, mem_ps INTEGER,
        PRIMARY KEY (run_id, cpu)
    );
    CREATE TABLE timing_kind (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        kind TEXT NOT NULL, insns INTEGER, accesses INTEGER, misses INTEGER, remote INTEGER, stall_ps INTEGER,
        PRIMARY KEY (run_id, kind)
    );
    CREATE TABLE timing_matrix (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        cpu_node INTEGER NOT NULL, home_node INTEGER NOT NULL, misses INTEGER NOT NULL, lat_ps INTEGER NOT NULL,
        PRIMARY KEY (run_id, cpu_node, home_node)
    );
    CREATE TABLE timing_hops (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        hops INTEGER NOT NULL, misses INTEGER, lat_ps INTEGER, c2c INTEGER, lock_xfers INTEGER, lock_ps INTEGER,
        PRIMARY KEY (run_id, hops)
    );
    CREATE TABLE timing_latency_hist (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        hops INTEGER NOT NULL, bin_ns INTEGER NOT NULL, count INTEGER NOT NULL,
        PRIMARY KEY (run_id, hops, bin_ns)
    );
    CREATE TABLE timing_symbols (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        symbol TEXT NOT NULL, accesses INTEGER, misses INTEGER, remote INTEGER, stall_ps INTEGER,
        lock_xfers INTEGER,
        PRIMARY KEY (run_id, symbol)
    );
    CREATE TABLE timing_resources (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        kind TEXT NOT NULL, src INTEGER NOT NULL, dst INTEGER NOT NULL, busy_ps INTEGER NOT NULL,
        PRIMARY KEY (run_id, kind, src, dst)
    );
    CREATE TABLE timing_phases (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        cpu INTEGER NOT NULL, phase_id INTEGER NOT NULL, phase TEXT, instance INTEGER NOT NULL,
        begin_ps INTEGER, end_ps INTEGER, insns INTEGER, loads INTEGER, stores INTEGER, atomics INTEGER,
        misses INTEGER, remote INTEGER, stall_ps INTEGER, mem_ps INTEGER, lock_xfers INTEGER, lock_ps INTEGER,
        PRIMARY KEY (run_id, cpu, phase_id, instance)
    );
    """,
    # 4: kernel comparisons (`./run.py --kernel a,b`): which runs form one, in order
    """
    CREATE TABLE compare_sets (
        id INTEGER PRIMARY KEY,
        created_at TEXT NOT NULL,
        label TEXT
    );
    CREATE TABLE compare_runs (
        compare_id INTEGER NOT NULL REFERENCES compare_sets(id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        PRIMARY KEY (compare_id, position)
    );
    CREATE VIEW v_compare AS
        SELECT c.compare_id, c.position, r.id AS run_id, r.patch_set, r.kernel_flavor, r.topology, r.experiment,
               r.status, r.wall_s
        FROM compare_runs c JOIN runs r ON r.id = c.run_id;
    """,
    # 5: records any reproducer may send (analysis/ingest.py): sanity
    # verdicts, kswapd CPU samples, lock_stat classes
    """
    CREATE TABLE repro_sanity (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        experiment TEXT NOT NULL,
        check_name TEXT NOT NULL,
        ok INTEGER NOT NULL,
        value REAL,
        expect TEXT,
        PRIMARY KEY (run_id, check_name)
    );
    CREATE TABLE repro_kswapd_samples (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        t_ms REAL NOT NULL,
        node INTEGER NOT NULL,
        cpu_s REAL NOT NULL,
        PRIMARY KEY (run_id, seq, node)
    );
    CREATE TABLE repro_lockstat (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        phase TEXT NOT NULL,
        rank INTEGER NOT NULL,
        class TEXT NOT NULL,
        contentions INTEGER,
        con_bounces INTEGER,
        wait_total_us REAL,
        wait_max_us REAL,
        acquisitions INTEGER,
        hold_total_us REAL,
        PRIMARY KEY (run_id, phase, rank)
    );
    """,
    # 6: per-vCPU guest time (our QEMU's series): how the run's clock was
    # kept, and each vCPU's own instructions, stall and clock at exit.
    """
    ALTER TABLE runs ADD COLUMN clock_model TEXT;
    ALTER TABLE runs ADD COLUMN quantum_ns INTEGER;
    ALTER TABLE runs ADD COLUMN disk_model TEXT;
    CREATE TABLE vcpu_clocks (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        cpu INTEGER NOT NULL,
        insns INTEGER NOT NULL,
        stall_ps INTEGER NOT NULL,
        clock_ps INTEGER NOT NULL,
        PRIMARY KEY (run_id, cpu)
    );
    """,
    # 7: experiments own their tables (experiments/<name>/results.py SCHEMA),
    # each versioned here on its own
    """
    CREATE TABLE schema_parts (
        part TEXT PRIMARY KEY,
        version INTEGER NOT NULL
    );
    """,
    # 8: studies (pipeline/study.py): a study file expanded into runs, each
    # keyed by a hash of what defines it (runs.run_key, also set on single
    # runs), so a study resumes; where each run executed.
    """
    ALTER TABLE runs ADD COLUMN run_key TEXT;
    CREATE INDEX runs_by_key ON runs (run_key, status);
    CREATE TABLE studies (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        path TEXT,
        sha256 TEXT NOT NULL,
        toml TEXT NOT NULL,
        created_at TEXT NOT NULL,
        UNIQUE (name, sha256)
    );
    CREATE TABLE study_runs (
        study_id INTEGER NOT NULL REFERENCES studies(id) ON DELETE CASCADE,
        key TEXT NOT NULL,
        position INTEGER NOT NULL,
        axes_json TEXT NOT NULL,
        spec_json TEXT NOT NULL,
        status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'ok', 'failed', 'aborted', 'lost')),
        run_id INTEGER REFERENCES runs(id) ON DELETE SET NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        executed_on TEXT,
        updated_at TEXT,
        PRIMARY KEY (study_id, key)
    );
    CREATE VIEW v_study_runs AS
        SELECT s.study_id, s.position, s.key, s.status, s.attempts, s.executed_on, s.run_id, s.axes_json,
               r.topology, r.experiment, r.patch_set, r.timing_mode, r.wall_s, r.reason
        FROM study_runs s LEFT JOIN runs r ON r.id = s.run_id;
    """,
    # 9: timing model 2 (memory-level parallelism): prefetches issued, and the
    # core's stalls by cause (timing/model_core.h); 0 on runs of model 1
    """
    ALTER TABLE timing_cpu ADD COLUMN prefetches INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE timing_cpu ADD COLUMN dep_stall_ps INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE timing_cpu ADD COLUMN fb_stall_ps INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE timing_cpu ADD COLUMN rob_stall_ps INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE timing_cpu ADD COLUMN sb_stall_ps INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE timing_cpu ADD COLUMN fence_stall_ps INTEGER NOT NULL DEFAULT 0;
    """,
    # 10: the engine's time the timing model does not price (x86 PAUSE beyond
    # a cycle, a halted vCPU's jump to the machine's time), which its clocks
    # now follow (vm_sync_time)
    """
    ALTER TABLE timing_cpu ADD COLUMN unpriced_ps INTEGER NOT NULL DEFAULT 0;
    """,
    # 11: how the run started: booted, or restored from a snapshot taken
    # after boot (configs/snapshot.py), and that snapshot's key
    """
    ALTER TABLE runs ADD COLUMN start TEXT NOT NULL DEFAULT 'booted';
    ALTER TABLE runs ADD COLUMN snapshot_key TEXT;
    """,
]
SCHEMA_VERSION = len(MIGRATIONS)


class SchemaError(RuntimeError):
    pass


def beside(db_path: Path | str, kind: str, name: str) -> Path:
    """A folder of files that belong to this database (`work`, `runs` or
    `report`), beside it and named after it as well: two databases in one
    folder both number their first study 1 and would otherwise share (and
    overwrite, adopt or kill) each other's task folders, consoles and
    reports."""
    p = Path(db_path).resolve()
    return p.parent / kind / f"{p.stem}-{name}"


def connect(path: Path | str, readonly: bool = False) -> sqlite3.Connection:
    path = Path(path)
    if readonly:
        if not path.exists():
            raise SchemaError(f"{path}: no results database yet (run an experiment first)")
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    else:
        con = sqlite3.connect(path)
        con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA foreign_keys=ON")
    con.row_factory = sqlite3.Row
    if not readonly:
        migrate(con, path)
    else:
        v = con.execute("PRAGMA user_version").fetchone()[0]
        if v > SCHEMA_VERSION:
            raise SchemaError(f"{path}: schema version {v} is newer than this vmlab ({SCHEMA_VERSION})")
        _newer_part(path, _parts(con))
    return con


def _parts(con: sqlite3.Connection) -> list[tuple[str, list[str], int]]:
    """Each experiment's schema part: its name in schema_parts, its steps
    (results.py SCHEMA) and how many of them the database has."""
    have = {}
    if con.execute("SELECT 1 FROM sqlite_master WHERE name = 'schema_parts'").fetchone():
        have = dict(con.execute("SELECT part, version FROM schema_parts").fetchall())
    return [(f"experiment {n}", m.SCHEMA, have.get(f"experiment {n}", 0))
            for n, m in experiments.all_results().items() if getattr(m, "SCHEMA", None)]


def _newer_part(path, parts) -> None:
    for part, steps, have in parts:
        if have > len(steps):
            raise SchemaError(f"{path}: {part}'s schema version {have} is newer than this vmlab ({len(steps)})")


def migrate(con: sqlite3.Connection, path="database") -> int:
    """The core schema (MIGRATIONS), then each experiment's own (its
    results.py SCHEMA), every step atomic with its version bump."""
    v = con.execute("PRAGMA user_version").fetchone()[0]
    if v > SCHEMA_VERSION:
        raise SchemaError(f"{path}: schema version {v} is newer than this vmlab ({SCHEMA_VERSION}); "
                          f"update vmlab or use another --db")
    if v == SCHEMA_VERSION and all(have == len(steps) for _, steps, have in _parts(con)):
        return v
    # Concurrent first runs: one migrates, the others wait and find it done.
    on_disk = str(path) not in ("database", ":memory:", "")
    with (open(f"{path}.migrate.lock", "w") if on_disk else contextlib.nullcontext()) as lock:
        if lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
        v = con.execute("PRAGMA user_version").fetchone()[0]
        for n in range(v, SCHEMA_VERSION):
            with con:
                con.executescript("BEGIN;" + MIGRATIONS[n] + f"PRAGMA user_version = {n + 1}; COMMIT;")
        parts = _parts(con)
        _newer_part(path, parts)
        for part, steps, have in parts:
            for n in range(have, len(steps)):
                with con:
                    con.executescript("BEGIN;" + steps[n] + "INSERT OR REPLACE INTO schema_parts (part, version) "
                                      f"VALUES ('{part}', {n + 1}); COMMIT;")
    return SCHEMA_VERSION


def start_run(con: sqlite3.Connection, row: RunStart) -> int:
    cols = {"status": "running", "pid": os.getpid(), **row.columns()}
    with con:
        cur = con.execute(f"INSERT INTO runs ({', '.join(cols)}) VALUES ({', '.join(':' + c for c in cols)})", cols)
    return cur.lastrowid


def reap_stale(con: sqlite3.Connection, host: str) -> int:
    """Rows left `running` by a process on this host that no longer exists
    (killed -9, power loss) become `aborted`."""
    stale = []
    for r in con.execute("SELECT id, pid FROM runs WHERE status = 'running' AND host = ?", (host,)):
        try:
            os.kill(r["pid"], 0)
        except (ProcessLookupError, TypeError):
            stale.append(r["id"])
        except PermissionError:
            pass
    with con:
        for rid in stale:
            con.execute("UPDATE runs SET status = 'aborted', reason = 'vmlab process vanished' WHERE id = ?", (rid,))
    return len(stale)


def finish_run(con: sqlite3.Connection, run_id: int, end: RunEnd, parsed, topo, extra=None) -> None:
    """Store the records and the final status in one transaction; `extra(con)`
    adds more of the run's results (the timing model's) to the same one."""
    cols = {**end.columns(), "ingest_errors": len(parsed.errors)}
    with con:
        con.execute(f"UPDATE runs SET {', '.join(f'{k} = :{k}' for k in cols)} WHERE id = :id", {**cols, "id": run_id})
        core_ingest.ingest(con, run_id, parsed, topo)
        if extra is not None:
            extra(con)


def tables(con: sqlite3.Connection) -> list[tuple[str, str]]:
    """(type, name) of every table and view, from the database itself."""
    return [(x[0], x[1]) for x in con.execute(
        "SELECT type, name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%' "
        "ORDER BY type, name")]


def query(con: sqlite3.Connection, sql: str, params=()) -> tuple[list[str], list[tuple]]:
    cur = con.execute(sql, params)
    cols = [d[0] for d in cur.description] if cur.description else []
    return cols, [tuple(r) for r in cur.fetchall()]
