"""Engines behind one interface (gem5's stdlib way: one abstract class per
kind of part). `Engine` below is everything the run pipeline asks of an
engine: check a run's engine options, say what it is, build the command
that boots a guest or restores the machine's snapshot after boot, take that
snapshot, supervise the guest to its end, and read back each vCPU's clock.
`pipeline/execute.py` talks to an engine only through it, so a second
engine (a gem5 config generator for a user's own binary, `--gem5 PATH`) is
one new subclass here and an entry in ENGINES. QEMU (ours, or Debian's
binary for comparison) is the only engine today.
"""
from __future__ import annotations

import abc
import os
from dataclasses import dataclass
from pathlib import Path

from engine import qemu, qemu_build, snapshot

# What the pipeline catches and reports as bad input (one line, exit 2).
EngineError = qemu.EngineError
INPUT_ERRORS = (qemu.EngineError, qemu_build.EngineBuildError)
SnapshotError = snapshot.SnapshotError
# A sparse disk image file: costs host disk only as the guest writes.
sparse = snapshot.sparse
# How a supervised guest ended (status, reason, wall times, the parsed console).
Outcome = qemu.Outcome


@dataclass
class Invocation:
    cmd: list[str]
    clock_model: str
    quantum_ns: int | None
    label: str               # engine and version, for the run row


class Engine(abc.ABC):
    """One engine. `spec` is a pipeline.spec.RunSpec, `topo` a loaded
    topology, `built` the build step's artifacts (kernel, initramfs,
    engine binary, plugin)."""
    name: str                # the --engine value
    kind: str                # the run row's `engine` column

    # --- input (prepare: before anything is built or written) ---------------------------
    @abc.abstractmethod
    def check(self, spec) -> int:
        """Raise EngineError on engine options this engine cannot run (mode,
        quantum, timing mode); return the quantum the run will use."""

    def boots_only_why(self, spec, topo, swap_mib: int = 0, data_mib: int = 0) -> str | None:
        """None if this run can start from the machine's snapshot after boot,
        else why it boots (swap_mib, data_mib: the run's disks, which must fit
        the snapshot machine's). Engines without snapshots always boot."""
        return "this engine has no snapshots after boot"

    # --- what it is ----------------------------------------------------------------------
    @abc.abstractmethod
    def label(self, built, topo) -> str:
        """The engine and its version (patch series) for the run row."""

    @abc.abstractmethod
    def timeouts(self, spec, topo, run_s: float) -> tuple[float, float]:
        """(boot, run) wall-clock limits in seconds; run_s is the experiment's
        own limit with the model off."""

    def perturbation(self, seed: int, repeat: int) -> str:
        """The word that perturbs a repeat (Alameldeen and Wood): '' for repeat 0."""
        return qemu.perturbation(seed, repeat)

    def cycle_ps(self, topo) -> int:
        return qemu.cycle_ps(topo)

    # --- booting and restoring -----------------------------------------------------------
    @abc.abstractmethod
    def invocation(self, spec, topo, built, initrd: Path, swap_img, data_img, plugin, disk_model) -> Invocation:
        """The command that boots the kernel with initrd and runs the job."""

    def snapshot_disks(self, topo) -> snapshot.Disks:
        """The fixed disk sizes a snapshot machine has (a restored run uses its part)."""
        raise NotImplementedError(f"{self.name}: no snapshots")

    def snapshot_key(self, spec, topo, built, kernel_sha256: str, disk_model) -> str:
        raise NotImplementedError(f"{self.name}: no snapshots")

    def snapshot(self, cache: Path, k: str, spec, topo, built, disk_model, log=print) -> Path:
        """The snapshot keyed k (a folder), taken now if the cache lacks it
        (or holds a broken one); SnapshotError if the boot never asked for it."""
        raise NotImplementedError(f"{self.name}: no snapshots")

    def snapshot_problem(self, sdir: Path, k: str) -> str | None:
        """None if sdir still holds the snapshot keyed k, else what is wrong."""
        raise NotImplementedError(f"{self.name}: no snapshots")

    def failed_snapshot_dir(self, cache: Path, k: str) -> Path:
        """Where the console of a boot that never reached its snapshot is kept."""
        raise NotImplementedError(f"{self.name}: no snapshots")

    def job_image(self, path: Path, payload: bytes) -> None:
        """Write the job (an initramfs archive) where a restored guest pulls it."""
        raise NotImplementedError(f"{self.name}: no snapshots")

    def restore_invocation(self, spec, topo, built, cache: Path, sdir: Path, images, plugin, disk_model,
                           stalls: bool) -> Invocation:
        raise NotImplementedError(f"{self.name}: no snapshots")

    # --- running and reading back --------------------------------------------------------
    @abc.abstractmethod
    def run(self, inv: Invocation, console: Path, log: Path, boot_timeout: float, run_timeout: float,
            on_record=None, on_tick=None) -> Outcome:
        """Start the guest and supervise it to its end (records streamed to on_record)."""

    @abc.abstractmethod
    def vcpu_clocks(self, log: Path) -> list[tuple[int, int, int, int]]:
        """Per vCPU (cpu, instructions, stall ps, clock ps) at the end, [] if unknown."""

    def sched_counts(self, log: Path) -> dict[str, int]:
        """The engine's scheduling counters (slices, PAUSEs), {} if none."""
        return {}


class QemuEngine(Engine):
    """ours=True: our QEMU (Debian's 10.0.2 source + engine/qemu-patches/),
    per-vCPU clocks; False: Debian's own binary with upstream -icount."""
    kind = "qemu-tcg"

    def __init__(self, ours: bool):
        self.ours = ours
        self.name = "vmlab" if ours else "debian"

    def check(self, spec) -> int:
        qemu_build.series()  # every patch the series names is there
        if spec.qemu_mode not in qemu.MODES:
            raise EngineError(f"--qemu-mode: expected one of {', '.join(qemu.MODES)}, got {spec.qemu_mode!r}")
        if not self.ours and spec.timing != "off":
            raise EngineError("--engine debian: runs with --timing off only (the timing plugin is built "
                              "against our QEMU's plugin API)")
        return qemu.check_quantum(spec.quantum_ns)

    def binary(self, built, topo) -> Path:
        return (built.qemu_dir / "bin" if self.ours else Path("/usr/bin")) / qemu_build.TARGETS[topo.guest_isa]

    def label(self, built, topo) -> str:
        if self.ours:
            return qemu_build.label()
        return f"Debian's {self.binary(built, topo)} (qemu-system {qemu_build.debian_version()})"

    def timeouts(self, spec, topo, run_s: float) -> tuple[float, float]:
        boot = spec.boot_timeout or qemu.boot_timeout_s(topo, spec.qemu_mode, spec.timing)
        return boot, spec.timeout or run_s * qemu.TIMING_SLOWDOWN[spec.timing]  # manifests time the model off

    def invocation(self, spec, topo, built, initrd: Path, swap_img, data_img, plugin, disk_model) -> Invocation:
        stalls = spec.timing == "detailed" and not spec.no_stalls and spec.qemu_mode == "icount"
        append = " ".join(w for w in (spec.kernel_append.strip(), qemu.perturbation(spec.seed, spec.repeat)) if w)
        cmd = qemu.command_line(topo, built.kernel_dir / "kernel", initrd, binary=self.binary(built, topo),
                                mode=spec.qemu_mode, quantum_ns=spec.quantum_ns, swap_image=swap_img,
                                data_image=data_img, append=append, hmat=not spec.no_hmat,
                                plugin=plugin, vcpu_clocks=self.ours,
                                disk=disk_model if (swap_img or data_img) else None)
        return Invocation(qemu.with_test_hooks(cmd),
                          qemu.clock_model(topo, spec.qemu_mode, spec.quantum_ns, stalls, vcpu_clocks=self.ours),
                          spec.quantum_ns if spec.qemu_mode == "icount" and self.ours else None,
                          self.label(built, topo))

    # --- boot once, run many (engine/snapshot.py) -------------------------------------
    def boots_only_why(self, spec, topo, swap_mib: int = 0, data_mib: int = 0) -> str | None:
        if spec.boot:
            return "--boot"
        if not self.ours:
            return "Debian's QEMU has neither the clocks' vmstate nor the vmlab-ctl port"
        if spec.qemu_mode != "icount":
            return "--qemu-mode mttcg: guest time follows the host; a snapshot point would not repeat"
        return snapshot.fits(topo, swap_mib, data_mib)

    def snapshot_disks(self, topo) -> snapshot.Disks:
        return snapshot.disks_for(topo)

    def _snapshot_cmd(self, spec, topo, built, kernel, initrd, images, disk_model, plugin=None):
        return snapshot.machine_command(topo, kernel, initrd, images, binary=self.binary(built, topo),
                                        quantum_ns=spec.quantum_ns, append=spec.kernel_append.strip(),
                                        hmat=not spec.no_hmat, disk=disk_model, plugin=plugin)

    def snapshot_key(self, spec, topo, built, kernel_sha256: str, disk_model) -> str:
        return snapshot.key(topo, kernel_sha256=kernel_sha256, initrd_sha256=_sha256(built.boot_userland),
                            engine_key=qemu_build.key(), quantum_ns=spec.quantum_ns,
                            append=spec.kernel_append.strip(), hmat=not spec.no_hmat, disk=disk_model)

    def snapshot(self, cache: Path, k: str, spec, topo, built, disk_model, log=print) -> Path:
        d = snapshot.disks_for(topo)
        timeout_s = spec.boot_timeout or qemu.boot_timeout_s(topo, "icount", "off")  # booted without the model
        boot = _boot_initrd(cache, built)

        def command(work: Path):
            images = (snapshot.sparse(work / "swap.img", d.swap_mib), snapshot.sparse(work / "data.img", d.data_mib),
                      snapshot.sparse(work / "job.img", d.job_mib))
            return qemu.with_test_hooks(
                self._snapshot_cmd(spec, topo, built, built.kernel_dir / "kernel", boot, images, disk_model))
        return snapshot.take(cache, k, command, timeout_s, log)

    def snapshot_problem(self, sdir: Path, k: str) -> str | None:
        return snapshot.check(sdir, k)

    def failed_snapshot_dir(self, cache: Path, k: str) -> Path:
        return snapshot.failed_dir(cache, k)

    def job_image(self, path: Path, payload: bytes) -> None:
        snapshot.job_image(path, payload)

    def restore_invocation(self, spec, topo, built, cache: Path, sdir: Path, images, plugin, disk_model,
                           stalls: bool) -> Invocation:
        cmd = self._snapshot_cmd(spec, topo, built, built.kernel_dir / "kernel", _boot_initrd(cache, built), images,
                                 disk_model, plugin) + snapshot.restore_args(sdir)
        cmd = qemu.with_test_hooks(cmd)
        return Invocation(cmd, qemu.clock_model(topo, "icount", spec.quantum_ns, stalls)
                          + ", restored from a snapshot",
                          spec.quantum_ns, self.label(built, topo))

    def run(self, inv: Invocation, console: Path, log: Path, boot_timeout: float, run_timeout: float,
            on_record=None, on_tick=None) -> Outcome:
        return qemu.supervise(inv.cmd, console, log, boot_timeout, run_timeout, on_record=on_record, on_tick=on_tick)

    def vcpu_clocks(self, log: Path) -> list[tuple[int, int, int, int]]:
        return qemu.vcpu_clocks(log)

    def sched_counts(self, log: Path) -> dict[str, int]:
        return qemu.sched_counts(log)


def _sha256(data: bytes) -> str:
    import hashlib
    return hashlib.sha256(data).hexdigest()


def _boot_initrd(cache: Path, built) -> Path:
    """The boot initramfs as a file QEMU can load: content-addressed, so a
    later build never changes what a snapshot's command line names."""
    p = Path(cache) / "initramfs" / "boot" / f"{_sha256(built.boot_userland)[:24]}.cpio"
    if not p.is_file():
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(built.boot_userland)
        tmp.rename(p)
    return p


ENGINES = {"vmlab": lambda: QemuEngine(True), "debian": lambda: QemuEngine(False)}


def get(name: str) -> Engine:
    if name not in ENGINES:
        raise EngineError(f"--engine: expected one of {', '.join(ENGINES)}, got {name!r}")
    return ENGINES[name]()
