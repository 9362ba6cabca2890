"""SimPoint sampling's estimates: a whole run's modeled figures from its
regions (pipeline/sampled.py runs them), and their error against a full
detailed run of the same inputs (`./run.py sample-check`).

A region is one simulation point: a checkpoint a warm-up before the point's
slice, restored under the detailed model; what the model counted over the
warm-up is dropped at the slice's start (plugin.region_warmup_slices), so
its figures are the measured slice's. A figure of the whole run is then

    estimate = N x sum_i w_i x_i / n_i

with w_i the point's cluster's share of the slices, x_i the figure over
the point's slice, n_i that slice's (non-spin) instructions and N the
profile's: each region priced per instruction, so a partial slice (the
run's last, or one that started late because a disk request held its
checkpoint back) counts for what it is. Ratios (the remote share, a
symbol's share of the stall) are taken from the estimated sums, never
averaged.

Elapsed time is the exception: part of it is the machine's idle time
(every vCPU halted, waiting for a timer or the disk), which is not
proportional to instructions and which no vector sees, so two slices of
the same code with unlike waits fall into one cluster. The profile
measured its own idle time, slice by slice (plugin_bbv.c): the estimate
is the regions' busy time (elapsed less idle) per instruction, plus the
profile's idle time,

    elapsed = N x sum_i w_i (elapsed_i - idle_i) / n_i + sum_s idle_s,

A wait for a timer or a disk request lasts as long under either model, but
one that overlaps work does not: under the fast model the work is done
sooner and more of the wait shows as idle (qsbench swapping: the profile
idled 11 % longer than the detailed run). Scaling the profile's idle time
by the regions' own against the profile's at the points (a ratio
estimator) was tried: with the two points of qsbench that waited it came
out -49 % (elapsed -6.0 %) where the profile's own was +11 % (elapsed
+0.35 %). `elapsed_ps.per_insn` is the plain estimate.
"""
from __future__ import annotations

from dataclasses import dataclass, field

# per-CPU counters of the model's results (timing/model_report.c) that add up over slices
ADDITIVE = ("insns", "stall_ps", "loads", "stores", "atomics", "l1_hits", "l2_hits", "l3_hits", "misses", "remote",
            "c2c", "lock_xfers", "lock_ps", "mem_ps", "dtlb_misses", "itlb_misses", "walks", "walk_ps",
            "l1i_misses", "fetch_stall_ps", "branches", "mispredicts", "mispredict_ps", "unknown_insns")
TOP_SYMBOLS = 8


@dataclass
class Region:
    cluster: int
    point: int                  # the simulation point's slice in the profile
    weight: float               # its cluster's share of the profile's slices
    boundary: int               # the checkpoint's slice boundary (point - warm-up)
    insns: float                # the measured slice's non-spin instructions
    figures: dict[str, float] = field(default_factory=dict)


def figures(result: dict, elapsed_ps: float, cpu_time_ps: float, idle_ps: float = 0.0) -> dict[str, float]:
    """The additive figures of one timing result (a region's measured slice,
    or a whole run): time (elapsed, the machine's idle part of it and the
    rest, busy), per-vCPU stall, counters summed over the CPUs, and each
    symbol's stall."""
    idle = min(float(idle_ps), float(elapsed_ps))
    out = {"elapsed_ps": float(elapsed_ps), "cpu_time_ps": float(cpu_time_ps), "idle_ps": idle,
           "busy_ps": float(elapsed_ps) - idle}
    for c in result.get("cpus", []):
        out[f"cpu{c['cpu']}.stall_ps"] = float(c.get("stall_ps", 0))
        for k in ADDITIVE:
            if k in c:
                out[f"total.{k}"] = out.get(f"total.{k}", 0.0) + float(c[k])
    for s in result.get("symbols", []):
        if s.get("stall_ps"):
            out[f"symbol.{s['symbol']}.stall_ps"] = float(s["stall_ps"])
    return out


def estimate(regions: list[Region], insns: float, idle_ps: float | None = None) -> dict[str, float]:
    """insns x sum w_i x_i / n_i for every figure any region has (0 where a
    region has none); insns: the profile's non-spin instructions. idle_ps:
    the profile's idle time, if it measured it: elapsed is then the regions'
    busy time per instruction plus that (the module's docstring)."""
    names = sorted({k for r in regions for k in r.figures})
    est = {k: insns * sum(r.weight * r.figures.get(k, 0.0) / r.insns for r in regions) for k in names}
    if idle_ps is not None and "busy_ps" in est:
        est["elapsed_ps.per_insn"] = est["elapsed_ps"]
        est["idle_ps"] = float(idle_ps)
        est["elapsed_ps"] = est["busy_ps"] + est["idle_ps"]
    return derived(est)


def derived(f: dict[str, float]) -> dict[str, float]:
    """Ratios from sums: the remote share of misses, and the largest symbols' share of the stall."""
    out = dict(f)
    if f.get("total.misses"):
        out["remote_share"] = f.get("total.remote", 0.0) / f["total.misses"]
    syms = sorted(((v, k) for k, v in f.items() if k.startswith("symbol.")), reverse=True)
    stall = sum(v for v, _ in syms)
    for v, k in syms[:TOP_SYMBOLS] if stall else []:
        out[k.replace(".stall_ps", ".stall_share")] = v / stall
    return out


def whole_run(result: dict, rows: list[dict]) -> dict[str, float]:
    """A full detailed run's figures, on the same definitions as a region's
    (its time summed over all its slices)."""
    from sampling.simpoint import slice_costs
    elapsed, total = slice_costs(rows)
    out = figures(result, sum(elapsed), sum(total), profile_idle(rows))
    out["elapsed_ps.per_insn"] = out["elapsed_ps"]  # what either elapsed estimate is set against
    return derived(out)


def errors(est: dict[str, float], actual: dict[str, float]) -> list[tuple[str, float, float | None, float | None]]:
    """(figure, estimated, actual, error %) for every estimated figure; the
    actual is None where the full run has no such figure, the error None
    where the actual is 0."""
    out = []
    for k in sorted(est):
        a = actual.get(k)
        err = 100.0 * (est[k] - a) / a if a else None
        out.append((k, est[k], a, err))
    return out


def profile_insns(rows: list[dict]) -> int:
    """The profile's non-spin instructions (what its slices cut)."""
    return sum(r["insns"] for r in rows)


def profile_idle(rows: list[dict]) -> float:
    """The machine's idle time over the slices (0 where not measured)."""
    return float(sum(r.get("idle_ps") or 0 for r in rows))
