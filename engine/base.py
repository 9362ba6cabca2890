"""The engine seam: everything the run pipeline and sampling ask of an
engine (gem5's stdlib way: one abstract class per kind of part).

An `Engine` checks a run's engine options, says what it is and what it does
not model, starts a `Machine` (engine/machine.py) and supervises it to its
end, and reads back each vCPU's clock. Boot once, run many is a second
part, `Snapshots`, which an engine hands out for a run it can restore, or
says why the run must boot (`Engine.snapshots`): the pipeline asks, it
never probes an engine for attributes. Sampling (pipeline/sampled.py)
drives checkpoints and regions through `Snapshots` too.

QEMU (ours, or Debian's binary for comparison) is the only engine today
(engine/qemu_engine.py); a second one (a gem5 driver for a user's own
binary, `--gem5 PATH`) is one new class and an entry in engine.ENGINES.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass, field
from pathlib import Path

from engine.machine import Machine
from protocol import records


class SnapshotError(RuntimeError):
    """A snapshot or checkpoint that could not be taken or is not there any more."""


class RegionError(RuntimeError):
    """A checkpoint or region run that did not end at its stop."""


# How a guest that ended on its own failed: its experiment's exit status, or
# a kernel panic. From a restored snapshot the guest repeats exactly, so such
# a failure is the run's result, not chance (timeouts and a QEMU that died
# are the host's, and are run again).
EXIT_STATUS = "experiment exited with status"
PANIC_LINE = "Kernel panic - not syncing:"
GUEST_FAILURES = (EXIT_STATUS, PANIC_LINE)


def failed_in_guest(reason: str | None) -> bool:
    return bool(reason) and reason.startswith(GUEST_FAILURES)


@dataclass
class Outcome:
    """How a supervised guest ended."""
    status: str                      # ok / failed / aborted
    reason: str
    wall_s: float
    boot_wall_s: float | None
    engine_rc: int | None            # the engine process's exit code
    parsed: records.Parsed = field(default_factory=records.Parsed)


@dataclass
class Invocation:
    cmd: list[str]
    clock_model: str
    quantum_ns: int | None
    label: str               # engine and version, for the run row


class Snapshots(abc.ABC):
    """An engine's machine saved after boot and restored by runs, and
    checkpoints inside a run (sampling)."""
    state_file: str          # the saved machine's RAM and devices inside a checkpoint folder
    disk_files: tuple[str, ...]  # its disks, in the order a Machine takes them (swap, data, job)

    @abc.abstractmethod
    def disks(self, topo):
        """The fixed disk sizes a snapshot machine has (.swap_mib, .data_mib, .job_mib)."""

    @abc.abstractmethod
    def key(self, spec, topo, built, kernel_sha256: str, disk_model) -> str:
        """What the snapshot depends on, hashed."""

    @abc.abstractmethod
    def take(self, cache: Path, k: str, spec, topo, built, disk_model, log=print) -> Path:
        """The snapshot keyed k (a folder), taken now if the cache lacks it
        (or holds a broken one); SnapshotError if the boot never asked for it."""

    @abc.abstractmethod
    def problem(self, sdir: Path, k: str) -> str | None:
        """None if sdir still holds the snapshot keyed k, else what is wrong."""

    @abc.abstractmethod
    def failed_dir(self, cache: Path, k: str) -> Path:
        """Where the console of a boot that never reached its snapshot is kept."""

    @abc.abstractmethod
    def job_image(self, path: Path, payload: bytes) -> None:
        """Write the job (an initramfs archive) where a restored guest pulls it."""

    @abc.abstractmethod
    def restore(self, spec, topo, built, cache: Path, sdir: Path, images, plugin, disk_model,
                stalls: bool) -> Invocation:
        """The command that restores the snapshot (or a checkpoint) in sdir with these disk images."""

    # --- checkpoints and regions (sampling) ------------------------------------------------
    @abc.abstractmethod
    def copy_disks(self, src: Path, dst: Path) -> None:
        """A checkpoint's disks as they are now, for a machine restored from it."""

    @abc.abstractmethod
    def checkpoint(self, cmd: list[str], work: Path, ckpt: Path, timeout_s: float) -> dict:
        """Run cmd to its plugin's stop, save the machine in ckpt; its meta."""

    @abc.abstractmethod
    def meta(self, cache: Path, k: str) -> dict:
        """What the snapshot keyed k recorded when it was taken (vcpu_insns: each vCPU's instructions)."""

    @abc.abstractmethod
    def region(self, cmd: list[str], work: Path, timeout_s: float) -> float:
        """Run cmd (a region) to its plugin's stop; its wall time."""

    @abc.abstractmethod
    def stop_all(self, stop: bool = True) -> None:
        """Quit every machine waiting for its stop (Ctrl-C); stop=False: allow them again."""


class Engine(abc.ABC):
    """One engine. `spec` is a pipeline.spec.RunSpec, `topo` a loaded
    topology, `built` the build step's artifacts (kernel, initramfs,
    engine binary, plugin)."""
    name: str                # the --engine value
    kind: str                # the run row's `engine` column

    # --- input (prepare: before anything is built or written) ---------------------------
    @abc.abstractmethod
    def check(self, spec, with_plugin: bool) -> int:
        """Raise EngineError on engine options this engine cannot run (mode,
        quantum; with_plugin: the timing mode loads the plugin); return the
        quantum the run will use."""

    @abc.abstractmethod
    def snapshots(self, spec, topo, swap_mib: int = 0, data_mib: int = 0) -> tuple[Snapshots | None, str | None]:
        """(the engine's snapshots, None) if this run can start from the
        machine's snapshot after boot, else (None, why it boots). swap_mib,
        data_mib: the run's disks, which must fit the snapshot machine's."""

    @abc.abstractmethod
    def loads_plugin(self) -> bool:
        """Whether this engine can load the timing plugin (its API)."""

    @abc.abstractmethod
    def models_disks(self, spec) -> bool:
        """Whether a disk model can make this run's disks complete in guest time."""

    # --- what it is ----------------------------------------------------------------------
    @abc.abstractmethod
    def label(self, built, topo) -> str:
        """The engine and its version (patch series) for the run row."""

    @abc.abstractmethod
    def build_key(self) -> str:
        """What the engine's build is (a run key's part: a run on another build runs again)."""

    @abc.abstractmethod
    def timeouts(self, spec, topo, run_s: float, slowdown: float, boot_slowdown: float) -> tuple[float, float]:
        """(boot, run) wall-clock limits in seconds; run_s is the experiment's
        own limit without the timing plugin; slowdown, boot_slowdown: the
        timing mode's factors for the run and a boot."""

    @abc.abstractmethod
    def perturbation(self, seed: int, repeat: int) -> str:
        """The word that perturbs a repeat (Alameldeen and Wood): '' for repeat 0."""

    @abc.abstractmethod
    def cycle_ps(self, topo) -> int:
        """Guest time per cycle."""

    @abc.abstractmethod
    def limitations(self, spec, topo, *, core_charges: bool, host_disks: list[str], restored: bool,
                    model_start: str) -> list[str]:
        """What the engine does not model, as limitation sentences: how guest
        time is kept and whether the run repeats (host_disks: the disks it
        has that complete in host time), and for a restored run what the
        restore keeps (model_start: what the timing model starts with)."""

    # --- running and reading back --------------------------------------------------------
    @abc.abstractmethod
    def invocation(self, spec, topo, built, m: Machine, stalls: bool) -> Invocation:
        """The command that boots machine m and runs the job."""

    @abc.abstractmethod
    def run(self, inv: Invocation, console: Path, log: Path, boot_timeout: float, run_timeout: float,
            on_record=None, on_tick=None):
        """Start the guest and supervise it to its end (records streamed to
        on_record); an Outcome."""

    @abc.abstractmethod
    def vcpu_clocks(self, log: Path) -> list[tuple[int, int, int, int]]:
        """Per vCPU (cpu, instructions, stall ps, clock ps) at the end, [] if unknown."""

    @abc.abstractmethod
    def sched_counts(self, log: Path) -> dict[str, int]:
        """The engine's scheduling counters (slices, PAUSEs), {} if none."""
