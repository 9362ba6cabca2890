"""Disk models (topologies/disks.toml): what a swap or data disk costs in
guest time. The engine passes them to our QEMU's virtio-blk (series patch
0005), which completes each request at its modelled time."""
from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from pathlib import Path

FILE = Path(__file__).resolve().parent / "disks.toml"
MAX_NS = 10**10          # 10 s per request: past that it is a typo
MAX_MBPS = 10**6

# The model of a topology that names none (no [disk] model: a machine written
# for a run, `--topology path/to/yours.toml`), by the era of its native ISA:
# the one every shipped machine of that ISA names. Alpha machines (the EV7
# GS1280 shapes, the ES clipper: 2003-2005) get the 2005 SCSI disk, every
# other (the x86 shapes: current Xeons) the current NVMe SSD. Without a model
# its disks would be host-timed and two runs of the same inputs would differ
# (a restored run reads its job from a disk); `--disk host` still asks for that.
DEFAULT_BY_NATIVE_ISA = {"alpha": "cheetah-15k4"}
DEFAULT = "ssd-980pro"


def default_for(native_isa: str) -> str:
    """The disk model of a topology without one (see DEFAULT_BY_NATIVE_ISA)."""
    return DEFAULT_BY_NATIVE_ISA.get(native_isa, DEFAULT)


class DiskError(ValueError):
    pass


@dataclass(frozen=True)
class Disk:
    name: str
    description: str
    read_ns: int
    write_ns: int
    mbps: int
    servers: int
    rotational: bool

    def label(self) -> str:
        return (f"{self.name}: {self.read_ns / 1000:g}/{self.write_ns / 1000:g} us read/write, "
                f"{self.mbps} MB/s, {self.servers} at once" + ("" if self.rotational else ", non-rotational"))


def _num(path, name, tab, key, lo, hi, integer=True):
    v = tab.get(key)
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and lo <= v <= hi \
        and (not integer or float(v).is_integer())
    if not ok:
        raise DiskError(f"{path}: field '{name}.{key}': expected {'a whole number' if integer else 'a number'} "
                        f"from {lo} to {hi}, got {v!r}")
    return int(v)


def load_all(path: Path = FILE) -> dict[str, Disk]:
    try:
        data = tomllib.loads(Path(path).read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise DiskError(f"{path}: {e}") from None
    out = {}
    for name, tab in data.items():
        if not isinstance(tab, dict):
            raise DiskError(f"{path}: field '{name}': expected a table [{name}]")
        unknown = set(tab) - {"description", "sources", "read_ns", "write_ns", "mbps", "servers", "rotational"}
        if unknown:
            raise DiskError(f"{path}: field '{name}.{sorted(unknown)[0]}': not a disk model field")
        if not tab.get("sources"):
            raise DiskError(f"{path}: field '{name}.sources': expected where the figures come from")
        if not isinstance(tab.get("rotational"), bool):
            raise DiskError(f"{path}: field '{name}.rotational': expected true or false (what the guest's block "
                            f"layer is told), got {tab.get('rotational')!r}")
        out[name] = Disk(name, str(tab.get("description", "")),
                         _num(path, name, tab, "read_ns", 0, MAX_NS), _num(path, name, tab, "write_ns", 0, MAX_NS),
                         _num(path, name, tab, "mbps", 1, MAX_MBPS), _num(path, name, tab, "servers", 1, 1024),
                         tab["rotational"])
    return out


def get(name: str, path: Path = FILE, where: str = "--disk") -> Disk:
    models = load_all(path)
    if name not in models:
        raise DiskError(f"{where}: expected one of {', '.join(sorted(models))} ({path}), got {name!r}")
    return models[name]


def claims(model: Disk | None, default_name: str, swap_dev: str, data_dev: str,
           restored: bool) -> tuple[list[str], list[str]]:
    """What a run's disks are, from what it had: (the disks it has whose
    requests complete in host time, for the engine's repeatability sentence;
    the disks' own limitation sentences). model: the disk model in effect,
    or None; default_name: its name when the topology named none; swap_dev,
    data_dev: the guest's (a /dev/ path, zram:MiB or ''); restored: the
    run reads its job from a third disk."""
    has = {"swap disk": swap_dev.startswith("/dev/"), "data disk": bool(data_dev),
           "job disk (a restored run reads its job from it)": restored}
    host = [] if model else [d for d, on in has.items() if on]
    out = []
    if data_dev and not model:
        out.append("data disk (ext2 on virtio-blk): its I/O completes in host time and its latency is not "
                   "modeled, so IO durations are TCG's, not a disk's")
    if model and any(has.values()):
        out.append((f"default disk model {default_name} (the topology names none; topologies/disks.py picks it "
                    "by the machine's native ISA); " if default_name else "")
                   + "disks complete at a modeled guest time (latency + bytes at the model's rate, FIFO per "
                   "server): no seek distance, caching or request reordering inside the disk")
    return host, out
