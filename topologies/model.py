"""A validated machine (the parser, topologies/parser.py, builds it) and what
a run derives from its shape: CPUs and memory in all, latencies between
nodes, the SLIT distances and bandwidths the guest is shown.

Nodes 0..cpu_nodes-1 have CPUs (a socket, or a torus node); CPU-less memory
nodes (CXL memory expanders: `[[memory_nodes]]`) follow them, each attached
to a socket or to a switch shared by sockets over a link of its own latency
and bandwidth. A machine without them derives every figure as before."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from topologies import core as core_mod, tlb as tlb_mod


def slit_distance(local_ns: float, latency_ns: float) -> float:
    """A node's ACPI SLIT distance before rounding: 10 x its latency ratio (10 is local)."""
    return 10.0 * latency_ns / local_ns


@dataclass(frozen=True)
class MemoryNode:
    """A CPU-less memory node (a CXL Type 3 memory expander). attach: the
    CPU node whose port it hangs off, or a switch's name. link_latency_ns:
    what its port, link and device controller add to a load-to-use beyond a
    local DRAM access (round trip, as hop_latency_ns); link_bandwidth_gbps:
    the data its link carries a direction (the link protocol's overhead
    already off: the timing model adds no header to it, as it does to the
    interconnect's raw link rate); bandwidth_gbps: its own memory's (the
    device's controller and DRAM)."""
    attach: int | str
    memory_mib: int
    real_memory_gib: float
    link_latency_ns: float
    link_bandwidth_gbps: float
    bandwidth_gbps: float


@dataclass(frozen=True)
class Switch:
    """A memory switch (CXL 2.0) shared by the sockets in `attach`: each
    socket reaches it over a port of link_latency_ns (round trip, the
    switch's hop included) and link_bandwidth_gbps; memory nodes attached
    to it hang off its downstream ports."""
    name: str
    attach: tuple[int, ...]
    link_latency_ns: float
    link_bandwidth_gbps: float


@dataclass(frozen=True)
class Cache:
    name: str
    size_kib: int
    ways: int
    line_bytes: int
    latency_cycles: int


@dataclass
class Topology:
    name: str
    path: Path
    text: str
    description: str
    native_isa: str
    guest_isa: str
    nodes: int
    cpus_per_node: int
    memory_mib: int          # per node, at the simulated scale
    real_memory_gib: float   # per node, on the machine being modelled
    kind: str                # "torus" or "sockets"
    dims: tuple[int, ...]    # torus only
    links: tuple[tuple[int, int], ...]  # sockets only
    local_latency_ns: float
    hop_latency_ns: float    # added load-to-use latency per hop (request + reply)
    memory_bandwidth_gbps: float
    link_bandwidth_gbps: float
    clock_ghz: float
    caches: tuple[Cache, ...]
    sources: tuple[str, ...]
    notes: str = ""
    hops: list[list[int]] = field(default_factory=list)
    disk: str = ""           # a model in topologies/disks.toml for swap and data disks
    disk_default: bool = False  # the file names none: `disk` is disks.default_for(native_isa)
    # Guest cycles a spin-wait hint (x86 PAUSE) takes: every kernel spin loop
    # runs one per turn, so it sets how fast a waiter spins. 1 = an ordinary
    # instruction (a CPU without such a hint, as the Alpha EV7).
    pause_cycles: int = 1
    # The core's miss parallelism, store buffer and streamer (topologies/core.py).
    core: core_mod.Core = None
    # TLBs, paging-structure caches and walkers (topologies/tlb.py).
    tlb: tlb_mod.Tlb = None
    # [caches.l3] c2c_latency_ns: a line moved between two L2s of one socket through its L3
    socket_c2c_ns: float = 0.0
    # CPU-less memory nodes, numbered cpu_nodes.. (nodes counts them too), and the switches they may hang off
    memory_nodes: tuple[MemoryNode, ...] = ()
    switches: tuple[Switch, ...] = ()
    cpu_nodes: int = 0       # nodes with CPUs (0: all of them, a machine without memory nodes)

    def __post_init__(self):
        if not self.cpu_nodes:
            self.cpu_nodes = self.nodes - len(self.memory_nodes)

    # --- derived -----------------------------------------------------------
    @property
    def cycle_ps(self) -> int:
        """One cycle of the clock in whole ps, rounded half to even: the one
        figure the engine's per-vCPU clock (engine/qemu.py) and the timing
        model (its config's cycle_ps) both use, so they agree by construction."""
        return max(1, round(1000.0 / self.clock_ghz))

    @property
    def cpus(self) -> int:
        return self.cpu_nodes * self.cpus_per_node

    @property
    def total_memory_mib(self) -> int:
        return self.cpu_nodes * self.memory_mib + sum(m.memory_mib for m in self.memory_nodes)

    def node_memory_mib(self, node: int) -> int:
        """A node's memory at the simulated scale (a CPU node's is memory_mib)."""
        return self.memory_mib if node < self.cpu_nodes else self.memory_nodes[node - self.cpu_nodes].memory_mib

    def memory_node(self, node: int) -> MemoryNode | None:
        return self.memory_nodes[node - self.cpu_nodes] if node >= self.cpu_nodes else None

    def initiator(self, node: int) -> int:
        """The node whose CPUs are nearest (the HMAT's attached initiator):
        itself for a CPU node, the socket a memory node hangs off (the lowest
        numbered of a shared switch's)."""
        m = self.memory_node(node)
        if m is None:
            return node
        if isinstance(m.attach, int):
            return m.attach
        return min(next(s for s in self.switches if s.name == m.attach).attach)

    @property
    def scale(self) -> float:
        """Simulated memory / real memory, per node."""
        return self.memory_mib / (self.real_memory_gib * 1024.0)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    def node_cpus(self, node: int) -> list[int]:
        """The node's CPUs; none for a memory node."""
        if node >= self.cpu_nodes:
            return []
        c = self.cpus_per_node
        return list(range(node * c, node * c + c))

    def shape(self) -> str:
        if self.memory_nodes:
            k = len(self.memory_nodes)
            cpu = ("x".join(map(str, self.dims)) + " torus" if self.kind == "torus" and self.cpu_nodes > 1
                   else f"{self.cpu_nodes} socket{'s' if self.cpu_nodes > 1 else ''}, {len(self.links)} links")
            sw = f", {len(self.switches)} switch{'es' if len(self.switches) > 1 else ''}" if self.switches else ""
            return f"{cpu}, {k} CPU-less memory node{'s' if k > 1 else ''}{sw}"
        if self.nodes == 1:
            return "1 node, no links"
        if self.kind == "torus":
            return "x".join(map(str, self.dims)) + " torus"
        return f"{self.nodes} sockets, {len(self.links)} links"

    def limitations(self) -> list[str]:
        """What the machine as run is not (the run row's limitations)."""
        out = [f"memory scaled: {self.memory_mib} MiB per node stands for {self.real_memory_gib:g} GiB "
               f"(scale 1/{round(1 / self.scale)})"]
        if self.guest_isa != self.native_isa:
            out.append(f"guest ISA {self.guest_isa} substituted for the machine's {self.native_isa}")
        if self.guest_isa == "alpha":
            out.append("Alpha guest (native ISA, QEMU clipper): no NUMA (Linux removed Alpha NUMA in 5.14), "
                       "one node of at most 4 CPUs; no transparent huge pages; NUMA and THP knobs do not apply")
        if self.memory_nodes:
            out.append(f"{len(self.memory_nodes)} CPU-less memory node(s) (CXL memory expanders) as NUMA nodes the "
                       "firmware describes (SRAT, SLIT, HMAT), present at boot, their accesses priced by their "
                       "link's latency and bandwidth and their device's bandwidth; not modelled: CXL's flit "
                       "protocol, the device's own caching and read/write asymmetry, hot-plug")
        return out

    # --- paths: the links a message crosses between two nodes (topologies/routes.py) ----
    def vertex_path(self, src: int, dst: int) -> list[tuple[int, int]]:
        """The (from, to) vertices of each link crossed from src to dst:
        nodes, then switches numbered after them (routes.vertex_paths)."""
        if "_paths" not in self.__dict__:
            from topologies import routes
            self.__dict__["_paths"] = routes.vertex_paths(self)
        return self.__dict__["_paths"][(src, dst)]

    def link_figures(self, a: int, b: int) -> tuple[float, float]:
        """(round-trip latency ns, bandwidth GB/s) of the link between vertices a and b."""
        mem = [v for v in (a, b) if self.cpu_nodes <= v < self.nodes]
        if mem:  # a memory node's own link (to its socket or its switch)
            m = self.memory_nodes[mem[0] - self.cpu_nodes]
            return m.link_latency_ns, m.link_bandwidth_gbps
        if max(a, b) >= self.nodes:  # a socket's port to a switch
            sw = self.switches[max(a, b) - self.nodes]
            return sw.link_latency_ns, sw.link_bandwidth_gbps
        return self.hop_latency_ns, self.link_bandwidth_gbps

    def latency_ns(self, src: int, dst: int) -> float:
        if self.memory_nodes:
            return self.local_latency_ns + sum(self.link_figures(a, b)[0] for a, b in self.vertex_path(src, dst))
        return self.latency_at_hops(self.hops[src][dst])

    def latency_at_hops(self, hops: int) -> float:
        return self.local_latency_ns + hops * self.hop_latency_ns

    def slit(self) -> list[list[int]]:
        """ACPI SLIT: 10 on the diagonal, 10 x the latency ratio elsewhere.

        SLIT is a relative-latency table; deriving it from the same latencies
        the model uses keeps the guest's view and the model's in step.
        """
        n = self.nodes
        out = [[10] * n for _ in range(n)]
        for i in range(n):
            for j in range(n):
                if i != j:
                    v = round(slit_distance(self.local_latency_ns, self.latency_ns(i, j)))
                    out[i][j] = min(254, max(11, v))  # remote must read > local
        return out

    def node_bandwidth_gbps(self, node: int) -> float:
        """A node's own memory bandwidth (a memory node's: its device's)."""
        m = self.memory_node(node)
        return self.memory_bandwidth_gbps if m is None else m.bandwidth_gbps

    def bandwidth_gbps(self, src: int, dst: int) -> float:
        """Sustained bandwidth to a home node: the interconnect caps remote
        (every link on the way, a memory node's own)."""
        if self.memory_nodes:
            links = [self.link_figures(a, b)[1] for a, b in self.vertex_path(src, dst)]
            return min([self.node_bandwidth_gbps(dst), *links])
        if src == dst:
            return self.memory_bandwidth_gbps
        return min(self.memory_bandwidth_gbps, self.link_bandwidth_gbps)

    def max_hops(self) -> int:
        return max(max(r) for r in self.hops)

    def summary(self) -> dict:
        out = {
            "name": self.name, "shape": self.shape(), "nodes": self.nodes,
            "cpus": self.cpus, "cpus_per_node": self.cpus_per_node,
            "memory_mib_per_node": self.memory_mib, "scale": self.scale,
            "native_isa": self.native_isa, "guest_isa": self.guest_isa,
            "max_hops": self.max_hops(),
        }
        if self.memory_nodes:
            out["memory_nodes"] = [{"node": n, "attach": m.attach, "memory_mib": m.memory_mib,
                                    "latency_ns": self.latency_ns(self.initiator(n), n)}
                                   for n, m in enumerate(self.memory_nodes, self.cpu_nodes)]
        return out
