"""The generated page's campaign section: how far the runs `studies/seeds.toml`
plans have got, what they have cost this host, and what the rest will cost.

A planned run is (key, block), (key, block, kind) or (key, block, kind,
repeat): kind names what it runs
apart from its repeat (machine, kernel, flavor, disk, parameters), as
pipeline/pace.py's `kind` does for --stop-by. Runs of one
block can cost very different wall times (000 on gs1280-8: vanilla minutes,
the period set's storm an hour, priced instruction by instruction), so a run
still to do is costed at the mean of the runs done of its kind, and only where
its kind has none, at its block's."""
from __future__ import annotations

from collections import Counter


def not_run(runs, planned) -> list:
    """The planned runs the page does not show (no run row with their key)."""
    shown = {r["run_key"] for r in runs}
    return [p for p in planned if p[0] not in shown]


def section(runs, planned, block_of) -> list[str]:
    """The page's lines under "## The campaign". runs: the page's run rows
    (run_key, wall_s); block_of(row): the block a row belongs to."""
    todo = not_run(runs, planned)
    kind = {p[0]: (p[1], p[2]) for p in planned if len(p) > 2}
    per = Counter(p[1] for p in todo)
    out = [f"{len(planned) - len(todo)} of the {len(planned)} runs `studies/seeds.toml` plans at this checkout "
           f"are on this page; to run: {len(todo)}"
           + (" (" + ", ".join(f"{b}: {n}" for b, n in per.items()) + ")" if todo else "") + "."]
    # what the runs cost this host, block by block: the campaign's wall time so far, and what a run takes
    walls: dict = {}
    kind_walls: dict = {}
    timed: dict = {}
    for r in runs:
        w = r["wall_s"] or 0.0
        walls.setdefault(block_of(r), []).append(w)
        # the pace, as --stop-by takes it (pipeline/pace.py): ok runs with a wall time (a guest that failed early
        # says nothing of what a run of its kind takes; its wall time still counts in what the campaign cost)
        if not w or ("status" in r.keys() and r["status"] != "ok"):
            continue
        timed.setdefault(block_of(r), []).append(w)
        if r["run_key"] in kind:
            kind_walls.setdefault(kind[r["run_key"]], []).append(w)
    planned_per = Counter(p[1] for p in planned)
    # the rest, run by run: at its kind's mean so far, else its block's (one lane); nothing left is 0, a
    # block with no timed run leaves its runs unknown
    rest: dict = {}
    by_kind = 0
    for p in todo:
        pace = kind_walls.get(kind.get(p[0])) or timed.get(p[1])
        if pace:
            rest[p[1]] = rest.get(p[1], 0.0) + sum(pace) / len(pace)
            by_kind += kind.get(p[0]) in kind_walls
    for b in walls:
        if not per.get(b):
            rest[b] = 0.0
    out += ["", "| block | planned | run | wall, all runs [h] | wall per run, min-max [min] | "
            "the rest at that pace [h] |", "|---|---|---|---|---|---|"]
    out += [f"| {b} | {planned_per.get(b, '-')} | {len(w)} | {sum(w) / 3600:.2f} | "
            f"{min(w) / 60:.1f}-{max(w) / 60:.1f} | {f'{rest[b] / 3600:.2f}' if b in rest else '-'} |"
            for b, w in sorted(walls.items())]
    total = sum(sum(w) for w in walls.values())
    unknown = sum(n for b, n in per.items() if b not in rest)
    out.append(f"| all | {len(planned)} | {len(runs)} | {total / 3600:.2f} | | {sum(rest.values()) / 3600:.2f}"
               + (f" and {unknown} runs of blocks with none yet" if unknown else "") + " |")
    costed = sum(n for b, n in per.items() if b in rest)
    if costed:
        out += ["", f"The rest: each run still to do at the mean wall time of the runs done of its kind (its "
                    f"machine, kernel, flavor, disk and parameters; its repeats): {by_kind} of {costed}; "
                    f"the others at their block's mean. One lane; lanes beside it on the same host slow it."]
    return out
