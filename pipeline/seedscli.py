"""`./run.py seeds [SEED ...]`: run each seed's reproducer on its machine
with its kernels (the seed's [[matrix]] block of studies/seeds.toml, as a
study: resumable, keys already ok are not run again), then print the seed's
own table beside its published figures (seeds/report.py; printed and
written as the page by seeds/page.py)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SEEDS_STUDY = REPO / "studies" / "seeds.toml"


def parser() -> argparse.ArgumentParser:
    from pipeline import studycli
    p = argparse.ArgumentParser(prog="./run.py seeds", description=(
        "Run the seeds' reproducers with their kernels (studies/seeds.toml) and print each seed's table: "
        "the seed's rows and units, a column per kernel with % against the first, and the seed's published "
        "figures beside ours."))
    p.add_argument("seeds", nargs="*", help="000 001 002 003 004 (default: all five), or one block of a seed's "
                   "(004-cache: its runs only; the table is still the seed's)")
    from analysis import db
    db.add_option(p)
    p.add_argument("--workers", type=int, default=None, help="local pool size (default: one per core)")
    p.add_argument("--dask", metavar="ADDRESS", help="run on an existing Dask cluster")
    p.add_argument("--topology", action="append", metavar="NAME",
                   help="run only the blocks' runs on this machine (repeatable), e.g. the x86 columns again after "
                        "an engine change; the tables still show every ok run of the study")
    p.add_argument("--table-only", action="store_true", help="print the tables from the database; run nothing")
    p.add_argument("--boot", action="store_true", help="every run boots instead of restoring the machine's "
                   "snapshot (another study; the tables show one start per column)")
    p.add_argument("--page", metavar="FILE", help="also write the tables as a Markdown results page (e.g. "
                                                  "docs/results/seeds.md) saying how the runs were produced")
    studycli.add_rerun_failed(p)
    studycli.add_archive(p)
    studycli.add_stop_by(p)
    return p


def main(argv: list[str]) -> int:
    from pipeline import studycli
    a = parser().parse_args(argv)
    dbpath = Path(a.db).resolve()
    from seeds import page as seeds, runs as seed_runs
    sid = None
    # a seed's blocks: "004" and any "004-..." (runs that are not a kernel x machine product)
    groups = [n for sd in a.seeds for n in seed_runs.block_names(SEEDS_STUDY.read_text(), sd)] or None
    if not a.table_only:
        if a.seeds and not groups:
            print(f"error: studies/seeds.toml: no [[matrix]] block for seed(s) {' '.join(a.seeds)}", file=sys.stderr)
            return 2
        sid, _ = studycli.run(SEEDS_STUDY, dbpath, groups=groups, workers=a.workers, dask=a.dask, report=False,
                              topologies=a.topology, boot=a.boot, archive=a.archive,
                              stop_at=studycli.stop_time(a.stop_by), rerun_failed=a.rerun_failed)
    elif a.archive:  # the folder and the database made one: what each lacks, from the other
        from pipeline import study
        studycli.load_archive(dbpath, a.archive)
        from pipeline.spec import InputError
        try:
            studycli.save_archive(dbpath, a.archive, {r.key for r in study.load(SEEDS_STUDY, boot=a.boot).runs})
        except InputError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
    command = " ".join(["./run.py seeds", *a.seeds, "--table-only", f"--db {a.db}",
                        *([f"--archive {a.archive}"] if a.archive else []), f"--page {a.page}"])
    # the campaign as this checkout plans it (the named seeds' blocks, all of them: a block's seed's table
    # shows them all): the tables take its keys only, the page counts the rest
    tables = list(dict.fromkeys(s.split("-")[0] for s in a.seeds))  # a block's seed: its table
    seed_groups = [n for sd in tables for n in seed_runs.block_names(SEEDS_STUDY.read_text(), sd)] or None
    from images.kernel import BuildError
    from pipeline import pace, study
    from pipeline.spec import InputError
    try:
        # a run's kind, as --stop-by paces it: what it runs but its repeat (the page costs the rest by kind);
        # its repeat names a run loaded from the archive, which has no study row
        planned = [(r.key, r.axes.get("block"), pace.kind(r.axes), r.axes.get("repeat"))
                   for r in study.load(SEEDS_STUDY, groups=seed_groups, boot=a.boot).runs]
    except (InputError, BuildError) as err:  # a key names its kernel's source: not installed is one line
        print(f"error: {err}", file=sys.stderr)
        return 2
    return seeds.print_tables(str(dbpath), tables, sid, page=a.page and (Path(a.page), command), planned=planned)
