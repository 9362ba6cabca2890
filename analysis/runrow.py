"""The `runs` row as two typed records: what is known when the guest starts
(RunStart, written with status `running`) and what the end adds (RunEnd).
Field names are the table's columns; tests/test_db.py checks they exist."""
from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class RunStart:
    started_at: str
    host: str
    vmlab_version: str
    # the machine (topologies/): the file as parsed, and its shape
    topology: str
    topology_sha256: str
    topology_toml: str
    topology_shape: str
    nodes: int
    cpus: int
    memory_mib_per_node: int
    scale: float
    native_isa: str
    guest_isa: str
    # the workload (experiments/): every parameter, derived sizes and the command
    experiment: str
    params_json: str
    seed: int
    # the kernel (images/)
    kernel_arch: str
    kernel_release: str
    kernel_source: str
    patch_set: str
    kernel_flavor: str
    kernel_config_sha256: str
    kernel_sha256: str
    initramfs_sha256: str
    # the engine (engine/) and how guest time was kept
    engine: str
    engine_version: str
    qemu_mode: str
    timing_mode: str
    clock_model: str
    quantum_ns: int | None
    disk_model: str | None
    timing_plugin: str | None
    command_line: str
    log_path: str
    limitations: str
    # what defines the run, hashed (pipeline/spec.py): a study skips a key already `ok`
    run_key: str | None = None
    # booted, or restored from the snapshot with this key (engine/snapshot.py)
    start: str = "booted"
    snapshot_key: str | None = None

    def columns(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class RunEnd:
    status: str                 # ok / failed / aborted
    reason: str | None
    ended_at: str
    wall_s: float | None
    boot_wall_s: float | None
    log_sha256: str | None
    qemu_maxrss_kib: int | None

    def columns(self) -> dict:
        return asdict(self)
