"""One run, as a library: the CLI, the study runner and a cluster task all
call it.

    prep = prepare(spec)            # every input checked; InputError otherwise
    built = build(prep)             # kernel, initramfs, our QEMU, plugin (cached)
    run_id, status = execute(prep, built, con, dbpath)

`execute` writes the run row as `running` when the guest starts and the
records with the final status in one transaction at the end (analysis/db.py),
so a crash, Ctrl-C or a killed worker never leaves records without a status.
"""
from __future__ import annotations

import hashlib
import os
import resource
import shlex
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import experiments
import timing
import topologies
from build import wrapper
from images import kernel
from pipeline import buildkeys, engines, sampled
from pipeline.spec import InputError, RunSpec, run_key
from topologies import disks

REPO = Path(__file__).resolve().parent.parent


# A build that failed (status 1), or bad input the build found (status 2: a patch that does not apply)
BuildError = wrapper.BuildFailed


@dataclass
class Prepared:
    spec: RunSpec
    topo: object
    exp: object
    plan: object
    variant: object
    engine: engines.Engine
    disk_model: object | None
    key: str
    start: str = "booted"          # or "restored": from the machine's snapshot after boot
    boot_reason: str | None = None  # why a run boots (--boot, an engine or guest without snapshots)


def prepare(spec: RunSpec) -> Prepared:
    """Check everything that can be wrong with the input, before anything is
    built or written: bad input leaves no trace in the database."""
    try:
        topo = topologies.load(spec.topology)
        exp = experiments.load(spec.experiment)
        plan = exp.resolve(topo, experiments.parse_overrides(spec.param_args()))
        variant = kernel.Variant(topo.guest_isa, spec.flavor, spec.kernel)
        kernel.check_variant(variant)
        if spec.flavor not in kernel.FLAVORS:
            raise kernel.BuildError(f"--flavor: expected one of {', '.join(kernel.FLAVORS)}, got {spec.flavor!r}")
        engine = engines.get(spec.engine)
        quantum = engine.check(spec)
        for name in ("timeout", "boot_timeout"):
            v = getattr(spec, name)
            if v is not None and not 0 < v < experiments.MAX_TIMEOUT_S:
                raise engines.EngineError(f"--{name.replace('_', '-')}: expected a positive number of seconds, "
                                       f"got {v:g}")
        disk_model = None
        disk_name = spec.disk or topo.disk
        if disk_name and disk_name != "host" and engine.ours and spec.qemu_mode == "icount":
            disk_model = disks.get(disk_name, where="--disk" if spec.disk else f"{topo.path}: field 'disk.model'")
        elif spec.disk and spec.disk != "host":
            disks.get(spec.disk)  # a misspelt name is still an error
        if spec.timing not in (*timing.MODES, "sampled"):
            raise timing.TimingError(f"--timing: expected one of {', '.join(timing.MODES)} or sampled, "
                                     f"got {spec.timing!r}")
        if spec.timing != "off":
            timing.check(topo, plugin_mode(spec), spec.qemu_mode)
        if spec.timing == "sampled":
            sampled.check(spec)
        if spec.warmup_insns and (spec.timing != "detailed" or not 0 < spec.warmup_insns < 10**13):
            raise timing.TimingError(f"--warmup-insns: expected a positive instruction count below 1e13 with "
                                     f"--timing detailed (it warms the model's caches), got {spec.warmup_insns} "
                                     f"with --timing {spec.timing}")
        if spec.warmup_insns and spec.boot:
            raise timing.TimingError("--warmup-insns: a restored run's (a booted detailed run counts its boot "
                                     "unpriced up to the experiment's marker; a warm-up needs the restore before it)")
        if not 10_000 <= spec.slice_insns <= 10**12:
            raise timing.TimingError(f"--slice-insns: expected 10,000 to 1e12 instructions per interval, got "
                                     f"{spec.slice_insns}")
        if spec.no_stalls and spec.timing != "detailed":
            raise timing.TimingError(f"--no-stalls: only with --timing detailed (it keeps the model's stalls off the "
                                     f"guest's clocks); --timing {spec.timing} prices no access, so has no stalls")
    except (topologies.TopologyError, experiments.ExperimentError, kernel.BuildError, *engines.INPUT_ERRORS,
            timing.TimingError, disks.DiskError) as e:
        raise InputError(str(e)) from None
    if quantum != spec.quantum_ns:
        spec = RunSpec(**{**spec.__dict__, "quantum_ns": quantum})
    why = engine.boots_only_why(spec, topo, *disk_mib(plan, topo))
    start = "booted" if why else "restored"
    if why and spec.timing == "sampled":
        raise InputError(f"--timing sampled: its regions start from snapshots, and this run cannot restore the "
                         f"machine's ({why})")
    key = run_key(spec, topo.sha256, plan.all_values, disk_model.label() if disk_model else spec.disk, start,
                  buildkeys.build_keys(spec, exp, variant))
    return Prepared(spec, topo, exp, plan, variant, engine, disk_model, key, start, why)


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


def timing_conf(prep: Prepared, built, mode: str, d: Path, restored: bool, profile: bool = False,
                sampled: bool = False) -> str:
    """The timing plugin's configuration for a machine run in directory d
    (its results and vectors go there): the run's own, or a sampled run's
    checkpoint segment or region in another mode. profile: a sampled run's
    profile, whose slices also count memory accesses by hop class. sampled:
    the profile, a segment or a region, whose TLBs are reset where
    checkpoints are taken."""
    spec, topo = prep.spec, prep.topo
    return timing.config_text(topo, mode, d / "timing.json", symbols=built.kernel_dir / "System.map", bbv_dir=d,
                              qemu_mode=spec.qemu_mode, stalls=not spec.no_stalls,
                              price_from_marker=not restored and topo.guest_isa == "x86_64",
                              warmup_insns=spec.warmup_insns, interval=spec.slice_insns, restored=restored,
                              mem_hops=profile, checkpoint_points=profile or sampled)


def plugin_mode(spec: RunSpec) -> str:
    """The timing plugin's mode for the run itself: a sampled run's guest
    runs under the fast profile (its regions run detailed afterwards)."""
    return "fast" if spec.timing == "sampled" else spec.timing


def stalls_charged(spec: RunSpec) -> bool:
    """Whether the timing model's stalls reach the guest's clocks."""
    return spec.timing == "detailed" and not spec.no_stalls and spec.qemu_mode == "icount"


def limitations(prep: Prepared) -> str:
    """The run row's `limitations`, what this run does not model
    (docs/reference/limitations.md shows each case: pipeline/reference.py)."""
    from analysis import summary
    spec, restored = prep.spec, prep.start == "restored"
    return summary.limitations(prep.topo, spec.qemu_mode, spec.timing, *guest_disks(prep.plan, prep.topo, restored),
                               stalls_charged(spec), disk_modeled=prep.disk_model is not None, restored=restored,
                               warmup_insns=spec.warmup_insns, vcpu_clocks=prep.engine.ours,
                               disk_default=disk_default(prep))


def disk_default(prep: Prepared) -> str:
    """The disk model in effect because the topology names none and no --disk
    does (topologies/disks.py: the default for its native ISA), else ''."""
    return prep.disk_model.name if prep.disk_model and not prep.spec.disk and prep.topo.disk_default else ""


def cache_dir() -> Path:
    from bootstrap import bootstrap
    return bootstrap.cache_dir()


def build(prep: Prepared):
    """Kernel, initramfs, our QEMU and (with --timing) the plugin, from the
    cache when unchanged; BuildError (status 2: bad input such as a patch
    that does not apply) otherwise."""
    try:
        built = wrapper.build(cache_dir(), prep.variant, prep.topo.guest_isa, prep.exp.name,
                                 timing=prep.spec.timing != "off")
    except (RuntimeError, kernel.BuildError) as e:
        raise BuildError(str(e), getattr(e, "status", 1)) from None
    return take_snapshot(prep, built) if prep.start == "restored" else built


def take_snapshot(prep: Prepared, built):
    """The machine's snapshot after boot (engine/snapshot.py), from the
    cache or taken now, as built.snapshot; a boot that never asked for it
    (panic, hang) comes back as built.snapshot_error, and execute records
    the run failed with that boot's console."""
    import dataclasses
    spec, topo = prep.spec, prep.topo
    skey = prep.engine.snapshot_key(spec, topo, built, kernel.load_meta(built.kernel_dir)["kernel_sha256"],
                                    prep.disk_model)
    try:
        sdir = prep.engine.snapshot(cache_dir(), skey, spec, topo, built, prep.disk_model)
    except (engines.SnapshotError, OSError) as e:
        # a guest that panics or hangs on the way to its snapshot: the run
        # is recorded failed with that boot's console (execute)
        print(f"snapshot: failed: {e}", file=sys.stderr, flush=True)
        return dataclasses.replace(built, snapshot_error=(skey, str(e)))
    print(f"snapshot: {sdir} (key {skey[:12]})", flush=True)
    return dataclasses.replace(built, snapshot=(skey, sdir))


def solid_state_knobs(disk, devs: list[str]) -> list[tuple[str, str, int]]:
    """Knobs telling the guest a solid-state disk model's virtio disks are not
    rotational (virtio-blk says they are; an NVMe driver would not), so swap
    on them runs as on an SSD: swap clusters, not one lock for every entry.
    Nothing for rotational models: their runs' initramfs bytes stay as they were."""
    if disk is None or disk.rotational:
        return []
    names = [d.removeprefix("/dev/") for d in devs if d.startswith("/dev/vd")]
    return [(f"nonrot_{n}", f"/sys/block/{n}/queue/rotational", 0) for n in names]


def execute(prep: Prepared, built, con, dbpath: Path, runs_dir: Path | None = None, userland: bytes | None = None,
            live=None) -> tuple[int, str]:
    """Boot the kernel, run the experiment, store the run: (run id, status).
    userland: the initramfs bytes to boot (a comparison boots every kernel
    with the same bytes); live: an object with record(r) and tick() for
    progress (analysis.summary.LiveProgress by default)."""
    from analysis import db, summary
    from analysis.rows import insert, metric
    from analysis.runrow import RunEnd, RunStart
    from experiments import records
    from images import initramfs

    spec, topo, exp, plan, variant = prep.spec, prep.topo, prep.exp, prep.plan, prep.variant
    userland = built.userland if userland is None else userland
    kmeta = kernel.load_meta(built.kernel_dir)
    host = socket.gethostname()
    db.reap_stale(con, host)
    runs_root = Path(runs_dir).resolve() if runs_dir else Path(dbpath).resolve().parent / "runs"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    rdir = runs_root / f"{stamp}-{topo.name}-{exp.name}-{variant.patchset}-{os.getpid()}-{prep.key[:8]}"
    rdir.mkdir(parents=True)

    restored = prep.start == "restored"
    swap_mib, data_mib = disk_mib(plan, topo)
    on_disk = swap_mib > 0 and plan.params["swap"] == "disk"
    # Sparse images: they cost disk only as the guest writes. A restored
    # machine has all three of the snapshot's disks at its fixed sizes
    # (engine/snapshot.py); the run uses its own part of them.
    fixed = prep.engine.snapshot_disks(topo) if restored else None
    swap_img = data_img = job_img = None
    if on_disk or restored:
        swap_img = engines.sparse(rdir / "swap.img", fixed.swap_mib if restored else swap_mib)
    swap_dev, data_dev = guest_disks(plan, topo, restored)
    # A data disk for experiments that declare one (disk_mib): ext2 made and
    # mounted on /data by /init, the next virtio-blk after swap.
    if data_mib > 0 or restored:
        data_img = engines.sparse(rdir / "data.img", fixed.data_mib if restored else data_mib)
    # VMLAB_SEED is read by nothing in the guest: the seed reaches a booted
    # guest as the kernel's vmlab.perturb word (the engine's perturbation), a
    # restored one as VMLAB_PERTURB, mixed into its entropy before the job.
    # It stays because every booted run's initramfs bytes include it.
    conf = (f"VMLAB_EXP={exp.name}\nVMLAB_CMD={shlex.quote(plan.command)}\n"
            f"VMLAB_SWAP={swap_dev}\nVMLAB_DATA={data_dev}\nVMLAB_SEED={spec.seed}\n")
    if restored:
        conf += (f"VMLAB_SWAP_KIB={swap_mib * 1024 if on_disk else ''}\n"
                 f"VMLAB_DATA_KIB={data_mib * 1024 if data_mib else ''}\n"
                 f"VMLAB_PERTURB={prep.engine.perturbation(spec.seed, spec.repeat)}\n")
    knobs = "".join(f"{name} {path} {value}\n" for name, path, value in plan.knobs() + solid_state_knobs(
        prep.disk_model, [swap_dev, data_dev]))
    run_files = initramfs.run_archive({"run.conf": conf, "knobs": knobs})
    # a booted guest's kernel unpacks the two archives; a restored one's cpio wants one
    job = initramfs.join(userland, run_files) if restored else userland + run_files
    initrd = rdir / "initramfs.cpio"
    sdir = skey = snap_failed = None
    if restored:
        job_img = rdir / "job.img"
        try:
            prep.engine.job_image(job_img, job)
            if not (built.snapshot or built.snapshot_error):
                built = take_snapshot(prep, built)
            if built.snapshot_error:
                skey, snap_failed = built.snapshot_error
            else:
                skey, sdir = built.snapshot
                why = prep.engine.snapshot_problem(sdir, skey)  # removed or replaced since the build step
                if why:
                    raise engines.SnapshotError(why)
        except engines.SnapshotError as e:
            for img in (swap_img, data_img, job_img):
                if img is not None:
                    img.unlink(missing_ok=True)
            raise BuildError(str(e)) from None
    else:
        initrd.write_bytes(job)

    plugin = timing_out = None
    if spec.timing != "off":
        timing_out = rdir / "timing.json"
        conf_path = rdir / "timing.conf"
        conf_path.write_text(timing_conf(prep, built, plugin_mode(spec), rdir, restored,
                                         profile=spec.timing == "sampled"))
        plugin = (built.plugin, conf_path)
    stalls = stalls_charged(spec)
    if snap_failed:
        inv = engines.Invocation(["(not run: the boot for its snapshot failed)"], "restored from a snapshot that "
                                 "could not be taken", spec.quantum_ns, prep.engine.label(built, topo))
    elif restored:
        inv = prep.engine.restore_invocation(spec, topo, built, cache_dir(), sdir, (swap_img, data_img, job_img),
                                             plugin, prep.disk_model, stalls)
    else:
        inv = prep.engine.invocation(spec, topo, built, initrd, swap_img, data_img, plugin, prep.disk_model)
    console, qlog = rdir / "console.log", rdir / "qemu.log"
    boot_to, run_to = prep.engine.timeouts(spec, topo, plan.timeout_s)
    row = RunStart(
        started_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"), host=host, vmlab_version=vmlab_version(),
        topology=topo.name, topology_sha256=topo.sha256, topology_toml=topo.text,
        topology_shape=topo.shape(), nodes=topo.nodes, cpus=topo.cpus,
        memory_mib_per_node=topo.memory_mib, scale=topo.scale, native_isa=topo.native_isa,
        guest_isa=topo.guest_isa, experiment=exp.name,
        params_json=summary.dumps({**plan.all_values, "command": plan.command}),
        kernel_arch=variant.arch, kernel_release=kmeta["release"], kernel_source=kmeta["source_package"],
        patch_set=variant.patchset, kernel_flavor=variant.flavor,
        kernel_config_sha256=kmeta["config_sha256"], kernel_sha256=kmeta["kernel_sha256"],
        initramfs_sha256=hashlib.sha256(userland).hexdigest(), engine=prep.engine.kind, engine_version=inv.label,
        qemu_mode=spec.qemu_mode, timing_mode=spec.timing, seed=spec.seed,
        clock_model=inv.clock_model, quantum_ns=inv.quantum_ns,
        disk_model=(prep.disk_model.label() + ("; the default: the topology names no disk model"
                                               if disk_default(prep) else "")
                    if prep.disk_model and (swap_img or data_img) else None),
        timing_plugin=(f"vmlab_timing model {timing.MODEL_VERSION} sha256 {initramfs.sha256(built.plugin)[:12]}, "
                       f"built against {inv.label}" if built.plugin else None),
        command_line=" ".join(shlex.quote(str(c)) for c in inv.cmd), log_path=str(console),
        limitations=limitations(prep),
        run_key=prep.key, start=prep.start, snapshot_key=skey,
    )
    run_id = db.start_run(con, row)
    print(f"run {run_id}: {topo.name} ({topo.shape()}, {topo.cpus} CPUs, {topo.memory_mib} MiB/node), "
          f"kernel {variant.patchset}, {exp.name} {plan.command!r}, {inv.label}, {row.clock_model}; "
          f"console {console}", flush=True)

    outcome = None
    try:
        if snap_failed:
            # the boot that should have ended in the snapshot: its console is this run's
            failed = prep.engine.failed_snapshot_dir(cache_dir(), skey)
            for name, dst in (("console.log", console), ("qemu.log", qlog)):
                if (failed / name).exists():
                    shutil.copyfile(failed / name, dst)
            outcome = engines.Outcome("failed", f"snapshot: {snap_failed}", 0.0, None, None,
                                   records.parse_bytes(console.read_bytes() if console.exists() else b""))
        else:
            with (live or summary.LiveProgress(exp, plan, topo)) as prog:
                outcome = prep.engine.run(inv, console, qlog, boot_to, run_to, on_record=prog.record,
                                          on_tick=prog.tick)
    except KeyboardInterrupt:
        pass
    finally:
        for img in (swap_img, data_img, job_img):
            if img is not None:
                img.unlink(missing_ok=True)
        status = outcome.status if outcome else "aborted"
        fields = RunEnd(
            status=status, reason=outcome.reason if outcome else "interrupted (Ctrl-C)",
            ended_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            wall_s=round(outcome.wall_s, 1) if outcome else None,
            boot_wall_s=round(outcome.boot_wall_s, 1) if outcome and outcome.boot_wall_s else None,
            log_sha256=initramfs.sha256(console) if console.exists() else None,
            # the largest child's peak RSS: QEMU (the build's children are far smaller)
            qemu_maxrss_kib=resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
        )
        parsed = outcome.parsed if outcome else records.parse_bytes(console.read_bytes() if console.exists() else b"")
        clocks = prep.engine.vcpu_clocks(qlog)
        extras = [lambda c: insert(c, "vcpu_clocks", [{"run_id": run_id, "cpu": cpu, "insns": n, "stall_ps": st,
                                                       "clock_ps": ps} for cpu, n, st, ps in clocks])]
        sched = prep.engine.sched_counts(qlog)
        if sched:
            # every PAUSE costs the topology's pause_cycles: guest CPU time spent spin-waiting
            sched["pause_cpu_s"] = sched["pauses"] * topo.pause_cycles * prep.engine.cycle_ps(topo) / 1e12
            extras.append(lambda c: [metric(c, run_id, f"engine.{k}", v, "s" if k.endswith("_s") else "count")
                                     for k, v in sched.items()])
        if timing_out is not None and timing_out.exists():
            from analysis import timing as timing_db
            res = timing.load_results(timing_out)
            # a restored run's boot log is the snapshot's console
            boot_log = (sdir / "console.log").read_text(errors="replace") if sdir else ""
            ok, line = timing.map_matches_srat(topo, boot_log + console.read_text(errors="replace")) \
                if topo.guest_isa == "x86_64" else (True, "one node, no ACPI SRAT on this guest ISA to check")
            extras.append(lambda c: timing_db.ingest(c, run_id, res, ("" if ok else "MISMATCH: ") + line))
            if not ok:
                print(f"warning: timing address map: {line}", file=sys.stderr)
        elif timing_out is not None:
            print(f"warning: the timing plugin wrote no results ({timing_out}); see {qlog}", file=sys.stderr)
        db.finish_run(con, run_id, fields, parsed, topo, extra=lambda c: [f(c) for f in extras])
    if spec.timing == "sampled" and status == "ok":
        status = sampled.finish(SampledContext(prep, built, sdir, job, run_to), con, run_id, rdir)
    if status == "failed" and plugin is not None and outcome and outcome.boot_wall_s is None and qlog.exists():
        bad = [ln for ln in qlog.read_text(errors="replace").splitlines() if "plugin" in ln.lower()]
        if bad:  # QEMU refused the plugin: say why and what fixes it
            print(f"error: the timing plugin did not load: {bad[-1].strip()[:300]}; rebuild it against the "
                  f"installed QEMU with `./run.py build --timing {spec.timing}` (QEMU 10.x from bookworm-backports)",
                  file=sys.stderr)
    for err in parsed.errors[:5]:
        print(f"warning: {console}: {err}", file=sys.stderr)
    return run_id, status


class SampledContext:
    """What a sampled run's regions need of the run (pipeline/sampled.py):
    its timing configuration in a mode, its restore command with other
    state and disks, fresh disks like its own, its limits."""

    def __init__(self, prep: Prepared, built, sdir: Path, job: bytes, timeout_s: float):
        self.prep, self.built, self.sdir, self.job, self.spec = prep, built, sdir, job, prep.spec
        self.timeout_s = timeout_s

    def conf(self, mode: str, d: Path) -> str:
        return timing_conf(self.prep, self.built, mode, d, restored=True, sampled=True)

    def cmd(self, state_dir: Path, images, conf_text: str, conf_path: Path) -> list[str]:
        conf_path.write_text(conf_text)
        p = self.prep
        return p.engine.restore_invocation(self.spec, p.topo, self.built, cache_dir(), state_dir, images,
                                           (self.built.plugin, conf_path), p.disk_model, False).cmd

    def disks(self, d: Path) -> tuple[Path, Path, Path]:
        fixed = self.prep.engine.snapshot_disks(self.prep.topo)
        job = d / "job.img"
        self.prep.engine.job_image(job, self.job)
        return engines.sparse(d / "swap.img", fixed.swap_mib), engines.sparse(d / "data.img", fixed.data_mib), job


def vmlab_version() -> str:
    r = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"], capture_output=True, text=True)
    return r.stdout.strip() or "unknown"


def run(spec: RunSpec, dbpath: Path, runs_dir: Path | None = None) -> tuple[int, str]:
    """prepare, build and execute one run into `dbpath` (a worker's call)."""
    from analysis import db
    prep = prepare(spec)
    built = build(prep)
    con = db.connect(Path(dbpath))
    try:
        return execute(prep, built, con, Path(dbpath), runs_dir)
    finally:
        con.close()
