"""`./run.py --kernel a,b,...`: the same run once per kernel, one after the
other, stored as a comparison (analysis/compare.py: `compare_sets`,
`compare_runs`), then the runs side by side. One kernel is a plain run and
its summary. The runs are prepared and built before (run.py), so they
follow each other with the same topology, parameters and seed."""
from __future__ import annotations

from pathlib import Path

# How the runs' statuses end ./run.py: 0 all ok, 1 one failed, 130 aborted.
EXIT = {"ok": 0, "failed": 1}


def run(preps, built, dbpath: Path, runs_dir, kernels: str) -> int:
    """Execute each prepared run with its build (pipeline.execute), in order,
    until one is aborted; print each run's summary (one kernel) or status and
    the comparison table (several). The exit status: the worst run's.
    BuildError from a run (a job too large for its disk, a snapshot gone
    since the build) is raised to the caller."""
    from analysis import compare, db, summary
    from pipeline.execute import execute
    # Read the guest userland once: every kernel of a comparison boots the
    # same bytes, even if a build elsewhere replaces the cached archive.
    userland = built[0].userland
    con = db.connect(dbpath)
    cid = compare.start(con, f"{preps[0].exp.name} on {preps[0].topo.name}: {kernels}") if len(preps) > 1 else None
    results = []
    for i, (prep, b) in enumerate(zip(preps, built)):
        if cid:
            print(f"\n=== kernel {i + 1}/{len(preps)}: {prep.variant.patchset} (comparison {cid}) ===", flush=True)
        run_id, status = execute(prep, b, con, dbpath, runs_dir, userland=userland)
        results.append((run_id, status))
        if cid:
            compare.add_run(con, cid, i, run_id)
            reason = con.execute("SELECT reason FROM runs WHERE id = ?", (run_id,)).fetchone()[0]
            print(f"run {run_id}: {status}" + (f" ({reason})" if reason else ""), flush=True)
        else:
            print(summary.render(con, run_id))
        if status == "aborted":
            break
    if cid:
        print()
        if len(results) > 1:  # the first kernel's run aborted: nothing to compare it with
            print(compare.render(con, [r for r, _ in results]), end="")
        print(f"(comparison {cid}; again with `./run.py compare --set {cid}`; one run: `./run.py show RUN`)")
    return max((EXIT.get(st, 130) for _, st in results), default=130)
