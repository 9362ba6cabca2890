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

from engine.snapshot import STATE
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
    from analysis import simpoint
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
        if spec.sample_max_k > vec.n:
            raise SamplingError(f"--sample-max-k {spec.sample_max_k}: above the profile's {vec.n} slices of "
                                f"{spec.slice_insns} instructions (a smaller --slice-insns gives more)")
        if spec.sample_warmup >= vec.n:
            raise SamplingError(f"--sample-warmup {spec.sample_warmup}: as long as the run, which is {vec.n} slices")
        picks = simpoint.cluster(vec, spec.sample_max_k, seed=1)
        points = [(c, p, w) for c, (p, w) in enumerate(zip(picks.points, picks.weights)) if p >= 0]
        bounds = sorted({max(0, p - spec.sample_warmup) for _c, p, _w in points} - {0})
        print(f"sampled: {vec.n} slices, k = {picks.k}: points "
              + ", ".join(f"{p} (w {w:.3f})" for _c, p, w in points)
              + (f"; checkpoints at slices {', '.join(map(str, bounds))}" if bounds else ""), flush=True)
        work.mkdir()
        ckpts: dict[int, Path] = {}
        meta: dict[int, dict] = {}
        tc = time.monotonic()
        prev = 0
        for b in bounds:  # each from the one before: see engine/regions.checkpoint
            seg = work / f"segment-{b}"
            seg.mkdir()
            if prev:
                regions.copy_disks(ckpts[prev], seg)
                images = tuple(seg / n for n in regions.DISKS)
            else:
                images = ctx.disks(seg)
            conf = ctx.conf("fast", seg) + f"plugin.stop_slices {b - prev}\n"
            cmd = ctx.cmd(ckpts[prev] if prev else ctx.sdir, images, conf, seg / "timing.conf")
            try:
                meta[b] = regions.checkpoint(cmd, seg, work / f"ckpt-{b}", ctx.timeout_s)
            finally:
                for img in images:
                    Path(img).unlink(missing_ok=True)
            ckpts[b] = work / f"ckpt-{b}"
            prev = b
        ckpt_s = time.monotonic() - tc

        def one(point):
            c, p, w = point
            b = max(0, p - spec.sample_warmup)
            m = p - b
            d = work / f"region-{c}"
            d.mkdir()
            if b:
                regions.copy_disks(ckpts[b], d)
                images = tuple(d / n for n in regions.DISKS)
            else:
                images = ctx.disks(d)
            conf = ctx.conf("detailed", d) + f"plugin.stop_slices {m + 1}\n" + (
                f"plugin.region_warmup_slices {m}\n" if m else "")
            cmd = ctx.cmd(ckpts[b] if b else ctx.sdir, images, conf, d / "timing.conf")
            try:
                wall = regions.region(cmd, d, ctx.timeout_s)
            finally:
                for img in images:
                    Path(img).unlink(missing_ok=True)
            res = timing.load_results(d / "timing.json")
            rr = simpoint.read_slices(d / "bbv.global.slices")
            if len(rr) <= m:
                raise SamplingError(f"region {c}: {len(rr)} slices written, its measured slice is {m}; see {d}")
            from analysis import sampling
            el, ct = sampling.slice_cost(rr, m)
            reg = sampling.Region(c, p, w, b, sampling.figures(res, el, ct))
            row = {"run_id": run_id, "cluster": c, "point": p, "weight": w, "boundary": b, "warmup_slices": m,
                   "late_insns": meta.get(b, {}).get("late_insns", 0), "elapsed_ps": el, "cpu_time_ps": ct,
                   "detailed_insns": sum(r["insns"] + r["spin_insns"] for r in rr[:m + 1]),
                   "checkpoint_bytes": meta.get(b, {}).get("size"), "wall_s": round(wall, 2)}
            print(f"sampled: region {c} (slice {p}, from {b}): {el / 1e6:.3f} us elapsed, {wall:.1f} s", flush=True)
            return reg, row

        tr = time.monotonic()
        with ThreadPoolExecutor(max_workers=spec.sample_workers) as ex:
            done = list(ex.map(one, points))
        regions_s = time.monotonic() - tr
    except (SamplingError, simpoint.SimpointError, regions.RegionError, timing.TimingError, OSError,
            ValueError) as e:
        reason = f"sampling: {e}"
        print(f"error: {reason}", flush=True)
        with con:
            con.execute("UPDATE runs SET status = 'failed', reason = ? WHERE id = ?", (reason, run_id))
        return "failed"
    finally:
        for st in [*work.glob("ckpt-*/*.img"), *work.glob(f"ckpt-*/{STATE}")]:  # RAM and disks; meta.json stays
            st.unlink()
    from analysis import sampling
    est = sampling.estimate([r for r, _ in done], sampling.length_in_slices(rows, spec.slice_insns))
    store(con, run_id, spec.sample_max_k, picks, [row for _, row in done], est,
          {"checkpoint_wall_s": ckpt_s, "regions_wall_s": regions_s, "sampling_wall_s": time.monotonic() - t0,
           "profile_insns": sum(r["insns"] + r["spin_insns"] for r in rows),
           "detailed_insns": sum(row["detailed_insns"] for _, row in done)})
    print(f"sampled: {len(done)} regions; elapsed {est['elapsed_ps'] / 1e9:.3f} ms estimated "
          f"({time.monotonic() - t0:.0f} s: checkpoints {ckpt_s:.0f} s, regions {regions_s:.0f} s)", flush=True)
    return "ok"


def store(con, run_id: int, max_k: int, picks, region_rows: list[dict], est: dict[str, float],
          costs: dict[str, float]) -> None:
    from analysis.rows import insert
    with con:  # all of it or none
        con.execute("DELETE FROM simpoint_picks WHERE run_id = ? AND vectors = 'global' AND max_k = ? AND seed = 1",
                    (run_id, max_k))
        insert(con, "simpoint_picks", [{"run_id": run_id, "vectors": "global", "max_k": max_k, "k": picks.k,
                                        "seed": 1, "cluster": c, "interval": picks.points[c],
                                        "weight": picks.weights[c]} for c in range(picks.k) if picks.points[c] >= 0])
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
