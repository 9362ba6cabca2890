"""Engines behind one interface. The run pipeline asks an engine four
things: is this run possible on you, what is your version, how do you run
this guest (a command line, and how guest time is kept), and what did each
vCPU's clock say at the end. QEMU (ours, or Debian's binary for comparison)
is the only engine today; a gem5 config generator for a user's own binary
(`--gem5 PATH`) would be a second class here.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from configs import qemu, qemu_build, snapshot


@dataclass
class Invocation:
    cmd: list[str]
    clock_model: str
    quantum_ns: int | None
    label: str               # engine and version, for the run row


class QemuEngine:
    """ours=True: our QEMU (Debian's 10.0.2 source + configs/qemu-patches/),
    per-vCPU clocks; False: Debian's own binary with upstream -icount."""
    kind = "qemu-tcg"

    def __init__(self, ours: bool):
        self.ours = ours
        self.name = "vmlab" if ours else "debian"

    def check(self, spec) -> None:
        qemu_build.series()  # every patch the series names is there
        if not self.ours and spec.timing != "off":
            raise qemu.EngineError("--engine debian: runs with --timing off only (the timing plugin is built "
                                   "against our QEMU's plugin API)")

    def binary(self, built, topo) -> Path:
        return (built.qemu_dir / "bin" if self.ours else Path("/usr/bin")) / qemu_build.TARGETS[topo.guest_isa]

    def label(self, built, topo) -> str:
        if self.ours:
            return qemu_build.label()
        return f"Debian's {self.binary(built, topo)} (qemu-system {qemu_build.debian_version()})"

    def invocation(self, spec, topo, built, initrd: Path, swap_img, data_img, plugin, disk_model) -> Invocation:
        stalls = spec.timing == "detailed" and not spec.no_stalls and spec.qemu_mode == "icount"
        append = " ".join(w for w in (spec.kernel_append.strip(), qemu.perturbation(spec.seed, spec.repeat)) if w)
        cmd = qemu.command_line(topo, built.kernel_dir / "kernel", initrd, binary=self.binary(built, topo),
                                mode=spec.qemu_mode, quantum_ns=spec.quantum_ns, swap_image=swap_img,
                                data_image=data_img, append=append, hmat=not spec.no_hmat,
                                plugin=plugin, vcpu_clocks=self.ours,
                                disk=disk_model if (swap_img or data_img) else None)
        return Invocation(cmd, qemu.clock_model(topo, spec.qemu_mode, spec.quantum_ns, stalls, vcpu_clocks=self.ours),
                          spec.quantum_ns if spec.qemu_mode == "icount" and self.ours else None,
                          self.label(built, topo))

    # --- boot once, run many (configs/snapshot.py) -------------------------------------
    def restore_refusal(self, spec, topo) -> str | None:
        """None if this run can start from a snapshot, else why it boots."""
        if spec.boot:
            return "--boot"
        if not self.ours:
            return "Debian's QEMU has neither the clocks' vmstate nor the vmlab-ctl port"
        if spec.qemu_mode != "icount":
            return "--qemu-mode mttcg: guest time follows the host; a snapshot point would not repeat"
        if topo.guest_isa != "x86_64":
            # tried: the C /init asks for it and QEMU saves it, but a restored
            # guest never gets another timer interrupt
            return (f"{topo.guest_isa} guests boot every run: QEMU's clipper saves neither its typhoon chipset "
                    f"nor the CPUs' alarm timers, so a restored guest would never tick again")
        return None

    def _snapshot_cmd(self, spec, topo, built, kernel, initrd, images, disk_model, plugin=None):
        return snapshot.machine_command(topo, kernel, initrd, images, binary=self.binary(built, topo),
                                        quantum_ns=spec.quantum_ns, append=spec.kernel_append.strip(),
                                        hmat=not spec.no_hmat, disk=disk_model, plugin=plugin)

    def snapshot_key(self, spec, topo, built, kernel_sha256: str, disk_model) -> str:
        return snapshot.key(topo, kernel_sha256=kernel_sha256, initrd_sha256=_sha256(built.boot_userland),
                            engine_key=qemu_build.key(), quantum_ns=spec.quantum_ns,
                            append=spec.kernel_append.strip(), hmat=not spec.no_hmat, disk=disk_model)

    def snapshot(self, cache: Path, k: str, spec, topo, built, disk_model, timeout_s: float, log=print) -> Path:
        """The snapshot keyed k, taken now if the cache lacks it (or has a broken one)."""
        d = snapshot.disks_for(topo)
        boot = _boot_initrd(cache, built)

        def command(work: Path):
            images = (snapshot.sparse(work / "swap.img", d.swap_mib), snapshot.sparse(work / "data.img", d.data_mib),
                      snapshot.sparse(work / "job.img", d.job_mib))
            return self._snapshot_cmd(spec, topo, built, built.kernel_dir / "kernel", boot, images, disk_model)
        return snapshot.take(cache, k, command, timeout_s, log)

    def restore_invocation(self, spec, topo, built, cache: Path, sdir: Path, images, plugin, disk_model,
                           stalls: bool) -> Invocation:
        cmd = self._snapshot_cmd(spec, topo, built, built.kernel_dir / "kernel", _boot_initrd(cache, built), images,
                                 disk_model, plugin) + snapshot.restore_args(sdir)
        return Invocation(cmd, qemu.clock_model(topo, "icount", spec.quantum_ns, stalls) + ", restored from a snapshot",
                          spec.quantum_ns, self.label(built, topo))

    def run(self, inv: Invocation, console: Path, log: Path, boot_timeout: float, run_timeout: float,
            on_record=None, on_tick=None) -> qemu.Outcome:
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


def get(name: str) -> QemuEngine:
    if name not in ENGINES:
        raise qemu.EngineError(f"--engine: expected one of {', '.join(ENGINES)}, got {name!r}")
    return ENGINES[name]()
