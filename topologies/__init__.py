"""Machine stage: topology TOML files -> validated Topology objects.

Everything a run derives from the machine's shape (hop matrix, SLIT distances,
HMAT latency and bandwidth) is computed by this package from the few figures
a file states, so a typo cannot make the guest see one machine and the model
another.

One module each, lowest first (each imports only modules above it):
- errors.py: TopologyError, one line per bad field (a leaf, so none of the
  others needs the package to raise it)
- core.py, disks.py: the [core] table and the disk models (disks.toml)
- routes.py: hop matrices and the links a message crosses
- model.py: the Topology and Cache dataclasses and what derives from them
- limits.py: what QEMU, the guest kernel and this host can take
- parser.py: a TOML file's text -> a checked Topology
This file finds a topology by name and re-exports the names callers use as
topologies.X.
"""
from __future__ import annotations

from pathlib import Path

from topologies.errors import TopologyError
from topologies.limits import (  # noqa: F401  (re-exported)
    ALPHA_MAX_CPUS,
    GUEST_ISAS,
    MAX_CLOCK_GHZ,
    MAX_TORUS_DIMS,
    MEMORY_NODE_LIMITS,
    MIN_CLOCK_GHZ,
    QEMU_APIC_ID_LIMIT,
    QEMU_HMAT_MAX_ENTRY,
    QEMU_MAX_CYCLE_PS,
    QEMU_MAX_NODES,
    QEMU_MAX_PAUSE_CYCLES,
    QEMU_NUMA_DISTANCE_MAX,
    QEMU_Q35_MAX_CPUS,
    X86_KERNEL_CONFIG,
    X86_MAX_CPUS,
    X86_MAX_NODES,
    X86_MAX_NUMNODES,
    X86_NODES_SHIFT,
    X86_NR_CPUS,
    check_counts,
    check_distances,
    check_host,
    check_memory_nodes,
    host_memory_mib,
    max_apic_id,
    numa_extremes,
)
from topologies.model import Cache, MemoryNode, Switch, Topology, slit_distance  # noqa: F401  (re-exported)
from topologies.parser import NUM, parse, typ_name  # noqa: F401  (re-exported)
from topologies.routes import (  # noqa: F401  (re-exported)
    links_and_routes,
    socket_hops,
    torus_coords,
    torus_hops,
    vertex_paths,
)

HERE = Path(__file__).resolve().parent


def available() -> list[str]:
    return sorted(p.stem for p in HERE.glob("*.toml") if p.name != "disks.toml")


def resolve(name_or_path: str) -> Path:
    p = Path(name_or_path)
    if p.suffix == ".toml" or "/" in name_or_path:
        if not p.is_file():
            raise TopologyError(p, "(file)", "an existing topology TOML file")
        return p
    p = HERE / f"{name_or_path}.toml"
    if not p.is_file():
        raise TopologyError(name_or_path, "--topology",
                            f"one of {', '.join(available())} or a path to a .toml file")
    return p


def load(name_or_path: str) -> Topology:
    """A topology to run: parse() and what this host can hold."""
    path = resolve(name_or_path)
    topo = parse(path.read_text(), path)
    check_host(topo)
    return topo
