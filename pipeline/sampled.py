"""Pipeline: `--timing sampled`, SimPoint end to end.

1. The run itself is the profile: restored, under the fast plugin, writing
   machine-wide basic-block vectors (timing/plugin_bbv.c); its guest
   figures are stored as any run's.
2. Its vectors are clustered (sampling/simpoint.py: SimPoint 3.2's
   algorithm) into simulation points, stored in simpoint_picks.
3. A repeat of the run (runs repeat exactly) stops at a warm-up before each
   point and is saved there with its disks (engine/regions.py; series patch
   0008); it quits after the last, so it costs the run up to that point.
4. Each region restores its checkpoint under the detailed model, warms it
   functionally for `sample_functional` slices (the model sees everything,
   nothing is charged: the guest runs as in the profile), then priced for
   `sample_warmup` slices, measures the point's slice and stops; the
   regions run at once on a local pool of `sample_workers`.
5. The whole run's modeled figures are estimated from the weighted regions
   (sampling/estimate.py) into sample_estimates, the regions into
   sample_regions; `./run.py sample-check` adds the full detailed run's
   figures and the error of each.

A point whose warm-up would start before the run starts from the machine's
snapshot after boot, with the warm-up it has room for.
"""
from __future__ import annotations

import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from engine.base import RegionError, SnapshotError
from pipeline.spec import RunSpec

# How far (all vCPUs' instructions together, as a share of a slice) a
# checkpoint's vCPUs may be from the profile's at its boundary (on_path).
PATH_TOLERANCE = 0.0001


class SamplingError(RuntimeError):
    pass


def add_options(p) -> None:
    """A sampled run's own options, on `./run.py` and `./run.py sample-check` alike."""
    d = RunSpec  # each default is RunSpec's, written there only
    p.add_argument("--sample-max-k", type=int, default=d.sample_max_k, metavar="K",
                   help=f"--timing sampled: at most K simulation points (SimPoint's maxK; default {d.sample_max_k}; "
                        "at most one per two full slices of the profile: a short run gets fewer, and says so)")
    p.add_argument("--sample-warmup", type=int, default=d.sample_warmup, metavar="SLICES",
                   help="--timing sampled: slices run detailed before each point to warm the model "
                        f"(default {d.sample_warmup})")
    p.add_argument("--sample-functional", type=int, default=d.sample_functional, metavar="SLICES",
                   help="--timing sampled: slices before the detailed warm-up in which the model only warms "
                        f"(caches, TLBs, directory, streams), charging nothing (default {d.sample_functional})")
    p.add_argument("--sample-workers", type=int, default=d.sample_workers, metavar="N",
                   help=f"--timing sampled: regions run at once (default {d.sample_workers})")


def spec_options(a) -> dict:
    """The RunSpec fields add_options' arguments set."""
    return {"sample_max_k": a.sample_max_k, "sample_warmup": a.sample_warmup,
            "sample_functional": a.sample_functional, "sample_workers": a.sample_workers}


def finish(ctx, con, run_id: int, rdir: Path) -> str:
    """Steps 2-5 for the profile run `run_id` (just stored, ok). ctx: the
    run (pipeline/steps.py Run: its spec, snapshot, job, limits, and the
    region_conf / region_cmd / region_disks it offers); the engine is asked
    through ctx.prep.snaps (engine/base.py Snapshots). Returns the run's
    status: a failure is recorded on the run with its reason."""
    import timing
    from sampling import estimate, simpoint
    spec, snaps = ctx.spec, ctx.prep.snaps
    t0 = time.monotonic()
    work = rdir / "regions"
    try:
        vec = simpoint.read_bb(rdir / "bbv.global.bb")
        rows = simpoint.read_slices(rdir / "bbv.global.slices")
        if len(rows) != vec.n:
            raise SamplingError(f"{rdir / 'bbv.global.slices'}: {len(rows)} slices for {vec.n} vectors")
        # The run's last slice is partial (its end): clustered, it can become a
        # point standing for full slices with the rates of the guest's exit
        # (latprobe: a 127 K-instruction tail picked for 5 of 18 slices). It
        # stays out; its instructions are priced at the others' rates.
        partial = rows[-1]["insns"] < spec.slice_insns
        full = vec.n - 1 if vec.n > 1 and partial else vec.n
        max_k, warmup, functional, chosen = fit(spec, vec.n, full, partial)
        if chosen:  # a short run: what fits it, said here and in the run's limitations
            print(f"sampled: {chosen}", flush=True)
        vec = vec.first(full) if full < vec.n else vec
        topo = ctx.prep.topo
        lat = [topo.latency_at_hops(h) for h in range(topo.max_hops() + 1)]
        picks = simpoint.cluster(vec, max_k, seed=1, extra=simpoint.mem_features(rows[:vec.n], lat))
        points = [(c, p, w) for c, (p, w) in enumerate(zip(picks.points, picks.weights)) if p >= 0]
        warm = warmup + functional
        start = {p: checkpoint_boundary(rows, max(0, p - warm), spec.slice_insns) for _c, p, _w in points}
        bounds = sorted(set(start.values()) - {0})
        print(f"sampled: {vec.n} slices, k = {picks.k}: points "
              + ", ".join(f"{p} (w {w:.3f})" for _c, p, w in points)
              + (f"; checkpoints at slices {', '.join(map(str, bounds))}" if bounds else "")
              + "".join(f"; point {p} warms from slice {b} (a disk request outstanding at the boundaries after it)"
                        for p, b in start.items() if b < max(0, p - warm)), flush=True)
        work.mkdir()
        tc = time.monotonic()
        meta: dict[int, dict] = {0: {"late_insns": 0, "cpu_insns": [0] * len(rows[0]["cpu_insns"])}}
        retaken = 0
        prev = 0
        for b in bounds:  # each from the one before (see engine/regions.checkpoint), or from the snapshot again
            try:
                meta[b] = _checkpoint(ctx, work, rows, meta, prev, b, f"segment-{b}")
            except OffPath as e:
                if not prev:
                    raise
                # the snapshot after boot is the profile's own start: a segment from it repeats the profile
                print(f"sampled: {e}; taken again from the snapshot after boot", flush=True)
                shutil.rmtree(work / f"ckpt-{b}")
                meta[b] = _checkpoint(ctx, work, rows, meta, 0, b, f"segment-{b}-from-0")
                retaken += 1
            print(f"sampled: checkpoint at slice {b}: on the profile's path (vCPUs {meta[b]['path_dev']} "
                  f"instructions off in all)" + (f", taken {meta[b]['late_insns']} instructions late"
                                                 if meta[b]["late_insns"] else ""), flush=True)
            prev = b
        ckpt_s = time.monotonic() - tc

        def region(point):
            c, p, w = point
            b = start[p]
            d = work / f"region-{c}"
            # functional: what comes before the priced warm-up, as much as there is room for (a checkpoint
            # moved earlier for a busy disk lengthens the priced part); without stalls nothing is charged anyway
            func = 0 if spec.no_stalls else min(functional, max(0, p - b - warmup))
            wall = _machine(ctx, work, b, d.name, "detailed", p - b + 1,
                            lambda cmd, d: snaps.region(cmd, d, ctx.run_to), warmup=p - b,
                            late=meta[b]["late_insns"], end=True, functional=func)
            rr = simpoint.read_slices(d / "bbv.global.slices")
            if len(rr) <= p - b:
                raise SamplingError(f"region {c}: {len(rr)} slices written, its measured slice is {p - b}; see {d}")
            elapsed, total = simpoint.slice_costs(rr[:p - b + 1])
            el, ct, idle = elapsed[-1], total[-1], rr[p - b].get("idle_ps") or 0
            row = {"run_id": run_id, "cluster": c, "point": p, "weight": w, "boundary": b, "warmup_slices": p - b,
                   "late_insns": meta[b]["late_insns"], "elapsed_ps": el, "cpu_time_ps": ct,
                   "functional_slices": func,
                   "functional_insns": sum(r["insns"] + r["spin_insns"] for r in rr[:func]),
                   "detailed_insns": sum(r["insns"] + r["spin_insns"] for r in rr[func:p - b + 1]),
                   "checkpoint_bytes": meta.get(b, {}).get("size"), "wall_s": round(wall, 2)}
            print(f"sampled: region {c} (slice {p}, from {b}): {el / 1e6:.3f} us elapsed, {wall:.1f} s", flush=True)
            return estimate.Region(c, p, w, b, rr[p - b]["insns"],
                                   estimate.figures(timing.load_results(d / "timing.json"), el, ct, idle)), row

        tr = time.monotonic()
        with ThreadPoolExecutor(max_workers=spec.sample_workers) as ex:
            try:
                done = list(ex.map(region, points))
            except KeyboardInterrupt:
                snaps.stop_all()  # the regions under way quit; the pool's exit waits for them
                raise
        regions_s = time.monotonic() - tr
    except (SamplingError, simpoint.SimpointError, RegionError, SnapshotError, timing.TimingError,
            OSError, ValueError) as e:
        return _give_up(ctx, con, run_id, "failed", f"sampling: {e}")
    except KeyboardInterrupt:
        return _give_up(ctx, con, run_id, "aborted", "interrupted (Ctrl-C) while sampling: no estimates")
    finally:
        for st in [*work.glob("ckpt-*/*.img"), *work.glob(f"ckpt-*/{snaps.state_file}")]:  # meta.json stays
            st.unlink()
    est = estimate.estimate([r for r, _ in done], estimate.profile_insns(rows), estimate.profile_idle(rows))
    store(con, run_id, max_k, picks, [row for _, row in done], est,
          {"checkpoint_wall_s": ckpt_s, "regions_wall_s": regions_s, "sampling_wall_s": time.monotonic() - t0,
           "profile_insns": sum(r["insns"] + r["spin_insns"] for r in rows),
           "detailed_insns": sum(row["detailed_insns"] for _, row in done),
           "functional_insns": sum(row["functional_insns"] for _, row in done),
           "path_dev_insns": max((x.get("path_dev", 0) for x in meta.values()), default=0),
           "checkpoints_retaken": retaken}, chosen)
    print(f"sampled: {len(done)} regions; elapsed {est['elapsed_ps'] / 1e9:.3f} ms estimated "
          f"({time.monotonic() - t0:.0f} s: checkpoints {ckpt_s:.0f} s, regions {regions_s:.0f} s)", flush=True)
    return "ok"


def fit(spec, slices: int, full: int, partial: bool = True) -> tuple[int, int, int, str]:
    """(max k, warm-up, functional warm-up, what was chosen or '') for a
    profile of `slices` slices, the `full` first of them clustered (partial:
    the last is not whole, and is left out unless it is the only one): a
    short run gets what fits it instead of failing after its profile.
    At most one point per two full slices (SimPoint's maxK is a bound): with
    k = the slices every slice is its own centroid, a perfect fit the BIC
    always takes, and every slice would run detailed. Warm-ups end before
    the run's last slice (the functional part cut first). Shorter slices
    would need the run profiled again: it names `--slice-insns` instead."""
    fits = max(1, full // 2)
    max_k, warmup, functional = min(spec.sample_max_k, fits), spec.sample_warmup, spec.sample_functional
    said = []
    n = lambda k, what: f"{k} {what}{'' if k == 1 else 's'}"
    if max_k < spec.sample_max_k:
        has = (f"the whole run is shorter than one slice of {spec.slice_insns:,} instructions"
               if partial and slices == 1 else
               f"one per two of the profile's {n(full, 'full slice' if partial else 'slice')} of "
               f"{spec.slice_insns:,} instructions")
        said.append(f"at most {n(max_k, 'point')}, not {spec.sample_max_k} (--sample-max-k): {has} (a smaller "
                    "--slice-insns gives more)")
    if warmup + functional >= slices:
        functional = min(functional, max(0, slices - 1 - warmup))
        warmup = min(warmup, slices - 1 - functional)
        said.append(f"a warm-up of {n(warmup, 'slice')}" + (f" after {functional} functional" if spec.sample_functional
                                                          else "")
                    + f", not {spec.sample_warmup}" + (f" after {spec.sample_functional}" if spec.sample_functional
                                                       else "")
                    + f" (--sample-warmup): the run is {n(slices, 'slice')}")
    return max_k, warmup, functional, ("a short run: " + "; ".join(said) if said else "")


def _give_up(ctx, con, run_id: int, status: str, reason: str) -> str:
    """The run keeps its guest's records, and says why it has no estimates."""
    ctx.prep.snaps.stop_all(False)
    print(f"error: {reason}", flush=True)
    with con:
        con.execute("UPDATE runs SET status = ?, reason = ? WHERE id = ?", (status, reason, run_id))
    return status


class OffPath(SamplingError):
    """A checkpoint whose vCPUs are not where the profile's were."""


def _checkpoint(ctx, work: Path, rows: list[dict], meta: dict[int, dict], prev: int, b: int, name: str) -> dict:
    """The checkpoint at boundary b, taken by a segment restored from the one
    at `prev` (0: the snapshot after boot) in work/name, and checked against
    the profile (on_path). Returns its meta, with every vCPU's instructions
    from the profile's start and the deviation."""
    from sampling import simpoint
    m = _machine(ctx, work, prev, name, "fast", b - prev,
                 lambda cmd, d: ctx.prep.snaps.checkpoint(cmd, d, work / f"ckpt-{b}", ctx.run_to),
                 late=meta[prev]["late_insns"])
    # where the profile's vCPUs were at the stop: this segment's counts on top of where it started
    out = {**m, "cpu_insns": [x + y for x, y in zip(meta[prev]["cpu_insns"], m["cpu_insns"])]}
    out["path_dev"] = on_path(rows, simpoint.read_slices(work / name / "bbv.global.slices"), prev, b,
                              meta[prev]["cpu_insns"], ctx.spec.slice_insns)
    if rows[b].get("point_late") not in (None, m["late_insns"]):
        raise OffPath(f"checkpoint at slice {b} was taken {m['late_insns']} instructions into its slice, where "
                      f"the profile's point was {rows[b]['point_late']}")
    return out


def checkpoint_boundary(rows: list[dict], want: int, slice_insns: int) -> int:
    """The latest boundary at or before `want` where the profile's machine
    could be saved within the slice it starts (`point_late`, the plugin's:
    no modelled disk request outstanding). Under swap traffic a request can
    be outstanding for seconds of guest time, and a checkpoint asked for at
    such a boundary was taken slices later (the fork storm on gs1280-8:
    23 guest seconds): that point warms from an earlier boundary instead.
    0 (the snapshot after boot) always can; a profile without the column
    (written before it) gives `want`."""
    for b in range(want, 0, -1):
        late = rows[b].get("point_late")
        if late is None or 0 <= late < slice_insns:
            return b
    return 0


def on_path(profile: list[dict], segment: list[dict], prev: int, b: int, start: list[int],
            slice_insns: int) -> int:
    """A checkpoint chain must repeat the profile: at boundary b the segment
    restored from checkpoint `prev` (its vCPUs then at `start` instructions
    of the profile's run) has every vCPU where the profile had it, within
    PATH_TOLERANCE of a slice all vCPUs together. Returns that deviation
    (instructions). The plugin counts a block when it starts, so a block
    cut short (a fault, an I/O instruction translated again) counts in full,
    and a restored machine, its translations made afresh, counts a few
    instructions otherwise on the same path (the fork storm on 8 vCPUs: 3,
    2 and 35 on three vCPUs after 140 slices). A machine that leaves the
    path (state a checkpoint does not carry: before series patch 0015,
    thousands of instructions a slice, growing) would give regions that
    are not the profile's slices: refused, with the vCPU furthest off."""
    if len(segment) < b - prev:
        raise SamplingError(f"checkpoint at slice {b}: its segment wrote {len(segment)} slices, expected {b - prev}")
    got = [s + x for s, x in zip(start, segment[b - prev - 1]["cpu_insns"])]
    want = profile[b - 1]["cpu_insns"]
    diff = [g - w for g, w in zip(got, want)]
    dev = sum(map(abs, diff))
    if dev > PATH_TOLERANCE * slice_insns:
        cpu = max(range(len(diff)), key=lambda i: abs(diff[i]))
        raise OffPath(f"checkpoint at slice {b} left the profile's path: restored from "
                            f"{f'slice {prev}' if prev else 'the snapshot after boot'}, its vCPUs reached the "
                            f"boundary {dev} instructions away from the profile's (over {PATH_TOLERANCE:.2%} of a "
                            f"slice); vCPU {cpu} after {got[cpu]}, the profile's after {want[cpu]}")
    return dev


def _machine(ctx, work: Path, boundary: int, name: str, mode: str, stop_after: int, run, warmup: int = 0,
             late: int = 0, end: bool = False, functional: int = 0):
    """Restore the checkpoint at `boundary` (0: the snapshot after boot) in
    work/name with its own copy of the checkpoint's disks (fresh ones from
    the snapshot), its plugin in `mode` stopping it `stop_after` slices on
    (the first slice `late` instructions short: the checkpoint was taken
    that far past its boundary; end: the stop ends a region, saves nothing,
    and does not wait for the disk; functional: the first slices of the
    warm-up charge nothing, timing/plugin.c); run(cmd, dir) drives it; the
    disks go afterwards."""
    snaps = ctx.prep.snaps
    d = work / name
    d.mkdir()
    if boundary:
        snaps.copy_disks(work / f"ckpt-{boundary}", d)
        images = tuple(d / n for n in snaps.disk_files)
    else:
        images = ctx.region_disks(d)
    conf = ctx.region_conf(mode, d, stop_after_slices=stop_after, region_warmup_slices=warmup,
                           functional_slices=functional, first_slice_done=late, stop_for_exit=end)
    try:
        return run(ctx.region_cmd(work / f"ckpt-{boundary}" if boundary else ctx.sdir, images, conf,
                                  d / "timing.conf"), d)
    finally:
        for img in images:
            Path(img).unlink(missing_ok=True)


def store(con, run_id: int, max_k: int, picks, region_rows: list[dict], est: dict[str, float],
          costs: dict[str, float], chosen: str = "") -> None:
    """max_k: the one the run used; chosen: what a short run chose to fit it
    (fit), added to the run row's limitations."""
    from analysis.rows import insert
    from sampling import simpoint
    with con:  # all of it or none
        simpoint.store_picks(con, run_id, "global", max_k, 1, picks)
        if chosen:
            con.execute("UPDATE runs SET limitations = limitations || ? WHERE id = ?",
                        (f"; sampling chose what fits {chosen}", run_id))
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
