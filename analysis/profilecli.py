"""`./run.py profile RUN [--cpu N] [--phase P] [--callers SYMBOL] [--folded]`:
a run's profile on the guest clock (analysis/profile.py) as `perf report`
prints one, the call paths through a symbol, or the folded stacks for
flame-graph tools. Read-only: bad input is one line on stderr, exit 2, the
database untouched."""
from __future__ import annotations

import argparse
import sqlite3
import sys

from analysis import db, profile


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # bad input is one line and exit 2, as everywhere in vmlab
        print(f"error: {self.prog}: {message}", file=sys.stderr)
        raise SystemExit(2)


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="./run.py profile", description=(
        "A run's profile on the guest clock (runs whose timing mode loads the plugin: fast, detailed, sampled's "
        "profile): each symbol's share of the CPUs' modeled time, self and with children (the sampled call "
        "paths, detailed mode), its DSO, instructions and where its time went (instructions at the core's "
        "best case, the core's further charges, memory, lock hand-offs, fetch, PAUSE), then idle and drift."))
    p.add_argument("run", type=int, metavar="RUN", help="run id")
    p.add_argument("--cpu", type=int, metavar="N", help="only this CPU (default: all, summed)")
    p.add_argument("--phase", metavar="P", help="only this phase: a name (every instance of it) or an index (0: "
                                                "outside every phase); the table's first lines list them")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--callers", metavar="SYMBOL", help="the sampled call paths that end in SYMBOL or pass "
                                                       "through it, cut at it, with their shares")
    g.add_argument("--folded", action="store_true", help="the folded stacks ('root;...;leaf weight_ps', one line "
                                                         "per path) for flame-graph tools; a run without sampled "
                                                         "paths gives each symbol under its DSO")
    p.add_argument("--sort", choices=("self", "children"), default="self",
                   help="rank by the symbol's own time or by its children's (default self)")
    p.add_argument("--percent", action="store_true", help="each symbol's columns as percentages of its time, not ms")
    p.add_argument("--limit", type=int, default=40, metavar="N", help="rows shown (default 40)")
    db.add_option(p)
    return p


def main(argv: list[str]) -> int:
    try:
        a = parser().parse_args(argv)
    except SystemExit as x:  # bad options (one line already printed) or --help
        return int(x.code or 0)
    try:
        con = db.connect(a.db, readonly=True)
        if a.folded:
            lines = profile.folded(con, a.run, a.cpu, a.phase)
            if not profile.has_stacks(con, a.run):
                print(f"note: run {a.run} has no sampled call paths (detailed mode has them): one frame per symbol "
                      "under its DSO", file=sys.stderr)
            text = "".join(f"{ln}\n" for ln in lines)
        else:
            text = profile.render(con, a.run, a.cpu, a.phase, a.callers, max(a.limit, 1), a.sort, a.percent)
    except (db.SchemaError, profile.ProfileError) as err:
        print(f"error: {a.db}: {err}", file=sys.stderr)
        return 2
    except sqlite3.DatabaseError as err:  # not a database, or one from before the profile (schema < 17)
        print(f"error: {a.db}: {err}", file=sys.stderr)
        return 2
    sys.stdout.write(text)
    return 0
