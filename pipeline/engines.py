"""Engines behind one interface. The run pipeline asks an engine four
things: is this run possible on you, what is your version, how do you run
this guest (a command line, and how guest time is kept), and what did each
vCPU's clock say at the end. QEMU (ours, or Debian's binary for comparison)
is the only engine today; a gem5 config generator for a user's own binary
(`--gem5 PATH`) would be a second class here.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from configs import qemu, qemu_build


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

    def run(self, inv: Invocation, console: Path, log: Path, boot_timeout: float, run_timeout: float,
            on_record=None, on_tick=None) -> qemu.Outcome:
        return qemu.supervise(inv.cmd, console, log, boot_timeout, run_timeout, on_record=on_record, on_tick=on_tick)

    def vcpu_clocks(self, log: Path) -> list[tuple[int, int, int, int]]:
        return qemu.vcpu_clocks(log)

    def sched_counts(self, log: Path) -> dict[str, int]:
        return qemu.sched_counts(log)


ENGINES = {"vmlab": lambda: QemuEngine(True), "debian": lambda: QemuEngine(False)}


def get(name: str) -> QemuEngine:
    if name not in ENGINES:
        raise qemu.EngineError(f"--engine: expected one of {', '.join(ENGINES)}, got {name!r}")
    return ENGINES[name]()
