"""What QEMU or the guest would refuse, checked by the parser (topologies/
parser.py) before any work that grows with the sizes a file states (the hop
matrix is all pairs of nodes), so a typo or an absurd figure is one line, not
a minute of CPU or an aborted QEMU. Each figure sits beside its source, apart
from the parser, so the limits read in one place."""
from __future__ import annotations

import functools
import os
import re
from pathlib import Path

from topologies.errors import TopologyError
from topologies.model import Topology, slit_distance

GUEST_ISAS = ("x86_64", "alpha")
# QEMU's Alpha machine (clipper, DP264) takes at most 4 CPUs (and
# images/kernel/alpha.config builds the guest with CONFIG_NR_CPUS=4).
ALPHA_MAX_CPUS = 4

X86_KERNEL_CONFIG = Path(__file__).resolve().parent.parent / "images" / "kernel" / "x86_64.config"


def _kconfig_int(path: Path, symbol: str, default: int) -> int:
    """CONFIG_<symbol> as the guest kernel's config fragment sets it; the
    fragment goes on top of allnoconfig (images/kernel.py), so an unset symbol
    keeps Linux 6.1's default (arch/x86/Kconfig), given here as `default`."""
    m = re.search(rf"^CONFIG_{symbol}=(\d+)\s*$", path.read_text(), re.M)
    return int(m.group(1)) if m else default


# The x86_64 guest kernel: CONFIG_NR_CPUS (Linux 6.1 arch/x86/Kconfig:
# NR_CPUS_DEFAULT is 64 with SMP); a CPU past it is ignored at boot ("APIC:
# NR_CPUS/possible_cpus limit of 64 reached"), so a node would lose its CPUs.
X86_NR_CPUS = _kconfig_int(X86_KERNEL_CONFIG, "NR_CPUS", 64)
# CONFIG_NODES_SHIFT (arch/x86/Kconfig: default 6 on X86_64); Linux keeps
# MAX_NUMNODES = 1 << NODES_SHIFT nodes (include/linux/numa.h) and folds the
# SRAT's further proximity domains away.
X86_NODES_SHIFT = _kconfig_int(X86_KERNEL_CONFIG, "NODES_SHIFT", 6)
X86_MAX_NUMNODES = 1 << X86_NODES_SHIFT
# QEMU 10.0.2, q35: hw/i386/pc_q35.c pc_q35_machine_options sets
# m->max_cpus = 4096 (query-machines: pc-q35-10.0 "cpu-max": 4096).
QEMU_Q35_MAX_CPUS = 4096
# QEMU 10.0.2 include/system/numa.h MAX_NODES ("-numa node,nodeid=128: Max
# number of NUMA nodes reached: 128").
QEMU_MAX_NODES = 128
# hw/intc/apic_common.c apic_common_set_id: an APIC ID of 255 or more needs
# x2APIC, which `-cpu qemu64` (engine/qemu.py) lacks; QEMU 10.0.2 aborts
# ("Unexpected error in apic_common_set_id() ... APIC ID 255 requires x2APIC").
QEMU_APIC_ID_LIMIT = 255
# include/system/numa.h NUMA_DISTANCE_MAX: the largest SLIT distance of a
# reachable node (255 means unreachable; -numa dist takes a uint8_t).
QEMU_NUMA_DISTANCE_MAX = 254
# hw/core/numa.c parse_numa_hmat_lb: each HMAT latency or bandwidth is stored
# as a multiple of one base and must stay below UINT16_MAX.
QEMU_HMAT_MAX_ENTRY = 65534
# Our QEMU's per-vCPU clocks (engine/qemu-patches/0002-icount-per-vcpu-clocks-and-their-scheduler.patch:
# "icount: cycle-ps must be 1..1000000"); engine/qemu.py cycle_ps gives it
# 1000 / clock_ghz, so the clock is 0.001 to 1000 GHz.
QEMU_MAX_CYCLE_PS = 1_000_000
MIN_CLOCK_GHZ, MAX_CLOCK_GHZ = 1000 / QEMU_MAX_CYCLE_PS, 1000.0
# Our QEMU's PAUSE cost (engine/qemu-patches/0003-x86-pause-costs-its-latency-and-keeps-the-slice.patch:
# "icount: pause-cycles must be 1..100000").
QEMU_MAX_PAUSE_CYCLES = 100_000
# CPU-less memory nodes (topologies/parser.py [[memory_nodes]], [[switches]]):
# field -> (lowest, highest, what). A CXL port, link and device controller
# add tens to a few hundred ns to a local access (Pond, ASPLOS 2023: 70-90
# ns; the MICRO 2023 study of three genuine devices: CXL-A 35 % over a
# remote socket, an FPGA device about 3x); past 1 us a figure is a typo. A
# link carries at most a PCIe 6.0 / CXL 3.x x16 port's 128 GB/s a
# direction, twice that allowed; a device's own memory at most 1 TB/s.
MEMORY_NODE_LIMITS = {
    "link_latency_ns": (1.0, 1000.0, "ns (round trip: what the link, its ports and the device's controller add "
                                     "to a local access)"),
    "link_bandwidth_gbps": (0.5, 256.0, "GB/s (the data a link carries a direction, its protocol's overhead "
                                        "off; PCIe 5.0 x8 is 32 GB/s raw, x16 64)"),
    "bandwidth_gbps": (0.5, 1024.0, "GB/s (the device's own memory, sustained)"),
}
X86_MAX_NODES = min(X86_MAX_NUMNODES, QEMU_MAX_NODES)
X86_MAX_CPUS = min(X86_NR_CPUS, QEMU_Q35_MAX_CPUS)
# A torus of at most X86_MAX_NODES nodes has at most log2 of that many
# dimensions of size 2 or more (more can only add dimensions of size 1).
MAX_TORUS_DIMS = X86_MAX_NODES.bit_length() - 1


@functools.lru_cache(maxsize=1)
def host_memory_mib() -> int:
    """The host's physical memory: every guest MiB is a MiB of host memory
    that QEMU allocates (memory-backend-ram) and the guest touches."""
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") >> 20


def max_apic_id(nodes: int, cpus_per_node: int) -> int:
    """The highest APIC ID QEMU gives with -smp sockets=nodes,cores=cpus_per_node,
    threads=1 (hw/i386/topology.h: the socket number above the bits that hold
    the core number, ceil(log2(cores)) of them)."""
    return ((nodes - 1) << (cpus_per_node - 1).bit_length()) | (cpus_per_node - 1)


def check_counts(path, guest_isa: str, count: int, cpn: int) -> None:
    """Nodes and CPUs within what the guest kernel and QEMU's machine take."""
    cpus = count * cpn
    if guest_isa == "alpha":
        if count > 1:
            raise TopologyError(path, "nodes.count",
                                f"1 for an alpha guest (Linux removed Alpha NUMA in 5.14; NUMA shapes need "
                                f"guest_isa = \"x86_64\"), got {count}")
        if cpus > ALPHA_MAX_CPUS:
            raise TopologyError(path, "nodes.cpus_per_node",
                                f"at most {ALPHA_MAX_CPUS} CPUs for an alpha guest (QEMU's clipper machine takes at "
                                f"most {ALPHA_MAX_CPUS}; use guest_isa = \"x86_64\" for more), got {cpus}")
        return
    if count > X86_MAX_NODES:
        raise TopologyError(path, "nodes.count",
                            f"at most {X86_MAX_NODES} nodes for an x86_64 guest (the guest kernel's MAX_NUMNODES = "
                            f"1 << CONFIG_NODES_SHIFT = {X86_MAX_NUMNODES}, images/kernel/x86_64.config; QEMU takes "
                            f"{QEMU_MAX_NODES}), got {count}")
    if cpus > X86_MAX_CPUS:
        raise TopologyError(path, "nodes.cpus_per_node",
                            f"at most {X86_MAX_CPUS} CPUs in all (nodes.count x nodes.cpus_per_node) for an x86_64 "
                            f"guest (the guest kernel's CONFIG_NR_CPUS = {X86_NR_CPUS}, images/kernel/x86_64.config, "
                            f"ignores the rest; QEMU's q35 takes {QEMU_Q35_MAX_CPUS}), got {count} x {cpn} = {cpus}")
    if max_apic_id(count, cpn) >= QEMU_APIC_ID_LIMIT:
        raise TopologyError(path, "nodes.cpus_per_node",
                            f"APIC IDs below {QEMU_APIC_ID_LIMIT} (one socket per node, ceil(log2(cpus_per_node)) "
                            f"bits for the core: QEMU aborts on a higher one without x2APIC, which -cpu qemu64 "
                            f"lacks), got {max_apic_id(count, cpn)} for {count} x {cpn}")


def numa_extremes(count: int, max_hops: int, local: float, hop: float, mbw: float,
                  lbw: float) -> tuple[float, float, set[int]]:
    """What engine/qemu.py numa_args will give QEMU, from a topology file's
    figures before a Topology exists (check_distances checks these): the
    farthest node's SLIT distance and HMAT latency in ns, both before
    rounding, and the HMAT bandwidths in whole MB/s."""
    far = local + max_hops * hop
    gbps = {mbw} | ({min(mbw, lbw)} if count > 1 else set())
    return slit_distance(local, far), far, {round(g * 1000) if g * 1000 < 1 << 64 else 1 << 64 for g in gbps}


def check_distances(path, guest_isa: str, count: int, max_hops: int, local: float, hop: float,
                    mbw: float, lbw: float) -> None:
    """SLIT and HMAT values QEMU can encode (engine/qemu.py numa_args: SLIT
    10 x the latency ratio, HMAT latency in whole ns, bandwidth in whole MB/s)."""
    slit, far, values = numa_extremes(count, max_hops, local, hop, mbw, lbw)
    # Compared before rounding (round(x) > n for x > n + 0.5, ties to even):
    # round() of an overflowed float would raise instead of refusing.
    if count > 1 and slit > QEMU_NUMA_DISTANCE_MAX + 0.5:
        raise TopologyError(path, "interconnect.hop_latency_ns",
                            f"a farthest node ({max_hops} hops) at most {QEMU_NUMA_DISTANCE_MAX / 10:g} x the local "
                            f"latency (its SLIT distance, 10 x the ratio, must be <= {QEMU_NUMA_DISTANCE_MAX}, QEMU's "
                            f"NUMA_DISTANCE_MAX), got {local:g} + {max_hops} x {hop:g} ns = {far / local:.3g} x local")
    if guest_isa != "x86_64":
        return  # only the x86_64 command line has -numa hmat-lb
    if far > QEMU_HMAT_MAX_ENTRY + 0.5:
        raise TopologyError(path, "memory.local_latency_ns",
                            f"latencies up to {QEMU_HMAT_MAX_ENTRY} ns (QEMU's HMAT stores them as 16-bit multiples "
                            f"of a base that can be 1 ns), got {far:g} ns for the farthest node")
    bitmap = 0
    for v in values:
        bitmap |= v << 20  # "-numa hmat-lb,...,bandwidth=<v>M": bytes per second
    if bitmap:
        first, last = (bitmap & -bitmap).bit_length() - 1, bitmap.bit_length()
        if last > 64 or last - first > 16 or max(values) << 20 >> first > QEMU_HMAT_MAX_ENTRY:
            field_ = "memory.bandwidth_gbps" if len(values) == 1 else "interconnect.link_bandwidth_gbps"
            raise TopologyError(path, field_,
                                f"bandwidths QEMU's HMAT can encode: in MB/s, each at most {QEMU_HMAT_MAX_ENTRY} times "
                                f"the largest power of two dividing all of them (hw/core/numa.c), got "
                                f"{' and '.join(str(v) for v in sorted(values))} MB/s")


def check_memory_nodes(topo: Topology) -> None:
    """What QEMU can encode once CPU-less memory nodes are in (the CPU
    nodes' part is check_distances'): every node's SLIT distance, and the
    HMAT latency and bandwidth of every initiator (a CPU node) and target;
    an error names the memory node (or switch) whose figure is out of reach."""
    def field(j: int, name: str) -> str:
        return f"memory_nodes[{j - topo.cpu_nodes}].{name}"
    local = topo.local_latency_ns
    for i in range(topo.nodes):
        for j in range(topo.cpu_nodes, topo.nodes):
            for a, b in ((i, j), (j, i)):
                lat = topo.latency_ns(a, b)
                if slit_distance(local, lat) > QEMU_NUMA_DISTANCE_MAX + 0.5:
                    raise TopologyError(topo.path, field(j, "link_latency_ns"),
                                        f"a memory node at most {QEMU_NUMA_DISTANCE_MAX / 10:g} x the local latency "
                                        f"from every node (its SLIT distance, 10 x the ratio, must be <= "
                                        f"{QEMU_NUMA_DISTANCE_MAX}, QEMU's NUMA_DISTANCE_MAX), got {lat:g} ns from "
                                        f"node {a} to node {b} = {lat / local:.3g} x local")
                if a < topo.cpu_nodes and lat > QEMU_HMAT_MAX_ENTRY + 0.5:
                    raise TopologyError(topo.path, field(j, "link_latency_ns"),
                                        f"latencies up to {QEMU_HMAT_MAX_ENTRY} ns (QEMU's HMAT stores them as "
                                        f"16-bit multiples of a base that can be 1 ns), got {lat:g} ns")
    values = {round(topo.bandwidth_gbps(i, j) * 1000): j for i in range(topo.cpu_nodes) for j in range(topo.nodes)}
    bitmap = 0
    for v in values:
        bitmap |= v << 20
    first, last = (bitmap & -bitmap).bit_length() - 1, bitmap.bit_length()
    if last > 64 or last - first > 16 or max(values) << 20 >> first > QEMU_HMAT_MAX_ENTRY:
        worst = min(values)
        j = values[worst]
        raise TopologyError(topo.path, field(j, "bandwidth_gbps") if j >= topo.cpu_nodes else "memory.bandwidth_gbps",
                            f"bandwidths QEMU's HMAT can encode together: in MB/s, each at most "
                            f"{QEMU_HMAT_MAX_ENTRY} times the largest power of two dividing all of them "
                            f"(hw/core/numa.c), got {' and '.join(str(v) for v in sorted(values))} MB/s")


def check_host(topo: Topology) -> None:
    """Guest memory within the host's physical memory: QEMU backs every guest
    MiB with a host MiB. Not part of parse(): a stored run's topology must
    still read back on a smaller host."""
    host = host_memory_mib()
    if topo.total_memory_mib > host and topo.memory_nodes:
        raise TopologyError(topo.path, "nodes.memory_mib",
                            f"guest memory within this host's physical memory, {host} MiB (QEMU backs every guest "
                            f"MiB with host memory): nodes.count x nodes.memory_mib + the memory nodes' memory_mib, "
                            f"got {topo.cpu_nodes} x {topo.memory_mib} + "
                            f"{' + '.join(str(m.memory_mib) for m in topo.memory_nodes)} = {topo.total_memory_mib} MiB")
    if topo.total_memory_mib > host:
        raise TopologyError(topo.path, "nodes.memory_mib",
                            f"at most {host // topo.nodes} MiB per node: nodes.count x nodes.memory_mib must fit this "
                            f"host's physical memory, {host} MiB (QEMU backs every guest MiB with host memory), got "
                            f"{topo.nodes} x {topo.memory_mib} = {topo.total_memory_mib} MiB")
