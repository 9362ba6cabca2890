"""The study coordinator: register a study's runs, skip keys already `ok`
(or settled by a failure in the guest on a restored start), send the rest
to a pool, merge each finished run into the study's database as it
arrives (the coordinator is its only writer), retry runs whose worker died,
and leave everything resumable at any moment.

A killed coordinator loses no finished run: local tasks write into
work/<study>/<key>/ beside the database, and the next start merges what
they finished before it sends anything new. Two coordinators of one study
at once (two `./run.py seeds` lanes over one database) leave each other's
tasks alone: each holds a lock for its lifetime and names it in the task
directories it starts, so only a dead coordinator's tasks are orphans.
"""
from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import sqlite3
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from analysis import db
from pipeline import merge, worker
from pipeline.pace import Pace, clock
from pipeline.study import Study

DONE = ("ok",)


@dataclass
class Tally:
    total: int = 0
    skipped: int = 0
    ok: int = 0
    failed: int = 0
    lost: int = 0
    retried: int = 0
    deferred: int = 0              # not started: they would end after the stop time
    settled: int = 0               # of skipped: their last run failed in the guest (analysis.db.settled_failures)
    elsewhere: int = 0             # running under another coordinator of the study: its to store
    running: int = 0
    wall_s: float = 0.0
    lines: list[str] = field(default_factory=list)


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def register(con: sqlite3.Connection, study: Study) -> int:
    """The study's row and one study_runs row per key (kept across restarts)."""
    with con:
        con.execute("INSERT OR IGNORE INTO studies (name, path, sha256, toml, created_at) VALUES (?, ?, ?, ?, ?)",
                    (study.name, str(study.path), study.sha256, study.text, now()))
        sid = con.execute("SELECT id FROM studies WHERE name = ? AND sha256 = ?",
                          (study.name, study.sha256)).fetchone()[0]
        con.executemany("INSERT OR IGNORE INTO study_runs (study_id, key, position, axes_json, spec_json, updated_at) "
                        "VALUES (?, ?, ?, ?, ?, ?)",
                        [(sid, r.key, r.position, json.dumps(r.axes, sort_keys=True), r.spec.to_json(), now())
                         for r in study.runs])
    return sid


def link_done(con: sqlite3.Connection, sid: int) -> int:
    """Keys that already have an `ok` run in this database (from this study,
    another, or a single ./run.py run) are done."""
    with con:
        n = con.execute("""
            UPDATE study_runs SET status = 'ok', updated_at = ?,
                run_id = (SELECT MAX(id) FROM runs WHERE runs.run_key = study_runs.key AND runs.status = 'ok'),
                executed_on = COALESCE(executed_on, (SELECT host FROM runs WHERE id =
                    (SELECT MAX(id) FROM runs WHERE runs.run_key = study_runs.key AND runs.status = 'ok')))
            WHERE study_id = ? AND status != 'ok'
              AND EXISTS (SELECT 1 FROM runs WHERE runs.run_key = study_runs.key AND runs.status = 'ok')""",
                        (now(), sid)).rowcount
    return n


def keep_console(d: Path, text: bytes) -> Path:
    """A file of its own for each stored run of a key: a retry must not
    overwrite the console of the failed attempt whose run row names it."""
    d.mkdir(parents=True, exist_ok=True)
    n = 1
    while True:
        p = d / f"console-{n}.log"
        try:
            with open(p, "xb") as f:  # exclusive: two lanes storing one key take different files
                f.write(text)
            return p
        except FileExistsError:
            n += 1


def store(con, dbpath: Path, sid: int, key: str, result: dict, runs_root: Path) -> tuple[int | None, str]:
    """Merge one task's database; (run id in the study database, status)."""
    if not result.get("db"):
        return None, "lost"
    with tempfile.NamedTemporaryFile(suffix=".db", dir=dbpath.parent, delete=False) as f:
        f.write(result["db"])
        tmp = Path(f.name)
    try:
        src = sqlite3.connect(tmp)
        wid, status = src.execute("SELECT id, status FROM runs ORDER BY id DESC LIMIT 1").fetchone() or (None, None)
        src.close()
        if wid is None or status == "running":
            return None, "lost"
        logs = {}
        if result.get("console"):
            logs[wid] = str(keep_console(runs_root / key[:16], zlib.decompress(result["console"])))
        mapping = merge.merge(con, tmp, logs)
    finally:
        for f in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):  # a killed worker's file is still in WAL mode
            f.unlink(missing_ok=True)
    return mapping[wid], ("lost" if status == "aborted" else status)


def record(con, sid: int, key: str, status: str, run_id: int | None, where: str | None) -> None:
    with con:
        con.execute("UPDATE study_runs SET status = ?, run_id = COALESCE(?, run_id), attempts = attempts + 1, "
                    "executed_on = COALESCE(?, executed_on), updated_at = ? WHERE study_id = ? AND key = ?",
                    (status, run_id, where, now(), sid, key))


OWNER = "coordinator"  # a task directory's file naming the lock of the coordinator that started it


class Claim:
    """A coordinator's hold on a study's work root: a lock file (flock)
    held as long as the coordinator lives, named in each task directory it
    starts (claim). The kernel drops the lock when the process dies, however
    it dies, so a task whose coordinator's lock can be taken is an orphan."""

    def __init__(self, workroot: Path):
        workroot.mkdir(parents=True, exist_ok=True)
        # unique even within one process (a coordinator in a test beside another)
        self.path = workroot / f".coordinator-{os.getpid()}-{os.urandom(4).hex()}.lock"
        self.fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def claim(self, wd: Path) -> None:
        wd.mkdir(parents=True, exist_ok=True)
        (wd / OWNER).write_text(self.path.name)

    def release(self) -> None:
        self.path.unlink(missing_ok=True)
        os.close(self.fd)  # closing the descriptor drops the lock


def live_owner(wd: Path) -> str | None:
    """The lock file of the live coordinator (this one or another) that
    started task directory wd, or None when its coordinator is gone."""
    try:
        name = (wd / OWNER).read_text().strip()
    except OSError:
        return None
    lock = wd.parent / name
    try:
        fd = os.open(lock, os.O_RDWR)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another descriptor: held even by this process's own claim
    except BlockingIOError:
        return name
    finally:
        os.close(fd)
    lock.unlink(missing_ok=True)  # a dead coordinator's leftover
    return None


def adopt_orphans(con, dbpath: Path, sid: int, workroot: Path, runs_root: Path, tally: Tally) -> None:
    """Task directories a killed coordinator left: merge the runs that
    finished, stop the ones still going (they are re-run). A task whose
    coordinator is alive (another lane of the same study) is not touched."""
    if not workroot.exists():
        return
    for wd in sorted(p for p in workroot.iterdir() if p.is_dir()):
        key = wd.name
        if live_owner(wd):
            continue
        dbf = wd / "run.db"
        row = None
        if dbf.exists():
            try:
                c = sqlite3.connect(f"file:{dbf}?mode=ro", uri=True)
                row = c.execute("SELECT status, pid FROM runs ORDER BY id DESC LIMIT 1").fetchone()
                c.close()
            except sqlite3.Error:
                row = None
        if row and row[0] == "running" and row[1]:
            try:
                os.killpg(row[1], signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if row and row[0] in ("ok", "failed"):
            result = worker.collect(wd)
            run_id, status = store(con, dbpath, sid, key, result, runs_root)
            if run_id is not None:
                record(con, sid, key, status, run_id, f"{os.uname().nodename} (local pool, adopted after a restart)")
                tally.lines.append(f"adopted run {run_id} ({status}) that finished after the coordinator stopped")
        _rmtree(wd)


def running_elsewhere(dbpath: Path, key: str, mine: Claim) -> str | None:
    """The live coordinator other than this one running `key` into this
    database, under any study: a lane started from another version of the
    study file is another study (2026-12-01: two lanes of seed 001's MGLRU
    block, one a comment behind, ran the same key at once)."""
    every = work_root(dbpath, "*")  # any study's
    for wd in sorted(every.parent.glob(f"{every.name}/{key}")):
        other = live_owner(wd)
        if other and other != mine.path.name:
            return other
    return None


def work_root(dbpath: Path, sid: int | str) -> Path:
    """Where a study's tasks keep their files while they run; a coordinator
    starting up adopts (or kills) every task it finds there."""
    return db.beside(dbpath, "work", f"study-{sid}")


def _rmtree(p: Path) -> None:
    import shutil
    shutil.rmtree(p, ignore_errors=True)


def _settle(con, sid: int, runs, tally: Tally) -> dict:
    """Of `runs`, the keys settled by a failure in the guest (analysis.db.settled_failures):
    their study rows point at that run, and the tally says so."""
    settled = db.settled_failures(con, {r.key for r in runs})
    tally.settled += len(settled)
    for r in runs:
        if r.key in settled:
            rid, reason = settled[r.key]
            with con:
                con.execute("UPDATE study_runs SET status = 'failed', run_id = ?, updated_at = ? "
                            "WHERE study_id = ? AND key = ?", (rid, now(), sid, r.key))
            tally.lines.append(f"{_label(r)}: run {rid} failed in the guest ({reason[:80]}) from the restored "
                               "snapshot, which repeats exactly: not run again (--rerun-failed does)")
    return settled


def _fits(r, pace: Pace, stop_at: float, tally: Tally, attempts: dict) -> bool:
    """Whether run r should end before stop_at at its pace so far
    (pipeline/pace.py); if not, it is counted and stays pending for the next start."""
    est, whose = pace.expected(r.axes)
    if time.time() + (est or 0) <= stop_at:
        return True
    tally.deferred += 1
    tally.lines.append(f"{_label(r)}: not started{' again' if attempts.get(r.key) else ''}: " + (
        f"at the pace of {whose} ({est / 60:.0f} min) it would end after {clock(stop_at)}" if est
        else f"past {clock(stop_at)}"))
    return False


def execute(study: Study, dbpath: Path, pool, retries: int = 2, rerun: bool = False, build=None,
            progress=None, stored=None, stop_at: float | None = None,
            rerun_failed: bool = False) -> tuple[int, Tally]:
    """Run what is missing of `study` on `pool`; (study id, tally).
    stored(con, key): called once a run of `key` is in the database.
    stop_at (epoch seconds): start only runs that should end before it.
    rerun_failed: run again the keys a failure in the guest settled."""
    dbpath = Path(dbpath).resolve()
    con = db.connect(dbpath)
    sid = register(con, study)
    tally = Tally(total=len(study.runs))
    runs_root = db.beside(dbpath, "runs", f"study-{sid}")  # consoles by key: per database too
    workroot = work_root(dbpath, sid)
    adopt_orphans(con, dbpath, sid, workroot, runs_root, tally)
    if rerun:
        with con:
            con.execute("UPDATE study_runs SET status = 'pending' WHERE study_id = ?", (sid,))
    else:
        link_done(con, sid)
    state = {k: s for k, s in con.execute("SELECT key, status FROM study_runs WHERE study_id = ?", (sid,))}
    todo = [r for r in study.runs if rerun or state.get(r.key) not in DONE]
    settled = {} if rerun or rerun_failed else _settle(con, sid, todo, tally)
    todo = [r for r in todo if r.key not in settled]
    tally.skipped = len(study.runs) - len(todo)
    if build is not None and todo:
        build(todo)  # images once per cache, before the pool fans out
    attempts = {r.key: 0 for r in todo}
    by_key = {r.key: r for r in todo}
    queue = list(todo)
    live: dict = {}  # future -> key
    t0 = time.monotonic()
    here = socket.gethostname()
    pace = Pace.of_study(con, sid, here) if stop_at is not None else None
    mine = Claim(workroot)  # from the first task this coordinator starts to its last
    try:
        while queue or live:
            while queue and len(live) < pool.workers:
                r = queue.pop(0)
                if not rerun and attempts[r.key] == 0 and con.execute(
                        "SELECT 1 FROM runs WHERE run_key = ? AND status = 'ok'", (r.key,)).fetchone():
                    # another coordinator of the study finished it since this one started
                    link_done(con, sid)
                    tally.skipped += 1
                    tally.lines.append(f"{_label(r)}: done meanwhile by another coordinator; skipped")
                    continue
                if not rerun and not rerun_failed and attempts[r.key] == 0 and _settle(con, sid, [r], tally):
                    tally.skipped += 1  # another coordinator's run of it failed in the guest meanwhile: said above
                    continue
                other = running_elsewhere(dbpath, r.key, mine)
                if other:  # another lane runs it: its result, not ours
                    tally.elsewhere += 1
                    tally.lines.append(f"{_label(r)}: running under another coordinator ({other}); left to it")
                    continue
                if pace is not None and not _fits(r, pace, stop_at, tally, attempts):  # judged as a worker frees
                    continue
                attempts[r.key] += 1
                _rmtree(workroot / r.key)  # a lost attempt's files: its run was not merged
                mine.claim(workroot / r.key)
                live[pool.submit(r.key, r.spec.to_json(), workroot / r.key)] = r.key
            tally.running = len(live)
            if progress:
                progress(tally)
            finished = [f for f in live if f.done()]
            if not finished:
                time.sleep(0.5)
                continue
            for f in finished:
                key = live.pop(f)
                r = by_key[key]
                try:
                    result = f.result()
                    run_id, status = store(con, dbpath, sid, key, result, runs_root)
                    where = result.get("where")
                except Exception as e:  # the worker died (Dask: KilledWorker) or the task broke
                    run_id, status, where = None, "lost", None
                    tally.lines.append(f"{_label(r)}: worker lost ({type(e).__name__}: {str(e)[:200]})")
                if status == "lost" and attempts[key] <= retries:
                    tally.retried += 1
                    tally.lines.append(f"{_label(r)}: lost on attempt {attempts[key]}; retrying")
                    with con:
                        con.execute("UPDATE study_runs SET attempts = attempts + 1, updated_at = ? "
                                    "WHERE study_id = ? AND key = ?", (now(), sid, key))
                    queue.append(r)
                else:
                    record(con, sid, key, status, run_id, where)
                    if pace is not None:  # with what this and any other coordinator of the study finished
                        pace = Pace.of_study(con, sid, here)
                    if stored and run_id:
                        try:
                            stored(con, key)
                        except (OSError, sqlite3.Error) as e:  # the study goes on; the end tries again
                            tally.lines.append(f"{_label(r)}: stored, but not written out ({e})")
                    setattr(tally, status if status in ("ok", "failed") else "lost",
                            getattr(tally, status if status in ("ok", "failed") else "lost") + 1)
                    tally.lines.append(f"run {run_id or '-'} {status}: {_label(r)}" + (f" on {where}" if where else ""))
                _rmtree(workroot / key)
    except KeyboardInterrupt:
        worker.stop_all()
        pool.close(cancel=True)
        tally.wall_s = time.monotonic() - t0
        raise
    finally:
        mine.release()
    pool.close()
    tally.running = 0
    tally.wall_s = time.monotonic() - t0
    if progress:
        progress(tally)
    return sid, tally


def _label(r) -> str:
    return " ".join(f"{k}={v}" for k, v in r.axes.items())


def status_counts(con, sid: int) -> dict[str, int]:
    return dict(con.execute("SELECT status, COUNT(*) FROM study_runs WHERE study_id = ? GROUP BY status", (sid,)))


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
