"""Results stage: one SQLite file (WAL), schema versioned by PRAGMA user_version
(the core steps in analysis/schema.py, applied here by migrate()).

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
import time
from pathlib import Path

from analysis import experiment_results, ingest as core_ingest
from analysis.runrow import RunEnd, RunStart
from analysis.schema import MIGRATIONS, SCHEMA_VERSION
from engine.base import failed_in_guest

# how long a writer waits for another connection's lock before failing
BUSY_TIMEOUT_S = 120.0
DEFAULT_PATH = "results.db"  # in the current folder, for every command


def add_option(p) -> None:
    """--db, as every command over the results database takes it (run.py and
    each verb's parser)."""
    p.add_argument("--db", default=DEFAULT_PATH, help=f"SQLite results database (default ./{DEFAULT_PATH})")


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
        # Runs started together open one database at once, and one of them
        # may hold it while it migrates on a loaded host: wait for it, well
        # past sqlite3's default 5 s, rather than fail the run.
        con = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S)
        _wal(con)
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


def _wal(con: sqlite3.Connection) -> None:
    """WAL mode, which a new database gets from the first connection. Two
    connections switching it at once can deadlock on their locks, and
    SQLite then answers one of them 'locked' at once, without waiting:
    try again until the busy timeout is spent."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            con.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as e:
            busy = getattr(e, "sqlite_errorcode", None) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
            if not busy or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _parts(con: sqlite3.Connection) -> list[tuple[str, list[str], int]]:
    """Each experiment's schema part: its name in schema_parts, its steps
    (results.py SCHEMA) and how many of them the database has."""
    have = {}
    if con.execute("SELECT 1 FROM sqlite_master WHERE name = 'schema_parts'").fetchone():
        have = dict(con.execute("SELECT part, version FROM schema_parts").fetchall())
    return [(f"experiment {n}", m.SCHEMA, have.get(f"experiment {n}", 0))
            for n in experiment_results.all_results() if (m := experiment_results.results(n)).SCHEMA]


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


def settled_failures(con: sqlite3.Connection, keys) -> dict[str, tuple[int, str]]:
    """Keys of `keys` with no ok run whose last finished run (ok or failed,
    by id: an aborted run is no result) failed in the guest (its
    experiment's exit status, a panic) on a restored start: {key: (run id,
    reason)}. A restored guest repeats exactly, so such a failure is the
    key's result: a study does not run the key again (unless --rerun-failed)
    and the seeds' page counts it as run."""
    keys = list(keys)
    out = {}
    for i in range(0, len(keys), 500):  # SQLite's bound on variables per statement
        part = keys[i:i + 500]
        for key, rid, reason in con.execute(f"""
                SELECT r.run_key, r.id, r.reason FROM runs r
                WHERE r.run_key IN ({','.join('?' * len(part))})
                  AND r.id = (SELECT MAX(id) FROM runs WHERE run_key = r.run_key AND status IN ('ok', 'failed'))
                  AND r.status = 'failed' AND r.start = 'restored'
                  AND NOT EXISTS (SELECT 1 FROM runs o WHERE o.run_key = r.run_key AND o.status = 'ok')""", part):
            if failed_in_guest(reason):
                out[key] = (rid, reason)
    return out
