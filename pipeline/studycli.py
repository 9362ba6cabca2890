"""`./run.py study FILE`: run what is missing of a study, then write its
report. Options: --workers N (local pool), --dask ADDRESS, --retries,
--rerun, --rerun-failed, --dry-run (list the runs and their keys), --no-report."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pipeline.spec import InputError


def fail(msg: str, code: int = 2):
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(code)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="./run.py study", description=(
        "Run a study file's matrix of runs (studies/*.toml): runs already ok under the same key are skipped, so "
        "an interrupted study resumes. Then writes the HTML report (report/<db>-study-N/index.html)."))
    p.add_argument("file", help="a study file, e.g. studies/numa-cost.toml")
    from analysis import db
    db.add_option(p)
    p.add_argument("--workers", type=int, default=None,
                   help="local pool size (default: one per host core, fewer if the guests would not fit in memory)")
    p.add_argument("--dask", metavar="ADDRESS", help="run on an existing Dask cluster (tcp://head:8786)")
    p.add_argument("--retries", type=int, default=2, help="re-runs of a run whose worker died (default 2)")
    p.add_argument("--rerun", action="store_true", help="run every key again, even those already ok")
    p.add_argument("--dry-run", action="store_true", help="list the runs, their keys and whether they are done")
    p.add_argument("--no-report", action="store_true", help="do not write the report at the end")
    p.add_argument("--boot", action="store_true", help="every run boots instead of restoring the machine's "
                   "snapshot after boot (recorded as the study \"NAME (booted)\")")
    add_rerun_failed(p)
    add_archive(p)
    add_stop_by(p)
    return p


def add_rerun_failed(p) -> None:
    p.add_argument("--rerun-failed", action="store_true", help="run again the keys whose last run failed in the "
                   "guest (its program's exit status, a kernel panic) from the restored snapshot; by default such "
                   "a key is settled, as the guest would repeat the failure exactly (timeouts and lost runs are "
                   "always run again)")


def add_stop_by(p) -> None:
    p.add_argument("--stop-by", metavar="TIME", help="start only runs that should end by TIME (HH:MM, the next "
                   "one; an ISO date and time; or +DURATION: +90m, +2h30m) at the pace of the study's runs so far "
                   "of their kind (this host's first), else of their block (pipeline/pace.py), then stop with nothing "
                   "cut short; a run with neither is paced as the slowest kind so far; the rest "
                   "stay to do for the next start (exit status 1, as any study with runs left)")


def stop_time(text: str | None) -> float | None:
    from pipeline.pace import parse_stop
    if text is None:
        return None
    try:
        return parse_stop(text)
    except ValueError as e:
        fail(f"--stop-by: {e}")


def add_archive(p) -> None:
    p.add_argument("--archive", metavar="DIR", help="a folder of the campaign's runs, one file each "
                   "(pipeline/archive.py): merged into --db before anything runs, and each run of the study's keys "
                   "written to it as it is stored (and any the folder lacks at the end, or on Ctrl-C), so a "
                   "campaign kept in a repository goes on from another machine")


def load_archive(dbpath: Path, folder: str | None) -> None:
    """Merge the folder's runs into the database; bad folder or file: one line, exit 2."""
    if not folder:
        return
    from analysis import db
    from pipeline import archive
    con = db.connect(dbpath)
    try:
        n = archive.load(con, dbpath, Path(folder))
    except archive.ArchiveError as e:
        fail(f"--archive: {e}")
    finally:
        con.close()
    print(f"archive {folder}: {n} run(s) merged into {dbpath.name}", file=sys.stderr)


def save_archive(dbpath: Path, folder: str | None, keys: set[str]) -> None:
    if not folder or not dbpath.exists():
        return
    from analysis import db
    from pipeline import archive
    con = db.connect(dbpath)
    try:
        n = len(archive.export(con, Path(folder), keys))
    finally:
        con.close()
    print(f"archive {folder}: {n} new run file(s)", file=sys.stderr)


def prebuild(todo) -> None:
    """Each distinct image set once, before the pool fans out: the builds
    take the cache's lock one at a time anyway, and their output is easier
    to read alone."""
    from pipeline.execute import BuildError, build
    seen = set()
    for r in todo:
        p = r.prep
        what = (p.variant, p.topo.guest_isa, p.exp.name, p.mode.loads_plugin)
        if what in seen:
            continue
        seen.add(what)
        try:
            build(p)
        except BuildError as e:
            fail(str(e), e.status)


class Progress:
    """A bar over the whole matrix on a terminal (done / running / failed,
    ETA); a line per finished run otherwise."""

    def __init__(self, total: int, where: str):
        self.tty = sys.stderr.isatty()
        self.shown = 0
        self.bar = None
        if self.tty:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress as Bar,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
            self.bar = Bar(TextColumn("study"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[state]}"),
                           TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn())
            self.bar.start()
            self.task = self.bar.add_task("study", total=total, state="")
        print(f"study: {total} runs on {where}", file=sys.stderr, flush=True)

    def __call__(self, t) -> None:
        for line in t.lines[self.shown:]:
            (self.bar.console.print if self.bar else lambda m: print(m, file=sys.stderr, flush=True))(f"  {line}")
        self.shown = len(t.lines)
        done = t.skipped + t.ok + t.failed + t.lost + t.deferred + t.elsewhere
        state = f"ok {t.ok + t.skipped - t.settled} · running {t.running} · failed {t.failed + t.lost + t.settled}"
        if self.bar:
            self.bar.update(self.task, completed=done, state=state)

    def stop(self) -> None:
        if self.bar:
            self.bar.stop()


def run(study_path, dbpath: Path, groups=None, workers=None, dask=None, retries=2, rerun=False,
        report=True, topologies=None, boot=False, archive=None, stop_at: float | None = None,
        rerun_failed: bool = False) -> tuple[int, bool]:
    """Load, run what is missing, print the tally (and write the report);
    (study id, every run ok). Bad input exits 2 before anything runs."""
    from analysis import db
    from pipeline import archive as archive_mod, pools, runner, study as study_mod
    from pipeline.pace import clock, when
    if workers is not None and not 1 <= workers <= 256:
        fail(f"--workers: expected 1 to 256, got {workers}")
    if not 0 <= retries <= 10:
        fail(f"--retries: expected 0 to 10, got {retries}")
    try:
        st = study_mod.load(study_path, groups, topologies, boot=boot)
    except InputError as e:
        fail(str(e))
    if dask:
        try:
            pool = pools.DaskPool(dask)
        except (OSError, TimeoutError, ValueError) as e:
            fail(f"--dask {dask}: cannot reach the scheduler ({e})")
        build = None  # each worker builds what it needs in its own cache
    else:
        largest = max(r.prep.topo.total_memory_mib for r in st.runs) if st.runs else 0
        pool = pools.LocalPool(workers or pools.local_size(largest))
        build = prebuild
    prog = Progress(len(st.runs), pool.where)
    from pipeline.worker import take_stop_signals
    take_stop_signals()  # a coordinator started with SIGINT ignored can still be stopped, and stop its workers
    load_archive(dbpath, archive)
    if stop_at is not None:
        print(f"stop by {when(stop_at)}: only runs that should end by then start", file=sys.stderr, flush=True)
    try:
        sid, t = runner.execute(st, dbpath, pool, retries=retries, rerun=rerun, build=build, progress=prog,
                                stored=archive and (lambda con, key: archive_mod.export(con, Path(archive), {key})),
                                stop_at=stop_at, rerun_failed=rerun_failed)
    except KeyboardInterrupt:
        prog.stop()
        save_archive(dbpath, archive, {r.key for r in st.runs})
        print("study interrupted: finished runs are stored; run the same command to resume", file=sys.stderr)
        sys.exit(130)
    prog.stop()
    save_archive(dbpath, archive, {r.key for r in st.runs})
    con = db.connect(dbpath)
    counts = runner.status_counts(con, sid)
    print(f"study {sid} ({st.name}): {len(st.runs)} runs: {t.skipped} already done"
          + (f" ({t.settled} of them failed in the guest, not run again: --rerun-failed)" if t.settled else "")
          + f", {t.ok} ok, {t.failed} failed, "
          f"{t.lost} lost, {t.retried} retried"
          + (f", {t.deferred} not started (they would end after {clock(stop_at)}: --stop-by)" if t.deferred else "")
          + (f", {t.elsewhere} left to another coordinator running them" if t.elsewhere else "")
          + f"; {t.wall_s:.0f} s on {pool.where}")
    print("  by status in the database: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if report:
        from analysis import report as report_mod
        report_mod.main(["--study", str(sid), "--db", str(dbpath)])
    return sid, counts.get("ok", 0) == len(st.runs)


def main(argv: list[str]) -> int:
    from analysis import db
    from pipeline import runner, study as study_mod
    a = parser().parse_args(argv)
    dbpath = Path(a.db).resolve()
    if a.dry_run:
        try:
            st = study_mod.load(a.file, boot=a.boot)
        except InputError as e:
            fail(str(e))
        load_archive(dbpath, a.archive)  # what the folder has is done
        con = db.connect(dbpath) if dbpath.exists() else None
        settled = db.settled_failures(con, {r.key for r in st.runs}) if con and not a.rerun_failed else {}
        for r in st.runs:
            ok = con and con.execute("SELECT 1 FROM runs WHERE run_key = ? AND status = 'ok'", (r.key,)).fetchone()
            state = "ok  " if ok else "fail" if r.key in settled else "todo"
            print(f"{r.position:4d} {r.key[:12]} {state} {runner._label(r)}"
                  + (f" (run {settled[r.key][0]}: {settled[r.key][1][:60]})" if r.key in settled else ""))
        print(f"{len(st.runs)} runs")
        return 0
    stop_at = stop_time(a.stop_by)
    _, all_ok = run(a.file, dbpath, workers=a.workers, dask=a.dask, retries=a.retries, rerun=a.rerun,
                    report=not a.no_report, boot=a.boot, archive=a.archive, stop_at=stop_at,
                    rerun_failed=a.rerun_failed)
    return 0 if all_ok else 1
