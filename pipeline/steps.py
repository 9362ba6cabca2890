"""A run's steps after prepare and build, on one object (pipeline/execute.py
calls them in order):

- start: the run's folder, its disks and job, the timing plugin's
  configuration (the mode's), the engine's invocation, and the run row
  (`running`), each part giving its fields;
- supervise: the engine runs the guest to its end;
- ingest: the records, each vCPU's clock, the engine's counters and the
  timing model's results, with the final status, in one transaction;
- the timing mode's finishing step (timing/modes.py: a sampled run's
  regions, `sample_regions` here);
- summarise: what the user must know that the row does not say.
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
from pathlib import Path

import timing
from engine.base import SnapshotError
from engine.machine import sparse
from images import kernel
from pipeline.prepare import (
    BuildError,
    Prepared,
    cache_dir,
    disk_default,
    disk_mib,
    guest_disks,
    limitations,
    take_snapshot,
)

REPO = Path(__file__).resolve().parent.parent


def solid_state_knobs(disk, devs: list[str]) -> list[tuple[str, str, int]]:
    """Knobs telling the guest a solid-state disk model's virtio disks are not
    rotational (virtio-blk says they are; an NVMe driver would not), so swap
    on them runs as on an SSD: swap clusters, not one lock for every entry.
    Nothing for rotational models: their runs' initramfs bytes stay as they were."""
    if disk is None or disk.rotational:
        return []
    names = [d.removeprefix("/dev/") for d in devs if d.startswith("/dev/vd")]
    return [(f"nonrot_{n}", f"/sys/block/{n}/queue/rotational", 0) for n in names]


class Run:
    def __init__(self, prep: Prepared, built, con, dbpath: Path, runs_dir: Path | None = None,
                 userland: bytes | None = None):
        self.prep, self.built, self.con, self.spec = prep, built, con, prep.spec
        self.userland = built.userland if userland is None else userland
        self.runs_root = Path(runs_dir).resolve() if runs_dir else Path(dbpath).resolve().parent / "runs"
        self.restored = prep.start == "restored"
        self.id: int | None = None
        self.status = "aborted"
        self.outcome = None
        self.images: list[Path] = []
        self.sdir = self.skey = self.snap_failed = None
        self.timing_out: Path | None = None
        self.plugin = None

    # --- start ------------------------------------------------------------------------------
    def start(self) -> int:
        from analysis import db
        prep, spec, topo = self.prep, self.spec, self.prep.topo
        db.reap_stale(self.con, socket.gethostname())
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.rdir = rdir = self.runs_root / (f"{stamp}-{topo.name}-{prep.exp.name}-{prep.variant.patchset}-"
                                             f"{os.getpid()}-{prep.key[:8]}")
        rdir.mkdir(parents=True)
        self.console, self.qlog = rdir / "console.log", rdir / "qemu.log"
        machine = self._disks_and_job()
        syms = None
        if self.built.user_symbols:  # the programs' symbols, for the profile
            syms = rdir / "user.syms"
            syms.write_text(self.built.user_symbols)
        conf = prep.mode.plugin_config(spec, topo, rdir, self.built.kernel_dir / "System.map", self.restored, syms)
        if conf is not None:
            self.timing_out = conf.out
            (rdir / "timing.conf").write_text(conf.text(topo))
            self.plugin = (self.built.plugin, rdir / "timing.conf")
        self.inv = self._invocation(machine)
        self.boot_to, self.run_to = prep.engine.timeouts(spec, topo, prep.plan.timeout_s, prep.mode.slowdown,
                                                         prep.mode.boot_slowdown)
        self.id = db.start_run(self.con, self._row())
        print(f"run {self.id}: {topo.name} ({topo.shape()}, {topo.cpus} CPUs, {topo.memory_mib} MiB/node), "
              f"kernel {prep.variant.patchset}, {prep.exp.name} {prep.plan.command!r}, {self.inv.label}, "
              f"{self.inv.clock_model}; console {self.console}", flush=True)
        return self.id

    def _disks_and_job(self):
        """The run's disk images and its job (run.conf, knobs); a Machine for a booted run."""
        from engine.machine import Machine
        from images import initramfs
        prep, spec, topo, plan, rdir = self.prep, self.spec, self.prep.topo, self.prep.plan, self.rdir
        swap_mib, data_mib = disk_mib(plan, topo)
        on_disk = swap_mib > 0 and plan.params["swap"] == "disk"
        # Sparse images: they cost disk only as the guest writes. A restored
        # machine has all three of the snapshot's disks at its fixed sizes
        # (engine/snapshot.py); the run uses its own part of them.
        fixed = prep.snaps.disks(topo) if self.restored else None
        swap_img = data_img = None
        if on_disk or self.restored:
            swap_img = sparse(rdir / "swap.img", fixed.swap_mib if self.restored else swap_mib)
        swap_dev, data_dev = guest_disks(plan, topo, self.restored)
        # A data disk for experiments that declare one (disk_mib): ext2 made and
        # mounted on /data by /init, the next virtio-blk after swap.
        if data_mib > 0 or self.restored:
            data_img = sparse(rdir / "data.img", fixed.data_mib if self.restored else data_mib)
        self.images = [i for i in (swap_img, data_img) if i is not None]
        # VMLAB_SEED is read by nothing in the guest: the seed reaches a booted
        # guest as the kernel's vmlab.perturb word (the engine's perturbation), a
        # restored one as VMLAB_PERTURB, mixed into its entropy before the job.
        # It stays because every booted run's initramfs bytes include it.
        conf = (f"VMLAB_EXP={prep.exp.name}\nVMLAB_CMD={shlex.quote(plan.command)}\n"
                f"VMLAB_SWAP={swap_dev}\nVMLAB_DATA={data_dev}\nVMLAB_SEED={spec.seed}\n")
        if self.restored:
            conf += (f"VMLAB_SWAP_KIB={swap_mib * 1024 if on_disk else ''}\n"
                     f"VMLAB_DATA_KIB={data_mib * 1024 if data_mib else ''}\n"
                     f"VMLAB_PERTURB={prep.engine.perturbation(spec.seed, spec.repeat)}\n")
        knobs = "".join(f"{name} {path} {value}\n" for name, path, value in plan.knobs() + solid_state_knobs(
            prep.disk_model, [swap_dev, data_dev]))
        run_files = initramfs.run_archive({"run.conf": conf, "knobs": knobs})
        if not self.restored:  # a booted guest's kernel unpacks the two archives
            initrd = rdir / "initramfs.cpio"
            initrd.write_bytes(self.userland + run_files)
            return Machine(topo, self.built.kernel_dir / "kernel", initrd, qemu_mode=spec.qemu_mode,
                           quantum_ns=spec.quantum_ns, append=spec.kernel_append.strip(), hmat=not spec.no_hmat,
                           disk=prep.disk_model if (swap_img or data_img) else None, swap=swap_img, data=data_img)
        self.job = initramfs.join(self.userland, run_files)  # a restored one's cpio wants one
        job_img = rdir / "job.img"
        self.images.append(job_img)
        try:
            prep.snaps.job_image(job_img, self.job)
            if not (self.built.snapshot or self.built.snapshot_error):
                self.built = take_snapshot(prep, self.built)
            if self.built.snapshot_error:
                self.skey, self.snap_failed = self.built.snapshot_error
            else:
                self.skey, self.sdir = self.built.snapshot
                why = prep.snaps.problem(self.sdir, self.skey)  # removed or replaced since the build step
                if why:
                    raise SnapshotError(why)
        except SnapshotError as e:
            self._drop_images()
            raise BuildError(str(e)) from None
        return None

    def _invocation(self, machine):
        from engine.base import Invocation
        prep, spec, topo = self.prep, self.spec, self.prep.topo
        stalls = prep.mode.stalls_reach_guest(spec)
        if self.snap_failed:
            return Invocation(["(not run: the boot for its snapshot failed)"], "restored from a snapshot that "
                              "could not be taken", spec.quantum_ns, prep.engine.label(self.built, topo))
        if self.restored:
            return prep.snaps.restore(spec, topo, self.built, cache_dir(), self.sdir, tuple(self.images),
                                      self.plugin, prep.disk_model, stalls)
        return prep.engine.invocation(spec, topo, self.built, machine.with_(plugin=self.plugin), stalls)

    def _row(self):
        """The run row at the start, each part's fields."""
        from analysis.runrow import RunStart
        from images import initramfs
        prep, spec, topo, variant, plan, inv = self.prep, self.spec, self.prep.topo, self.prep.variant, \
            self.prep.plan, self.inv
        kmeta = kernel.load_meta(self.built.kernel_dir)
        machine = dict(topology=topo.name, topology_sha256=topo.sha256, topology_toml=topo.text,
                       topology_shape=topo.shape(), nodes=topo.nodes, cpus=topo.cpus,
                       memory_mib_per_node=topo.memory_mib, scale=topo.scale, native_isa=topo.native_isa,
                       guest_isa=topo.guest_isa)
        software = dict(kernel_arch=variant.arch, kernel_release=kmeta["release"],
                        kernel_source=kmeta["source_package"], patch_set=variant.patchset,
                        kernel_flavor=variant.flavor, kernel_config_sha256=kmeta["config_sha256"],
                        kernel_sha256=kmeta["kernel_sha256"],
                        initramfs_sha256=hashlib.sha256(self.userland).hexdigest())
        engine = dict(engine=prep.engine.kind, engine_version=inv.label, qemu_mode=spec.qemu_mode,
                      clock_model=inv.clock_model, quantum_ns=inv.quantum_ns,
                      command_line=" ".join(shlex.quote(str(c)) for c in inv.cmd))
        mode = dict(timing_mode=prep.mode.name, timing_plugin=(
            f"vmlab_timing model {timing.MODEL_VERSION} sha256 {initramfs.sha256(self.built.plugin)[:12]}, "
            f"built against {inv.label}" if self.plugin else None))
        disk = dict(disk_model=(prep.disk_model.label() + ("; the default: the topology names no disk model"
                                                           if disk_default(prep) else "")
                                if prep.disk_model and self.images else None))
        return RunStart(
            started_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"), host=socket.gethostname(),
            vmlab_version=vmlab_version(), experiment=prep.exp.name,
            params_json=_dumps({**plan.all_values, "command": plan.command}), seed=spec.seed,
            log_path=str(self.console), limitations=limitations(prep), run_key=prep.key, start=prep.start,
            snapshot_key=self.skey, **machine, **software, **engine, **mode, **disk)

    # --- supervise ----------------------------------------------------------------------------
    def supervise(self, live=None) -> None:
        from analysis import summary
        from protocol import records
        prep = self.prep
        if self.snap_failed:
            # the boot that should have ended in the snapshot: its console is this run's
            failed = prep.snaps.failed_dir(cache_dir(), self.skey)
            for name, dst in (("console.log", self.console), ("qemu.log", self.qlog)):
                if (failed / name).exists():
                    shutil.copyfile(failed / name, dst)
            from engine.base import Outcome
            self.outcome = Outcome("failed", f"snapshot: {self.snap_failed}", 0.0, None, None,
                                   records.parse_bytes(self._console_bytes()))
            return
        with (live or summary.LiveProgress(prep.exp, prep.plan, prep.topo)) as prog:
            self.outcome = prep.engine.run(self.inv, self.console, self.qlog, self.boot_to, self.run_to,
                                           on_record=prog.record, on_tick=prog.tick)

    # --- ingest ---------------------------------------------------------------------------------
    def ingest(self) -> None:
        """The records and every part's results, with the final status, in one transaction."""
        from analysis import db
        from analysis.runrow import RunEnd
        from images import initramfs
        from protocol import records
        self._drop_images()
        out = self.outcome
        self.status = out.status if out else "aborted"
        fields = RunEnd(
            status=self.status, reason=out.reason if out else "interrupted (Ctrl-C)",
            ended_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            wall_s=round(out.wall_s, 1) if out else None,
            boot_wall_s=round(out.boot_wall_s, 1) if out and out.boot_wall_s else None,
            log_sha256=initramfs.sha256(self.console) if self.console.exists() else None,
            # the largest child's peak RSS: QEMU (the build's children are far smaller)
            qemu_maxrss_kib=resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
        )
        self.parsed = out.parsed if out else records.parse_bytes(self._console_bytes())
        clocks = self.prep.engine.vcpu_clocks(self.qlog)  # read once: the engine's rows and the profile's check
        extras = [self._engine_records(clocks), self._timing_records(), self._profile_records(clocks)]
        db.finish_run(self.con, self.id, fields, self.parsed, self.prep.topo,
                      extra=lambda c: [f(c) for f in extras if f])

    def _engine_records(self, clocks):
        from analysis.rows import insert, metric
        prep, run_id = self.prep, self.id
        sched = prep.engine.sched_counts(self.qlog)
        if sched:
            # every PAUSE costs the topology's pause_cycles: guest CPU time spent spin-waiting
            sched["pause_cpu_s"] = sched["pauses"] * prep.topo.pause_cycles * prep.engine.cycle_ps(prep.topo) / 1e12

        def write(c):
            insert(c, "vcpu_clocks", [{"run_id": run_id, "cpu": cpu, "insns": n, "stall_ps": st, "clock_ps": ps}
                                      for cpu, n, st, ps in clocks])
            for k, v in sched.items():
                metric(c, run_id, f"engine.{k}", v, "s" if k.endswith("_s") else "count")
        return write

    def _timing_records(self):
        if self.timing_out is None:
            return None
        if not self.timing_out.exists():
            print(f"warning: the timing plugin wrote no results ({self.timing_out}); see {self.qlog}",
                  file=sys.stderr)
            return None
        from analysis import timing as timing_db
        topo, run_id = self.prep.topo, self.id
        res = timing.load_results(self.timing_out)
        # a restored run's boot log is the snapshot's console
        boot_log = (self.sdir / "console.log").read_text(errors="replace") if self.sdir else ""
        ok, line = timing.map_matches_srat(topo, boot_log + self.console.read_text(errors="replace")) \
            if topo.guest_isa == "x86_64" else (True, "one node, no ACPI SRAT on this guest ISA to check")
        if not ok:
            print(f"warning: timing address map: {line}", file=sys.stderr)
        return lambda c: timing_db.ingest(c, run_id, res, ("" if ok else "MISMATCH: ") + line)

    def _profile_records(self, clocks):
        """The profile on the guest clock (timing/plugin_prof.c), with each vCPU's clock at the end."""
        path = self.rdir / "profile.json"
        if self.timing_out is None or not path.exists():
            return None
        from analysis import profile
        run_id = self.id
        return lambda c: profile.ingest(c, run_id, path, clocks)

    # --- the sampled mode's finishing step (timing/modes.py Sampled.finish) ------------------
    def sample_regions(self) -> str:
        from pipeline import sampled
        return sampled.finish(self, self.con, self.id, self.rdir)

    def region_conf(self, plugin_mode: str, d: Path, **region) -> str:
        """A checkpoint segment's or a region's plugin configuration (pipeline/sampled.py)."""
        import dataclasses
        conf = self.prep.mode.region_config(self.spec, self.prep.topo, d, self.built.kernel_dir / "System.map",
                                            plugin_mode)
        return dataclasses.replace(conf, **region).text(self.prep.topo)

    def region_cmd(self, state_dir: Path, images, conf_text: str, conf_path: Path) -> list[str]:
        conf_path.write_text(conf_text)
        p = self.prep
        return p.snaps.restore(self.spec, p.topo, self.built, cache_dir(), state_dir, images,
                               (self.built.plugin, conf_path), p.disk_model, False).cmd

    def region_disks(self, d: Path) -> tuple[Path, Path, Path]:
        fixed = self.prep.snaps.disks(self.prep.topo)
        job = d / "job.img"
        self.prep.snaps.job_image(job, self.job)
        return sparse(d / "swap.img", fixed.swap_mib), sparse(d / "data.img", fixed.data_mib), job

    # --- summarise ------------------------------------------------------------------------------
    def summarise(self) -> None:
        out = self.outcome
        if self.status == "failed" and self.plugin is not None and out and out.boot_wall_s is None \
                and self.qlog.exists():
            bad = [ln for ln in self.qlog.read_text(errors="replace").splitlines() if "plugin" in ln.lower()]
            if bad:  # QEMU refused the plugin: say why and what fixes it
                print(f"error: the timing plugin did not load: {bad[-1].strip()[:300]}; rebuild it against the "
                      f"installed QEMU with `./run.py build --timing {self.prep.mode.name}` (QEMU 10.x from "
                      "bookworm-backports)", file=sys.stderr)
        for err in self.parsed.errors[:5]:
            print(f"warning: {self.console}: {err}", file=sys.stderr)

    def _console_bytes(self) -> bytes:
        return self.console.read_bytes() if self.console.exists() else b""

    def _drop_images(self) -> None:
        for img in self.images:
            img.unlink(missing_ok=True)


def _dumps(obj) -> str:
    from analysis import summary
    return summary.dumps(obj)


def vmlab_version() -> str:
    r = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"], capture_output=True, text=True)
    return r.stdout.strip() or "unknown"
