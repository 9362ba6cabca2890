"""One run, as a library: the CLI, the study runner and a cluster task all
call it.

    prep = prepare(spec)            # every input checked; InputError otherwise
    built = build(prep)             # kernel, initramfs, our QEMU, plugin, snapshot (cached)
    run_id, status = execute(prep, built, con, dbpath)

`execute` is the run's remaining steps on one object (pipeline/steps.py:
start, supervise, ingest, the timing mode's finishing step, summarise).
The run row is written as `running` when the guest starts and the records
with the final status in one transaction at the end (analysis/db.py), so a
crash, Ctrl-C or a killed worker never leaves records without a status.
"""
from __future__ import annotations

from pathlib import Path

from pipeline.prepare import (
    BuildError,
    Prepared,
    build,
    cache_dir,
    disk_default,
    disk_mib,
    guest_disks,
    limitations,
    prepare,
)
from pipeline.steps import Run, solid_state_knobs

__all__ = ["BuildError", "Prepared", "build", "cache_dir", "disk_default", "disk_mib", "execute", "guest_disks",
           "limitations", "prepare", "run", "solid_state_knobs"]


def execute(prep: Prepared, built, con, dbpath: Path, runs_dir: Path | None = None, userland: bytes | None = None,
            live=None) -> tuple[int, str]:
    """Boot or restore the machine, run the experiment, store the run: (run
    id, status). userland: the initramfs bytes to boot (a comparison boots
    every kernel with the same bytes); live: an object with record(r) and
    tick() for progress (analysis.summary.LiveProgress by default)."""
    r = Run(prep, built, con, dbpath, runs_dir, userland)
    r.start()
    try:
        r.supervise(live)
    except KeyboardInterrupt:
        pass
    finally:
        r.ingest()
    r.status = prep.mode.finish(r)
    r.summarise()
    return r.id, r.status


def run(spec, dbpath: Path, runs_dir: Path | None = None) -> tuple[int, str]:
    """prepare, build and execute one run into `dbpath` (a worker's call)."""
    from analysis import db
    prep = prepare(spec)
    built = build(prep)
    con = db.connect(Path(dbpath))
    try:
        return execute(prep, built, con, Path(dbpath), runs_dir)
    finally:
        con.close()
