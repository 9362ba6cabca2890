"""`./run.py sample-check`: a `--timing sampled` run and the full
`--timing detailed` run of the same inputs, one after the other on this
host; every figure the sampled run estimated gets the full run's value and
its error (sample_estimates.actual, error_pct, check_run_id), and the pair's
costs are printed: wall times, instructions simulated in detail, and the
regions' wall time projected onto N workers (a Dask cluster's share)."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

KEY_FIGURES = ("elapsed_ps", "elapsed_ps.per_insn", "busy_ps", "idle_ps", "cpu_time_ps", "total.insns",
               "total.stall_ps", "total.misses", "total.remote", "remote_share", "total.lock_xfers", "total.walks",
               "total.l1i_misses")


def parser() -> argparse.ArgumentParser:
    from pipeline.spec import RunSpec as D
    p = argparse.ArgumentParser(prog="./run.py sample-check", description=__doc__.split("\n\n")[0])
    # a smaller machine and SimPoint's classic slice than a run's defaults (RunSpec's: the rest)
    p.add_argument("--topology", "-t", default="gs1280-8", help="machine (default gs1280-8)")
    p.add_argument("--exp", "-e", default=D.experiment, help=f"experiment (default {D.experiment})")
    p.add_argument("--param", "-p", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--kernel", default=D.kernel, help=f"one patch set (default {D.kernel})")
    p.add_argument("--slice-insns", type=int, default=10_000_000, metavar="N",
                   help="instructions per slice (default 10,000,000, SimPoint's classic)")
    from pipeline import sampled
    sampled.add_options(p)
    p.add_argument("--no-stalls", action="store_true", default=D.no_stalls)
    p.add_argument("--timeout", type=float, default=D.timeout)
    from analysis import db
    db.add_option(p)
    p.add_argument("--runs-dir", default=None)
    return p


def main(argv: list[str]) -> int:
    import experiments
    from pipeline import sampled
    from pipeline.execute import BuildError, build, execute, prepare
    from pipeline.spec import InputError, RunSpec
    a = parser().parse_args(argv)
    try:
        params = experiments.parse_overrides(a.param)
        base = RunSpec(topology=a.topology, experiment=a.exp, kernel=a.kernel, slice_insns=a.slice_insns,
                       no_stalls=a.no_stalls, timeout=a.timeout, **sampled.spec_options(a)).with_params(params)
        preps = [prepare(RunSpec(**{**base.__dict__, "timing": t})) for t in ("sampled", "detailed")]
    except (InputError, experiments.ExperimentError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from pipeline.worker import take_stop_signals
    take_stop_signals()  # SIGTERM stops a run as Ctrl-C does (pipeline/worker.py)
    try:
        built = build(preps[0])  # the detailed run needs nothing more: the same kernel, snapshot and plugin
    except BuildError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.status
    from analysis import db
    dbpath = Path(a.db).resolve()
    con = db.connect(dbpath)
    try:
        ids, walls = [], []
        for p in preps:
            t0 = time.monotonic()
            rid, status = execute(p, built, con, dbpath, a.runs_dir)
            walls.append(time.monotonic() - t0)
            ids.append(rid)
            if status != "ok":
                print(f"error: run {rid} ({p.spec.timing}) {status}: "
                      f"{con.execute('SELECT reason FROM runs WHERE id = ?', (rid,)).fetchone()[0]}", file=sys.stderr)
                return 1
        report(con, ids[0], ids[1], walls)
    finally:
        con.close()
    return 0


def compare(con, sampled_id: int, full_id: int) -> list[tuple]:
    """Store the full run's figures beside the sampled run's estimates; (figure, est, actual, err %)."""
    import timing
    from sampling import estimate, simpoint
    rdir = Path(con.execute("SELECT log_path FROM runs WHERE id = ?", (full_id,)).fetchone()[0]).parent
    actual = estimate.whole_run(timing.load_results(rdir / "timing.json"),
                                simpoint.read_slices(rdir / "bbv.global.slices"))
    est = {f: v for f, v in con.execute("SELECT figure, estimated FROM sample_estimates WHERE run_id = ?",
                                        (sampled_id,))}
    rows = estimate.errors(est, actual)
    with con:
        con.executemany("UPDATE sample_estimates SET actual = ?, error_pct = ?, check_run_id = ? "
                        "WHERE run_id = ? AND figure = ?",
                        [(act, err, full_id, sampled_id, f) for f, _e, act, err in rows])
    return rows


def report(con, sampled_id: int, full_id: int, walls: list[float]) -> None:
    from analysis.rows import metric, metrics
    from pipeline.sampled import projection
    rows = compare(con, sampled_id, full_id)
    m = metrics(con, sampled_id)
    region_walls = [w for (w,) in con.execute("SELECT wall_s FROM sample_regions WHERE run_id = ?", (sampled_id,))]
    full_insns = sum(n for (n,) in con.execute("SELECT insns FROM timing_cpu WHERE run_id = ?", (full_id,)))
    detail = m.get("sampled.detailed_insns", 0)
    with con:
        metric(con, sampled_id, "sampled.check_full_wall_s", round(walls[1], 1), "s")
        metric(con, sampled_id, "sampled.check_sampled_wall_s", round(walls[0], 1), "s")
    print(f"\nsample-check: sampled run {sampled_id} against the full detailed run {full_id}")
    print(f"  {'figure':<34} {'estimated':>16} {'full run':>16} {'error':>9}")
    shown = [r for r in rows if r[0] in KEY_FIGURES or r[0].endswith(".stall_share")
             or (r[0].startswith("cpu") and r[0].endswith(".stall_ps"))]
    for f, e, act, err in shown:
        print(f"  {f:<34} {e:>16.6g} {act if act is not None else float('nan'):>16.6g} "
              f"{'' if err is None else f'{err:+.2f} %':>9}")
    prof = walls[0] - m.get("sampled.sampling_wall_s", 0)
    print(f"  wall: sampled {walls[0]:.0f} s (profile {prof:.0f} s, "
          f"checkpoints {m.get('sampled.checkpoint_wall_s', 0):.0f} s, "
          f"regions {m.get('sampled.regions_wall_s', 0):.0f} s), full detailed {walls[1]:.0f} s: "
          f"{walls[1] / walls[0]:.2f}x")
    if full_insns:
        func = m.get("sampled.functional_insns", 0)
        print(f"  in detail: {detail:.3g} of {full_insns:.3g} instructions ({full_insns / max(detail, 1):.1f}x fewer)"
              + (f"; with the functional warm-up, {detail + func:.3g} ({full_insns / max(detail + func, 1):.1f}x fewer)"
                 if func else ""))
    print("  regions on N workers (projected from their measured wall): "
          + ", ".join(f"{n}: {projection(region_walls, n):.0f} s" for n in (1, 2, 4, 8, 16)))
