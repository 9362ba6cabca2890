"""QEMU behind the engine seam (engine/base.py): ours (Debian's 10.0.2
source + engine/qemu-patches/: per-vCPU clocks, snapshots, the plugin
API) or Debian's own binary (upstream -icount, no snapshots), for
comparison."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

from engine import qemu, qemu_build, regions, snapshot
from engine.base import Engine, Invocation, Snapshots
from engine.machine import Machine

EngineError = qemu.EngineError


class QemuEngine(Engine):
    """ours=True: our QEMU, per-vCPU clocks; False: Debian's binary with upstream -icount."""
    kind = "qemu-tcg"

    def __init__(self, ours: bool):
        self._ours = ours
        self.name = "vmlab" if ours else "debian"

    def check(self, spec, with_plugin: bool) -> int:
        qemu_build.series()  # every patch the series names is there
        if spec.qemu_mode not in qemu.MODES:
            raise EngineError(f"--qemu-mode: expected one of {', '.join(qemu.MODES)}, got {spec.qemu_mode!r}")
        if not self._ours and with_plugin:
            raise EngineError("--engine debian: runs with --timing off only (the timing plugin is built "
                              "against our QEMU's plugin API)")
        return qemu.check_quantum(spec.quantum_ns)

    def snapshots(self, spec, topo, swap_mib: int = 0, data_mib: int = 0):
        if spec.boot:
            return None, "--boot"
        if not self._ours:
            return None, "Debian's QEMU has neither the clocks' vmstate nor the vmlab-ctl port"
        if spec.qemu_mode != "icount":
            return None, "--qemu-mode mttcg: guest time follows the host; a snapshot point would not repeat"
        why = snapshot.fits(topo, swap_mib, data_mib)
        return (None, why) if why else (QemuSnapshots(self), None)

    def loads_plugin(self) -> bool:
        return self._ours  # the plugin is built against the series' API

    def models_disks(self, spec) -> bool:
        return self._ours and spec.qemu_mode == "icount"  # the series' modeled disk keeps guest time

    def binary(self, built, topo) -> Path:
        return (built.qemu_dir / "bin" if self._ours else Path("/usr/bin")) / qemu_build.TARGETS[topo.guest_isa]

    def label(self, built, topo) -> str:
        if self._ours:
            return qemu_build.label()
        return f"Debian's {self.binary(built, topo)} (qemu-system {qemu_build.debian_version()})"

    def build_key(self) -> str:
        return qemu_build.key() if self._ours else f"debian {qemu_build.debian_version()}"

    def timeouts(self, spec, topo, run_s: float, slowdown: float, boot_slowdown: float) -> tuple[float, float]:
        boot = spec.boot_timeout or qemu.boot_timeout_s(topo, spec.qemu_mode, boot_slowdown)
        return boot, spec.timeout or run_s * slowdown  # manifests time the guest without the plugin

    def perturbation(self, seed: int, repeat: int) -> str:
        return qemu.perturbation(seed, repeat)

    def cycle_ps(self, topo) -> int:
        return qemu.cycle_ps(topo)

    def limitations(self, spec, topo, *, core_charges: bool, host_disks: list[str], restored: bool,
                    model_start: str) -> list[str]:
        which = ", ".join(host_disks[:-1]) + " and " + host_disks[-1] if len(host_disks) > 1 else "".join(host_disks)
        unrepeatable = (f"; not repeatable: its {which} complete{'' if len(host_disks) > 1 else 's'} in host time "
                        "(no disk model in effect), so two runs of the same inputs can differ from its first disk "
                        "request on, and disk latency is not modeled" if host_disks else "")
        out = []
        if spec.qemu_mode == "icount" and not self._ours:
            out.append("guest time = upstream icount (Debian's QEMU): one instruction counter for every vCPU, "
                       "1 instruction = 1 ns; not repeatable: host kicks decide where a woken vCPU starts and QEMU "
                       "sizes its TLBs by host time (our series' scheduler and TLB-window topics are not in it)"
                       + unrepeatable.replace("; not repeatable:", ";", 1))
        elif spec.qemu_mode == "icount":
            per = (f"instructions at the core's best case, {topo.core.width} a cycle, the core model charging "
                   "the rest" if core_charges else "instructions at the topology clock, 1 per cycle")
            out.append(f"guest time = per-vCPU clocks ({per}, x86 PAUSE at its "
                       "latency, + stalls), interleaved in a quantum; a plain store by one vCPU can be seen by "
                       "another up to a quantum late"
                       + (unrepeatable or "; deterministic: the same inputs give the same console and clocks, host "
                          "kicks included (the series' scheduler topic)"))
        else:
            out.append("guest time follows the host clock (MTTCG): not repeatable")
        if restored:
            out.append("restored from the machine's snapshot after boot (its key in snapshot_key): the guest "
                       "continues from the instruction where it asked for the snapshot, with QEMU's TLBs and "
                       "translated code flushed" + model_start
                       + "; its memory (page cache, slab, free pages) is what the snapshot boot left, so its "
                       "figures differ from a booted run's" + ("" if host_disks else ", not its repeatability"))
        return out

    def invocation(self, spec, topo, built, m: Machine, stalls: bool) -> Invocation:
        append = " ".join(w for w in (m.append, qemu.perturbation(spec.seed, spec.repeat)) if w)
        cmd = qemu.command_line(m.with_(append=append), binary=self.binary(built, topo), vcpu_clocks=self._ours)
        return Invocation(qemu.with_test_hooks(cmd),
                          qemu.clock_model(topo, spec.qemu_mode, spec.quantum_ns, stalls,
                                           vcpu_clocks=self._ours),
                          spec.quantum_ns if spec.qemu_mode == "icount" and self._ours else None,
                          self.label(built, topo))

    def run(self, inv: Invocation, console: Path, log: Path, boot_timeout: float, run_timeout: float,
            on_record=None, on_tick=None):
        return qemu.supervise(inv.cmd, console, log, boot_timeout, run_timeout, on_record=on_record, on_tick=on_tick)

    def vcpu_clocks(self, log: Path) -> list[tuple[int, int, int, int]]:
        return qemu.vcpu_clocks(log)

    def sched_counts(self, log: Path) -> dict[str, int]:
        return qemu.sched_counts(log)


class QemuSnapshots(Snapshots):
    """Our QEMU's boot once, run many (engine/snapshot.py) and its
    checkpoints and regions (engine/regions.py)."""
    state_file = snapshot.STATE
    disk_files = regions.DISKS

    def __init__(self, engine: QemuEngine):
        self.engine = engine

    def disks(self, topo) -> snapshot.Disks:
        return snapshot.disks_for(topo)

    def _machine(self, spec, topo, kernel, initrd, images, disk_model, plugin=None) -> Machine:
        swap, data, job = images
        return Machine(topo, kernel, initrd, quantum_ns=spec.quantum_ns, append=spec.kernel_append.strip(),
                       hmat=not spec.no_hmat, disk=disk_model, swap=swap, data=data, job=job, plugin=plugin)

    def key(self, spec, topo, built, kernel_sha256: str, disk_model) -> str:
        return snapshot.key(topo, kernel_sha256=kernel_sha256, initrd_sha256=_sha256(built.boot_userland),
                            engine_key=qemu_build.key(), quantum_ns=spec.quantum_ns,
                            append=spec.kernel_append.strip(), hmat=not spec.no_hmat, disk=disk_model)

    def take(self, cache: Path, k: str, spec, topo, built, disk_model, log=print) -> Path:
        d = snapshot.disks_for(topo)
        timeout_s = spec.boot_timeout or qemu.boot_timeout_s(topo, "icount")  # booted without the model
        boot = _boot_initrd(cache, built)

        def command(work: Path):
            images = (snapshot.sparse(work / "swap.img", d.swap_mib), snapshot.sparse(work / "data.img", d.data_mib),
                      snapshot.sparse(work / "job.img", d.job_mib))
            m = self._machine(spec, topo, built.kernel_dir / "kernel", boot, images, disk_model)
            return qemu.with_test_hooks(snapshot.machine_command(m, binary=self.engine.binary(built, topo)))
        return snapshot.take(cache, k, command, timeout_s, log)

    def problem(self, sdir: Path, k: str) -> str | None:
        return snapshot.check(sdir, k)

    def failed_dir(self, cache: Path, k: str) -> Path:
        return snapshot.failed_dir(cache, k)

    def job_image(self, path: Path, payload: bytes) -> None:
        snapshot.job_image(path, payload)

    def restore(self, spec, topo, built, cache: Path, sdir: Path, images, plugin, disk_model,
                stalls: bool) -> Invocation:
        m = self._machine(spec, topo, built.kernel_dir / "kernel", _boot_initrd(cache, built), images, disk_model,
                          plugin)
        cmd = snapshot.machine_command(m, binary=self.engine.binary(built, topo)) + snapshot.restore_args(sdir)
        return Invocation(qemu.with_test_hooks(cmd),
                          qemu.clock_model(topo, "icount", spec.quantum_ns, stalls) + ", restored from a snapshot",
                          spec.quantum_ns, self.engine.label(built, topo))

    def copy_disks(self, src: Path, dst: Path) -> None:
        regions.copy_disks(src, dst)

    def checkpoint(self, cmd: list[str], work: Path, ckpt: Path, timeout_s: float) -> dict:
        return regions.checkpoint(cmd, work, ckpt, timeout_s)

    def meta(self, cache: Path, k: str) -> dict:
        import json
        return json.loads((snapshot.directory(cache, k) / "meta.json").read_text())

    def region(self, cmd: list[str], work: Path, timeout_s: float) -> float:
        return regions.region(cmd, work, timeout_s)

    def stop_all(self, stop: bool = True) -> None:
        regions.STOP.set() if stop else regions.STOP.clear()


def _sha256(data: bytes) -> str:
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
