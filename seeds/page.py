"""The seeds' tables printed, and written as the results page
(`./run.py seeds --table-only [--page FILE]`): which runs each seed's
table reads (this checkout's keys), the campaign still to run, and every
run with its key. The tables themselves are seeds/report.py's."""
from __future__ import annotations

import json
import sqlite3
import sys

from analysis import db, pages
from seeds import campaign
from seeds.report import render
from seeds.runs import SeedError, failed_runs, seed_of, select_runs, stale
from seeds.tables import SEEDS


def print_tables(dbpath: str, seeds: list[str], study: int | None = None, page=None, planned=None) -> int:
    """Print the tables of the seeds named (none: all five; those without
    runs are then one error line), over the runs of study `study` or else
    the latest; bad input is one line on stderr and 2. page: (path, the
    command that makes it): the tables also become a results page, where a
    seed without runs yet is a section saying so. planned: the campaign as
    this checkout defines it ([(run key, block, kind, repeat)], pipeline/seedscli.py;
    seeds/campaign.py): the
    page lists the key of every run it shows and counts those not run yet,
    so a page the checkout would no longer make is seen as stale."""
    try:
        wanted = [seed_of(x).id for x in seeds] or list(SEEDS)
        con = db.connect(dbpath, readonly=True)
        # only runs of this checkout's keys: a column never mixes kernel builds, engines or models unawares
        keys = {p[0] for p in planned} if planned else None
        picked, missing = {}, []
        for x in wanted:  # every seed checked before anything prints
            try:
                picked[x] = select_runs(con, x, study, keys)
            except SeedError as err:
                if seeds or "no study" in str(err) or (page and not planned):
                    raise
                missing.append(x)
        if missing and not page:
            raise SeedError(f"no ok runs for seed{'s' * (len(missing) > 1)} {' '.join(missing)} in "
                            + (f"study {study}" if study is not None else dbpath)
                            + (f"; name the seeds that have runs ({' '.join(picked)})" if picked else
                               " (run ./run.py seeds)"))
        if not picked:
            raise SeedError(f"no ok runs for any seed in {dbpath} (run ./run.py seeds)")
        tables = {x: render(con, x, ids, failed_runs(con, x, study, ids, keys)) for x, ids in picked.items()}
        text = "\n\n".join(tables.values())
        left_out = sum(stale(con, x, study, keys) for x in wanted) if keys else 0
        note = (f"left out: {left_out} ok run{'s' * (left_out != 1)} of these seeds' blocks under keys this checkout "
                f"does not plan (another kernel build, engine series, timing model, guest program or start: "
                f"booted runs show with --boot); ./run.py seeds runs this checkout's keys") if left_out else ""
        if note:
            text += "\n" + note + "\n"
        if page:
            # a key settled by a failure in the guest (analysis/db.py) is run: its failure is its result
            settled = db.settled_failures(con, keys) if keys else {}
            runs = pages.runs_of(con, [i for x in picked.values() for i in x] + [i for i, _ in settled.values()])
            pages.write(page[0], "Results: the seeds' tables", pages.provenance(runs, page[1], dbpath),
                        _page_body(wanted, tables, runs, planned or [], _axes(con, [r["id"] for r in runs]),
                                   note))
    except (SeedError, db.SchemaError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except sqlite3.DatabaseError as err:
        print(f"error: {dbpath}: {err}", file=sys.stderr)
        return 2
    print(text, end="")
    return 0


KEY_CHARS = 16  # of a run key on the page: enough to name it, short enough to read


def _axes(con, ids) -> dict[int, dict]:
    """run id -> its study row's axes (block, repeat), where a study ran it."""
    out = {}
    for rid, axes in con.execute(f"SELECT run_id, axes_json FROM study_runs WHERE run_id IN "
                                 f"({','.join('?' * len(ids))})", ids):
        out[rid] = json.loads(axes)
    return out


def _page_body(wanted, tables: dict, runs, planned, axes: dict, note: str = "") -> list[str]:
    """The page's sections: each seed's table (or that it has no run yet),
    what of the campaign is still to run, and the runs with their keys."""
    todo = campaign.not_run(runs, planned)
    # a run's block and repeat: its study row's, else the plan's for its key (a run merged from the
    # archive, or made by ./run.py with the block's spec, has the key, not the study row)
    plan = {p[0]: {"block": p[1], "repeat": p[3] if len(p) > 3 else None} for p in planned}

    def axis(r, name):
        v = axes.get(r["id"], {}).get(name)
        v = v if v is not None else plan.get(r["run_key"], {}).get(name)
        return "-" if v is None else v

    def block(r) -> str:
        return axis(r, "block")
    body = []
    for x in wanted:
        body += ["", f"## Seed {x}", ""]
        if x in tables:
            body += ["```", tables[x].rstrip(), "```"]
        else:
            failed = sum(1 for r in runs if r["status"] != "ok" and _seed(block(r)) == x)
            body.append(f"No ok run of this seed yet: {sum(1 for p in todo if _seed(p[1]) == x)} to run"
                        + (f", {failed} failed in the guest (The runs, below)" if failed else "") + ".")
    body += ["", "## The campaign", ""] + campaign.section(runs, planned, block) + (["", note[0].upper() + note[1:]
                                                                                      + "."] if note else [])
    body += ["", "## The runs", "", "| run | block | machine | kernel | flavor | repeat | key | status |",
             "|---|---|---|---|---|---|---|---|"]
    body += [f"| {r['id']} | {block(r)} | {r['topology']} | {r['patch_set']} | "
             f"{r['kernel_flavor']} | {axis(r, 'repeat')} | "
             f"`{(r['run_key'] or '-')[:KEY_CHARS]}` | "
             + ("ok" if r["status"] == "ok" else f"{r['status']} in the guest: {_md_cell(r['reason'])}") + " |"
             for r in sorted(runs, key=lambda r: r["id"])]
    return body


def _md_cell(text) -> str:
    """Text for a Markdown table cell: one line, its bars escaped."""
    return " ".join(str(text or "-").split()).replace("|", "\\|")


def _seed(block) -> str:
    return str(block).split("-")[0]

