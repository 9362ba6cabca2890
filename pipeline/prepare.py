"""A run's first two steps: prepare (every input checked against the
stages, before anything is built or written: bad input leaves no trace)
and build (kernel, initramfs, our QEMU, the plugin, and the machine's
snapshot after boot, all cached). pipeline/execute.py runs the rest.
"""
from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path

import engine as engines
import experiments
import topologies
from build import wrapper
from engine.base import Engine, SnapshotError, Snapshots
from images import kernel, variants
from pipeline import buildkeys
from pipeline.spec import InputError, RunSpec, run_key
from timing import modes
from topologies import disks

# A build that failed (status 1), or bad input the build found (status 2: a patch that does not apply)
BuildError = wrapper.BuildFailed


@dataclass
class Prepared:
    spec: RunSpec
    topo: object
    exp: object
    plan: object
    variant: object
    engine: Engine
    mode: modes.TimingMode
    disk_model: object | None
    key: str
    snaps: Snapshots | None = None  # the engine's snapshots, when the run restores the machine's
    boot_reason: str | None = None  # why a run boots (--boot, an engine or guest without snapshots)
    mode_reason: str = ""           # why --timing auto is a functional run here

    @property
    def start(self) -> str:
        """booted, or restored (from the machine's snapshot after boot)."""
        return "restored" if self.snaps else "booted"


def prepare(spec: RunSpec) -> Prepared:
    """Check everything that can be wrong with the input, before anything is
    built or written: bad input leaves no trace in the database."""
    try:
        topo = topologies.load(spec.topology)
        exp = experiments.load(spec.experiment)
        plan = exp.resolve(topo, experiments.parse_overrides(spec.param_args()))
        variant = variants.Variant(topo.guest_isa, spec.flavor, spec.kernel)
        variants.check_variant(variant)  # arch, flavor, patch set and line: one line each
        engine = engines.get(spec.engine)
        mode, mode_why = modes.resolve(spec.timing, spec.qemu_mode, engine.loads_plugin())
        if mode.name != spec.timing:  # auto, resolved: the run is keyed and recorded as the mode it runs
            spec = RunSpec(**{**spec.__dict__, "timing": mode.name})
        quantum = engine.check(spec, mode.loads_plugin)
        for name in ("timeout", "boot_timeout"):
            v = getattr(spec, name)
            if v is not None and not 0 < v < experiments.MAX_TIMEOUT_S:
                raise engines.EngineError(f"--{name.replace('_', '-')}: expected a positive number of seconds, "
                                          f"got {v:g}")
        disk_model = None
        disk_name = spec.disk or topo.disk
        if disk_name and disk_name != "host" and engine.models_disks(spec):
            disk_model = disks.get(disk_name, where="--disk" if spec.disk else f"{topo.path}: field 'disk.model'")
        elif spec.disk and spec.disk != "host":
            disks.get(spec.disk)  # a misspelt name is still an error
        mode.check(spec, topo)
        if quantum != spec.quantum_ns:
            spec = RunSpec(**{**spec.__dict__, "quantum_ns": quantum})
        snaps, why = engine.snapshots(spec, topo, *disk_mib(plan, topo))
        mode.check_start(why)
    except (topologies.TopologyError, experiments.ExperimentError, variants.BuildError, *engines.input_errors(),
            modes.TimingError, disks.DiskError) as e:
        raise InputError(str(e)) from None
    key = run_key(spec, topo.sha256, plan.all_values, disk_model.label() if disk_model else spec.disk,
                  mode.key(spec), "restored" if snaps else "booted", buildkeys.build_keys(engine, mode, exp, variant))
    return Prepared(spec, topo, exp, plan, variant, engine, mode, disk_model, key, snaps, why, mode_why)


def disk_mib(plan, topo) -> tuple[int, int]:
    """The run's swap (on disk or zram) and data disk sizes, MiB."""
    swap = round(plan.params["swap_frac"] * topo.total_memory_mib) if plan.params["swap"] != "none" else 0
    return swap, int(plan.all_values.get("disk_mib", 0))


def guest_disks(plan, topo, restored: bool) -> tuple[str, str]:
    """The guest's swap (/dev/vda, zram:MiB or '') and data disk (/dev/vda,
    or /dev/vdb behind a swap disk, or ''); a restored machine always has
    the snapshot's swap disk, used or not."""
    swap_mib, data_mib = disk_mib(plan, topo)
    on_disk = swap_mib > 0 and plan.params["swap"] == "disk"
    swap_dev = "/dev/vda" if on_disk else (f"zram:{swap_mib}" if swap_mib else "")
    return swap_dev, ("/dev/vdb" if on_disk or restored else "/dev/vda") if data_mib > 0 else ""


def disk_default(prep: Prepared) -> str:
    """The disk model in effect because the topology names none and no --disk
    does (topologies/disks.py: the default for its native ISA), else ''."""
    return prep.disk_model.name if prep.disk_model and not prep.spec.disk and prep.topo.disk_default else ""


def limitations(prep: Prepared) -> str:
    """The run row's `limitations`, what this run does not model, each
    sentence from the part that knows: the machine, the timing mode, the
    engine, the disks (docs/reference/limitations.md shows each case:
    pipeline/reference.py)."""
    spec, topo, mode, restored = prep.spec, prep.topo, prep.mode, prep.start == "restored"
    host_disks, disk_claims = disks.claims(prep.disk_model, disk_default(prep),
                                           *guest_disks(prep.plan, topo, restored), restored)
    model_start = (f" and the timing model's caches warmed over its first {spec.warmup_insns:,} instructions "
                   "(not counted)" if spec.warmup_insns else mode.cold_start())
    functional = [f"--timing auto ran functional: {prep.mode_reason}"] if prep.mode_reason else []
    return "; ".join([*topo.limitations(), *functional, mode.limitation(topo, mode.stalls_reach_guest(spec)),
                      *prep.engine.limitations(spec, topo, core_charges=mode.core_charges(spec, topo),
                                               host_disks=host_disks, restored=restored, model_start=model_start),
                      *disk_claims])


def cache_dir() -> Path:
    from bootstrap import bootstrap
    return bootstrap.cache_dir()


def build(prep: Prepared):
    """Kernel, initramfs, our QEMU and (when the mode loads it) the plugin,
    from the cache when unchanged; BuildError (status 2: bad input such as
    a patch that does not apply) otherwise. A restored run's snapshot too."""
    try:
        built = wrapper.build(cache_dir(), prep.variant, prep.topo.guest_isa, prep.exp.name,
                              timing=prep.mode.loads_plugin)
    except (RuntimeError, variants.BuildError) as e:
        raise BuildError(str(e), getattr(e, "status", 1)) from None
    return take_snapshot(prep, built) if prep.snaps else built


def take_snapshot(prep: Prepared, built):
    """The machine's snapshot after boot, from the cache or taken now, as
    built.snapshot; a boot that never asked for it (panic, hang) comes back
    as built.snapshot_error, and execute records the run failed with that
    boot's console."""
    spec, topo = prep.spec, prep.topo
    skey = prep.snaps.key(spec, topo, built, kernel.load_meta(built.kernel_dir)["kernel_sha256"], prep.disk_model)
    try:
        sdir = prep.snaps.take(cache_dir(), skey, spec, topo, built, prep.disk_model)
    except (SnapshotError, OSError) as e:
        # a guest that panics or hangs on the way to its snapshot: the run
        # is recorded failed with that boot's console (execute)
        print(f"snapshot: failed: {e}", file=sys.stderr, flush=True)
        return dataclasses.replace(built, snapshot_error=(skey, str(e)))
    print(f"snapshot: {sdir} (key {skey[:12]})", flush=True)
    return dataclasses.replace(built, snapshot=(skey, sdir))
