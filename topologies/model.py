"""A validated machine (the parser, topologies/parser.py, builds it) and what
a run derives from its shape: CPUs and memory in all, latencies between
nodes, the SLIT distances and bandwidths the guest is shown."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from topologies import core as core_mod, tlb as tlb_mod


def slit_distance(local_ns: float, latency_ns: float) -> float:
    """A node's ACPI SLIT distance before rounding: 10 x its latency ratio (10 is local)."""
    return 10.0 * latency_ns / local_ns


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

    # --- derived -----------------------------------------------------------
    @property
    def cycle_ps(self) -> int:
        """One cycle of the clock in whole ps, rounded half to even: the one
        figure the engine's per-vCPU clock (engine/qemu.py) and the timing
        model (its config's cycle_ps) both use, so they agree by construction."""
        return max(1, round(1000.0 / self.clock_ghz))

    @property
    def cpus(self) -> int:
        return self.nodes * self.cpus_per_node

    @property
    def total_memory_mib(self) -> int:
        return self.nodes * self.memory_mib

    @property
    def scale(self) -> float:
        """Simulated memory / real memory, per node."""
        return self.memory_mib / (self.real_memory_gib * 1024.0)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    def node_cpus(self, node: int) -> list[int]:
        c = self.cpus_per_node
        return list(range(node * c, node * c + c))

    def shape(self) -> str:
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
        return out

    def latency_ns(self, src: int, dst: int) -> float:
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

    def bandwidth_gbps(self, src: int, dst: int) -> float:
        """Sustained bandwidth to a home node: the interconnect caps remote."""
        if src == dst:
            return self.memory_bandwidth_gbps
        return min(self.memory_bandwidth_gbps, self.link_bandwidth_gbps)

    def max_hops(self) -> int:
        return max(max(r) for r in self.hops)

    def summary(self) -> dict:
        return {
            "name": self.name, "shape": self.shape(), "nodes": self.nodes,
            "cpus": self.cpus, "cpus_per_node": self.cpus_per_node,
            "memory_mib_per_node": self.memory_mib, "scale": self.scale,
            "native_isa": self.native_isa, "guest_isa": self.guest_isa,
            "max_hops": self.max_hops(),
        }
