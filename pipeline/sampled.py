"""Pipeline: `--timing sampled`, SimPoint end to end.

1. The run itself is the profile: restored, under the fast plugin, writing
   machine-wide basic-block vectors (timing/plugin_bbv.c); its guest
   figures are stored as any run's.
2. Its vectors are clustered (analysis/simpoint.py: SimPoint 3.2's
   algorithm) into simulation points, stored in simpoint_picks.
3. A repeat of the run (runs repeat exactly) stops at a warm-up before each
   point and is saved there with its disks (engine/regions.py; series patch
   0013); it quits after the last, so it costs the run up to that point.
4. Each region restores its checkpoint under the detailed model, warms it
   for `sample_warmup` slices, measures the point's slice and stops; the
   regions run at once on a local pool of `sample_workers`.
5. The whole run's modeled figures are estimated from the weighted regions
   (analysis/sampling.py) into sample_estimates, the regions into
   sample_regions; `./run.py sample-check` adds the full detailed run's
   figures and the error of each.

A point whose warm-up would start before the run starts from the machine's
snapshot after boot, with the warm-up it has room for.
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from engine.snapshot import STATE, SnapshotError
from pipeline.spec import InputError

MAX_K = 100
MAX_WARMUP = 100


class SamplingError(RuntimeError):
    pass


def check(spec) -> None:
    """A sampled run's own options, before anything is built or written."""
    if not 1 <= spec.sample_max_k <= MAX_K:
        raise InputError(f"--sample-max-k: expected 1..{MAX_K} clusters, got {spec.sample_max_k}")
    if not 0 <= spec.sample_warmup <= MAX_WARMUP:
        raise InputError(f"--sample-warmup: expected 0..{MAX_WARMUP} slices of warm-up, got {spec.sample_warmup}")
    if spec.sample_workers < 1:
        raise InputError(f"--sample-workers: expected at least 1, got {spec.sample_workers}")
    if spec.warmup_insns:
        raise InputError("--warmup-insns: not with --timing sampled (each region warms for --sample-warmup slices)")


def finish(ctx, con, run_id: int, rdir: Path) -> str:
    """Steps 2-5 for the profile run `run_id` (just stored, ok). ctx: what
    execute knows of the run (see execute.SampledContext). Returns the run's
    status: a failure is recorded on the run with its reason."""
    from analysis import sampling, simpoint
    from engine import regions
    import timing
    spec = ctx.spec
    t0 = time.monotonic()
    work = rdir / "regions"
    try:
        vec = simpoint.read_bb(rdir / "bbv.global.bb")
        rows = simpoint.read_slices(rdir / "bbv.global.slices")
        if len(rows) != vec.n:
            raise SamplingError(f"{rdir / 'bbv.global.slices'}: {len(rows)} slices for {vec.n} vectors")
        if spec.sample_warmup >= vec.n:
            raise SamplingError(f"--sample-warmup {spec.sample_warmup}: as long as the run, which is {vec.n} slices")
        # The run's last slice is partial (its end): clustered, it can become a
        # point standing for full slices with the rates of the guest's exit
        # (latprobe: a 127 K-instruction tail picked for 5 of 18 slices). It
        # stays out; its instructions are priced at the others' rates.
        if vec.n > 1 and rows[-1]["insns"] < spec.slice_insns:
            vec = vec.first(vec.n - 1)
        if spec.sample_max_k > vec.n:
            raise SamplingError(f"--sample-max-k {spec.sample_max_k}: above the profile's {vec.n} full slices of "
                                f"{spec.slice_insns} instructions (a smaller --slice-insns gives more)")
        topo = ctx.prep.topo
        lat = [topo.latency_at_hops(h) for h in range(topo.max_hops() + 1)]
        picks = simpoint.cluster(vec, spec.sample_max_k, seed=1, extra=simpoint.mem_features(rows[:vec.n], lat))
        points = [(c, p, w) for c, (p, w) in enumerate(zip(picks.points, picks.weights)) if p >= 0]
        bounds = sorted({max(0, p - spec.sample_warmup) for _c, p, _w in points} - {0})
        print(f"sampled: {vec.n} slices, k = {picks.k}: points "
              + ", ".join(f"{p} (w {w:.3f})" for _c, p, w in points)
              + (f"; checkpoints at slices {', '.join(map(str, bounds))}" if bounds else ""), flush=True)
        work.mkdir()
        tc = time.monotonic()
        meta: dict[int, dict] = {}
        for prev, b in zip([0, *bounds], bounds):  # each from the one before: see engine/regions.checkpoint
            meta[b] = _machine(ctx, work, prev, f"segment-{b}", "fast", b - prev,
                               lambda cmd, d, b=b: regions.checkpoint(cmd, d, work / f"ckpt-{b}", ctx.timeout_s))
        ckpt_s = time.monotonic() - tc

        def region(point):
            c, p, w = point
            b = max(0, p - spec.sample_warmup)
            d = work / f"region-{c}"
            wall = _machine(ctx, work, b, d.name, "detailed", p - b + 1,
                            lambda cmd, d: regions.region(cmd, d, ctx.timeout_s), warmup=p - b)
            rr = simpoint.read_slices(d / "bbv.global.slices")
            if len(rr) <= p - b:
                raise SamplingError(f"region {c}: {len(rr)} slices written, its measured slice is {p - b}; see {d}")
            elapsed, total = simpoint.slice_costs(rr[:p - b + 1])
            el, ct, idle = elapsed[-1], total[-1], rr[p - b].get("idle_ps") or 0
            row = {"run_id": run_id, "cluster": c, "point": p, "weight": w, "boundary": b, "warmup_slices": p - b,
                   "late_insns": meta.get(b, {}).get("late_insns", 0), "elapsed_ps": el, "cpu_time_ps": ct,
                   "detailed_insns": sum(r["insns"] + r["spin_insns"] for r in rr[:p - b + 1]),
                   "checkpoint_bytes": meta.get(b, {}).get("size"), "wall_s": round(wall, 2)}
            print(f"sampled: region {c} (slice {p}, from {b}): {el / 1e6:.3f} us elapsed, {wall:.1f} s", flush=True)
            return sampling.Region(c, p, w, b, rr[p - b]["insns"],
                                   sampling.figures(timing.load_results(d / "timing.json"), el, ct, idle)), row

        tr = time.monotonic()
        with ThreadPoolExecutor(max_workers=spec.sample_workers) as ex:
            try:
                done = list(ex.map(region, points))
            except KeyboardInterrupt:
                regions.STOP.set()  # the regions under way quit; the pool's exit waits for them
                raise
        regions_s = time.monotonic() - tr
    except (SamplingError, simpoint.SimpointError, regions.RegionError, SnapshotError, timing.TimingError,
            OSError, ValueError) as e:
        return _give_up(con, run_id, "failed", f"sampling: {e}")
    except KeyboardInterrupt:
        return _give_up(con, run_id, "aborted", "interrupted (Ctrl-C) while sampling: no estimates")
    finally:
        for st in [*work.glob("ckpt-*/*.img"), *work.glob(f"ckpt-*/{STATE}")]:  # RAM and disks; meta.json stays
            st.unlink()
    est = sampling.estimate([r for r, _ in done], sampling.profile_insns(rows), sampling.profile_idle(rows))
    store(con, run_id, spec.sample_max_k, picks, [row for _, row in done], est,
          {"checkpoint_wall_s": ckpt_s, "regions_wall_s": regions_s, "sampling_wall_s": time.monotonic() - t0,
           "profile_insns": sum(r["insns"] + r["spin_insns"] for r in rows),
           "detailed_insns": sum(row["detailed_insns"] for _, row in done)})
    print(f"sampled: {len(done)} regions; elapsed {est['elapsed_ps'] / 1e9:.3f} ms estimated "
          f"({time.monotonic() - t0:.0f} s: checkpoints {ckpt_s:.0f} s, regions {regions_s:.0f} s)", flush=True)
    return "ok"


def _give_up(con, run_id: int, status: str, reason: str) -> str:
    """The run keeps its guest's records, and says why it has no estimates."""
    from engine import regions
    regions.STOP.clear()
    print(f"error: {reason}", flush=True)
    with con:
        con.execute("UPDATE runs SET status = ?, reason = ? WHERE id = ?", (status, reason, run_id))
    return status


def _machine(ctx, work: Path, boundary: int, name: str, mode: str, stop_after: int, run, warmup: int = 0):
    """Restore the checkpoint at `boundary` (0: the snapshot after boot) in
    work/name with its own copy of the checkpoint's disks (fresh ones from
    the snapshot), its plugin in `mode` stopping it `stop_after` slices on;
    run(cmd, dir) drives it; the disks go afterwards."""
    from engine import regions
    d = work / name
    d.mkdir()
    if boundary:
        regions.copy_disks(work / f"ckpt-{boundary}", d)
        images = tuple(d / n for n in regions.DISKS)
    else:
        images = ctx.disks(d)
    conf = ctx.conf(mode, d) + f"plugin.stop_after_slices {stop_after}\n" + (
        f"plugin.region_warmup_slices {warmup}\n" if warmup else "")
    try:
        return run(ctx.cmd(work / f"ckpt-{boundary}" if boundary else ctx.sdir, images, conf, d / "timing.conf"), d)
    finally:
        for img in images:
            Path(img).unlink(missing_ok=True)


def store(con, run_id: int, max_k: int, picks, region_rows: list[dict], est: dict[str, float],
          costs: dict[str, float]) -> None:
    from analysis import simpoint
    from analysis.rows import insert
    with con:  # all of it or none
        simpoint.store_picks(con, run_id, "global", max_k, 1, picks)
        insert(con, "sample_regions", region_rows)
        insert(con, "sample_estimates", [{"run_id": run_id, "figure": k, "estimated": v} for k, v in est.items()])
        insert(con, "metrics", [{"run_id": run_id, "name": f"sampled.{k}", "value": v,
                                 "unit": "s" if k.endswith("_s") else "insns"} for k, v in costs.items()]
               + [{"run_id": run_id, "name": "sampled.elapsed_ps", "value": est.get("elapsed_ps"), "unit": "ps"},
                  {"run_id": run_id, "name": "sampled.regions", "value": len(region_rows), "unit": "count"}])


def projection(region_walls: list[float], workers: int) -> float:
    """The regions' wall time on `workers` workers (longest first, each to the
    least loaded worker): what a Dask cluster of that size would take for them."""
    load = [0.0] * workers
    for w in sorted(region_walls, reverse=True):
        load[load.index(min(load))] += w
    return max(load)
