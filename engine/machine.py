"""The machine an engine starts: everything its command line is made of,
as one object (the engine stage's input from the pipeline)."""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

QUANTUM_NS = 1000          # default interleaving quantum (guest ns)


@dataclass(frozen=True)
class Machine:
    """topo: the topology; kernel, initrd: what boots; qemu_mode: icount
    (per-vCPU clocks) or mttcg; quantum_ns: the interleaving quantum;
    append: kernel command-line words; hmat: the HMAT table; disk: a
    topologies.disks.Disk whose latencies the virtio-blk disks complete in,
    or None (host-timed); swap, data: the run's disk images; job: the job
    disk of the snapshot machine (engine/snapshot.py), whose presence also
    adds the vmlab-ctl port; plugin: (the timing plugin's .so, its config
    file), or None."""
    topo: object
    kernel: Path
    initrd: Path
    qemu_mode: str = "icount"
    quantum_ns: int = QUANTUM_NS
    append: str = ""
    hmat: bool = True
    disk: object | None = None
    swap: Path | None = None
    data: Path | None = None
    job: Path | None = None
    plugin: tuple[Path, Path] | None = None

    def with_(self, **kw) -> Machine:
        return replace(self, **kw)


def sparse(path: Path, mib: int) -> Path:
    """A disk image of mib MiB that costs host disk only as the guest writes."""
    with open(path, "wb") as f:
        f.truncate(mib << 20)
    return path
