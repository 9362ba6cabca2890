"""A campaign's runs kept as files, one per run, so that a campaign that
spans many sessions (and many machines) loses nothing when a machine and
its database go: `export` writes each run of a database that the folder
lacks as a gzipped SQLite file of its own (the run's row and every row
hanging off it, as a worker returns it) with its console beside it;
`load` merges every file of the folder into a database (pipeline/merge.py,
which finds a run it already has and does not copy it again).

The folder is append-only: a run's file never changes once written, so a
repository that holds the folder grows by the new runs only. To keep it
small enough for a repository (a 32-CPU run's profile is some 200,000 rows
per CPU, phase and symbol: 10 MB gzipped), a run's file carries its
profile summed over CPUs and phases (cpu -1, phase -1, "whole run"), which
is what the seeds' tables read; the per-CPU and per-phase profile stays in
the database the run went into.
"""
from __future__ import annotations

import fcntl
import gzip
import os
import re
import shutil
import sqlite3
import tempfile
from pathlib import Path

from pipeline import merge

SUFFIX = ".db.gz"
CONSOLE = ".console.gz"


class ArchiveError(RuntimeError):
    pass


def name(run: sqlite3.Row | dict) -> str:
    """A run's file name: its key (what it ran) and when and where it started
    (which of the key's runs it is: a failed run and its retry both stay)."""
    started = re.sub(r"[^0-9]", "", str(run["started_at"]))[:14]
    return f"{(run['run_key'] or 'nokey')[:16]}-{started}-{run['pid'] or 0}"


# profile tables: the columns a row is per (besides run, CPU and phase), and
# the columns that say which phase; the rest are sums
COMPACT = {"profile_symbols": ("symbol", "dso"), "profile_stacks": ("stack",)}
PHASE_COLS = {"cpu": "-1", "phase": "-1", "phase_name": "'whole run'", "phase_instance": "NULL"}


COMPACTED = ("profile summed over CPUs and phases in the campaign's run file (pipeline/archive.py): "
             "no per-CPU or per-phase profile rows")


def _compact_profile(out: sqlite3.Connection) -> None:
    """The run's profile summed over CPUs and phases (see the docstring),
    and said in the run's limitations."""
    with out:
        out.execute("UPDATE runs SET limitations = COALESCE(limitations || '; ', '') || ? "
                    "WHERE EXISTS (SELECT 1 FROM profile_symbols)", (COMPACTED,))
    for table, per in COMPACT.items():
        cols = merge._columns(out, "main", table)
        if not cols:
            continue
        summed = [c for c in cols if c not in per and c not in PHASE_COLS and c != "run_id"]
        pick = ", ".join(PHASE_COLS[c] if c in PHASE_COLS else f'SUM("{c}")' if c in summed else f'"{c}"'
                         for c in cols)
        group = ", ".join(["run_id", *per])
        with out:
            out.execute(f"CREATE TEMP TABLE whole AS SELECT {pick} FROM {table} GROUP BY {group}")
            out.execute(f"DELETE FROM {table}")
            out.execute(f"INSERT INTO {table} SELECT * FROM whole")
            out.execute("DROP TABLE whole")


def _write_run(con: sqlite3.Connection, run_id: int, dest: Path) -> None:
    """One run of `con` into a new SQLite file at `dest` (this vmlab's schema)."""
    from analysis import db
    db.connect(dest).close()  # the whole schema, core and every experiment's part
    con.execute("ATTACH DATABASE ? AS a", (str(dest),))
    try:
        with con:
            names = ", ".join(f'"{c}"' for c in merge._columns(con, "a", "runs"))
            con.execute(f"INSERT INTO a.runs ({names}) SELECT {names} FROM main.runs WHERE id = ?", (run_id,))
            for t in merge.hanging_tables(con, "main"):
                names = ", ".join(f'"{c}"' for c in merge._columns(con, "a", t))
                con.execute(f"INSERT INTO a.{t} ({names}) SELECT {names} FROM main.{t} WHERE run_id = ?", (run_id,))
    finally:
        con.execute("DETACH DATABASE a")
    out = sqlite3.connect(dest)
    _compact_profile(out)
    out.execute("PRAGMA journal_mode=DELETE")  # one file, no -wal beside it
    out.execute("VACUUM")
    out.close()


def _gzip_to(src: Path, dest: Path) -> None:
    """Written under a temporary name and renamed: two campaigns exporting at
    once never leave half a file under a run's name."""
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".part-")
    try:
        with os.fdopen(fd, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as z, \
                open(src, "rb") as f:
            shutil.copyfileobj(f, z)
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
    finally:
        Path(tmp).unlink(missing_ok=True)  # an interrupted write leaves nothing in the folder


def export(con: sqlite3.Connection, folder: Path, keys: set[str] | None = None) -> list[Path]:
    """Every run of `con` that finished, ok or failed (of `keys` if given),
    that `folder` has no file for; the files written. An aborted run (Ctrl-C,
    a lost worker) is no result and is not written."""
    folder.mkdir(parents=True, exist_ok=True)
    cur = con.cursor()
    cur.row_factory = sqlite3.Row  # the caller's connection keeps its own row factory
    written = []
    for r in cur.execute("SELECT id, run_key, started_at, pid, log_path FROM runs "
                         "WHERE status IN ('ok', 'failed') ORDER BY id").fetchall():  # not running or aborted
        if keys is not None and r["run_key"] not in keys:
            continue
        base = name(r)
        path = folder / (base + SUFFIX)
        if path.exists():
            continue
        with tempfile.TemporaryDirectory(prefix="vmlab-export-") as tmpdir:  # not in the folder: a kill leaves it
            one = Path(tmpdir) / "run.db"
            _write_run(con, r["id"], one)
            if r["log_path"] and Path(r["log_path"]).is_file():
                _gzip_to(Path(r["log_path"]), folder / (base + CONSOLE))
            _gzip_to(one, path)  # last: a run's file means its console is there too
        written.append(path)
    return written


def load(con: sqlite3.Connection, dbpath: Path, folder: Path) -> int:
    """Merge every run file of `folder` into `con`'s database (each migrated
    to this vmlab's schema first); how many runs were new. Consoles go
    beside the database, as a study's do."""
    from analysis import db
    if not folder.exists():
        return 0  # a campaign's first start: export makes it
    if not folder.is_dir():
        raise ArchiveError(f"{folder}: not a folder (expected a folder of campaign runs)")
    consoles = db.beside(dbpath, "runs", "archive")
    # two campaigns starting on one database at once: one merges, the other then finds the runs there
    with open(f"{dbpath}.archive.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _load(con, folder, consoles)


def _load(con: sqlite3.Connection, folder: Path, consoles: Path) -> int:
    from analysis import db
    new = 0
    for path in sorted(folder.glob("*" + SUFFIX)):
        base = path.name[:-len(SUFFIX)]
        with tempfile.TemporaryDirectory(prefix="vmlab-archive-") as tmpdir:
            one = Path(tmpdir) / "run.db"
            try:
                with gzip.open(path, "rb") as z, open(one, "wb") as f:
                    shutil.copyfileobj(z, f)
                src = db.connect(one)  # an older file takes this vmlab's schema steps
                rows = src.execute("SELECT id, run_key, host, pid, started_at FROM runs").fetchall()
                src.close()
            except (OSError, EOFError, sqlite3.DatabaseError, db.SchemaError) as e:
                raise ArchiveError(f"{path}: not a run file this vmlab can read ({e})") from None
            if len(rows) != 1:
                raise ArchiveError(f"{path}: expected one run, found {len(rows)}")
            (wid, key, host, pid, started) = tuple(rows[0])
            if con.execute("SELECT 1 FROM runs WHERE run_key IS ? AND host = ? AND pid IS ? AND started_at = ?",
                           (key, host, pid, started)).fetchone():
                continue
            logs = {}
            cpath = folder / (base + CONSOLE)
            if cpath.is_file():
                consoles.mkdir(parents=True, exist_ok=True)
                with gzip.open(cpath, "rb") as z, open(consoles / f"{base}.log", "wb") as f:
                    shutil.copyfileobj(z, f)
                logs[wid] = str(consoles / f"{base}.log")
            merge.merge(con, one, logs)
            new += 1
    return new
