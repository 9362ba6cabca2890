"""One study task: one run in its own working directory, into its own SQLite
file, returned to the coordinator as bytes (so no two machines ever write
one SQLite file; the coordinator merges, pipeline/merge.py).

The run happens in a child process (`python -m pipeline.worker SPEC DIR`):
a Dask worker thread cannot be killed, a child can, and a crash in one run
takes nothing else down. Runs on a Dask worker too, so this module imports
only what a worker needs.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RUNNING: set[int] = set()  # process groups of this process's running tasks (stop_all stops them)


def stop_all() -> None:
    """Ctrl-C of the coordinator: the children run in sessions of their own
    (so a terminal's Ctrl-C does not hit them half-way through a write);
    ask each to stop, and its run records itself as aborted."""
    for pgid in list(RUNNING):
        try:
            os.killpg(pgid, signal.SIGINT)
        except ProcessLookupError:
            pass


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def take_stop_signals() -> None:
    """SIGINT and SIGTERM stop this process as Ctrl-C does (the run records
    itself aborted, the study keeps what finished). A process started with
    SIGINT ignored (`nohup ... &` from a script) inherits the ignore, and so
    would every worker it starts: then neither a Ctrl-C nor the
    coordinator's stop_all() could stop anything. Main thread only."""
    import threading
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, _interrupt)


def _where() -> str:
    try:  # on a Dask worker: its address too
        from distributed import get_worker
        return f"{socket.gethostname()} (dask worker {get_worker().address})"
    except (ImportError, ValueError):
        return f"{socket.gethostname()} (local pool)"


def run_task(spec_json: str, workdir: str | None = None, timeout_s: float | None = None) -> dict:
    """Run one spec; returns {'where', 'rc', 'db' (bytes or None), 'console' (zlib bytes), 'log_tail'}.
    workdir: where the run's files go (kept: the coordinator removes it
    after merging); default a new temporary directory, removed here."""
    own = workdir is None
    wd = Path(tempfile.mkdtemp(prefix="vmlab-task-") if own else workdir)
    wd.mkdir(parents=True, exist_ok=True)
    (wd / "spec.json").write_text(spec_json)
    env = dict(os.environ, VMLAB_IN_VENV="1", PYTHONPATH=str(REPO))
    with open(wd / "worker.log", "wb") as log:
        # A session of its own, so stopping this task stops QEMU and the build too.
        p = subprocess.Popen([sys.executable, "-m", "pipeline.worker", str(wd / "spec.json"), str(wd)], cwd=REPO,
                             env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        RUNNING.add(p.pid)
        try:
            rc = p.wait(timeout=timeout_s)
        except BaseException:  # timeout, Ctrl-C, a cancelled task: the child's run records itself aborted
            os.killpg(p.pid, signal.SIGINT)
            try:
                rc = p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                rc = p.wait()
            raise
        finally:
            RUNNING.discard(p.pid)
    out = collect(wd)
    out.update(where=_where(), rc=rc)
    if own:
        shutil.rmtree(wd, ignore_errors=True)
    return out


def collect(wd: Path) -> dict:
    """What a finished task directory holds: its database and the run's console."""
    dbf = wd / "run.db"
    consoles = sorted((wd / "runs").glob("*/console.log"))
    log = wd / "worker.log"
    return {
        "db": dbf.read_bytes() if dbf.exists() else None,
        "console": zlib.compress(consoles[-1].read_bytes()) if consoles else None,
        "log_tail": log.read_text(errors="replace")[-3000:] if log.exists() else "",
    }


def main(argv: list[str]) -> int:
    """The child: prepare, build and run the spec into DIR/run.db."""
    take_stop_signals()  # the coordinator's stop_all() must reach it
    sys.path.insert(0, str(REPO))
    from analysis import db
    from pipeline.execute import BuildError, run
    from pipeline.spec import InputError, RunSpec
    spec_path, wd = Path(argv[0]), Path(argv[1])
    try:
        spec = RunSpec.from_json(spec_path.read_text())
        _, status = run(spec, wd / "run.db", wd / "runs")
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except BuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.status
    # One self-contained file to hand back: fold the WAL into it.
    con = db.connect(wd / "run.db")
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.execute("PRAGMA journal_mode=DELETE")
    con.close()
    return {"ok": 0, "failed": 1}.get(status, 130)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
