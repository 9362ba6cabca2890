"""Machine stage: topology TOML files -> validated Topology objects.

Everything a run derives from the machine's shape (hop matrix, SLIT distances,
HMAT latency and bandwidth) is computed here from the few figures a file
states, so a typo cannot make the guest see one machine and the model another.
"""
from __future__ import annotations

import functools

import hashlib
import math
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from topologies import core as core_mod
from topologies.errors import TopologyError
from topologies.routes import links_and_routes, socket_hops, torus_coords, torus_hops  # noqa: F401  (re-exported)

HERE = Path(__file__).resolve().parent
GUEST_ISAS = ("x86_64", "alpha")
# QEMU's Alpha machine (clipper, DP264) takes at most 4 CPUs (and
# images/kernel/alpha.config builds the guest with CONFIG_NR_CPUS=4).
ALPHA_MAX_CPUS = 4


# --- size limits ---------------------------------------------------------------
# What QEMU or the guest would refuse, checked before any work that grows with
# the sizes a file states (the hop matrix is all pairs of nodes), so a typo or
# an absurd figure is one line, not a minute of CPU or an aborted QEMU.
X86_KERNEL_CONFIG = HERE.parent / "images" / "kernel" / "x86_64.config"


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
# x2APIC, which `-cpu qemu64` (configs/qemu.py) lacks; QEMU 10.0.2 aborts
# ("Unexpected error in apic_common_set_id() ... APIC ID 255 requires x2APIC").
QEMU_APIC_ID_LIMIT = 255
# include/system/numa.h NUMA_DISTANCE_MAX: the largest SLIT distance of a
# reachable node (255 means unreachable; -numa dist takes a uint8_t).
QEMU_NUMA_DISTANCE_MAX = 254
# hw/core/numa.c parse_numa_hmat_lb: each HMAT latency or bandwidth is stored
# as a multiple of one base and must stay below UINT16_MAX.
QEMU_HMAT_MAX_ENTRY = 65534
# Our QEMU's per-vCPU clocks (configs/qemu-patches/0003-icount-per-vcpu-clock.patch:
# "icount: cycle-ps must be 1..1000000"); configs/qemu.py cycle_ps gives it
# 1000 / clock_ghz, so the clock is 0.001 to 1000 GHz.
QEMU_MAX_CYCLE_PS = 1_000_000
MIN_CLOCK_GHZ, MAX_CLOCK_GHZ = 1000 / QEMU_MAX_CYCLE_PS, 1000.0
# Our QEMU's PAUSE cost (configs/qemu-patches/0007-pause-costs-its-latency-and-keeps-the-slice.patch:
# "icount: pause-cycles must be 1..100000").
QEMU_MAX_PAUSE_CYCLES = 100_000
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
    # Guest cycles a spin-wait hint (x86 PAUSE) takes: every kernel spin loop
    # runs one per turn, so it sets how fast a waiter spins. 1 = an ordinary
    # instruction (a CPU without such a hint, as the Alpha EV7).
    pause_cycles: int = 1
    # The core's miss parallelism, store buffer and streamer (topologies/core.py).
    core: "core_mod.Core" = None

    # --- derived -----------------------------------------------------------
    @property
    def cycle_ps(self) -> int:
        """One cycle of the clock in whole ps, rounded half to even: the one
        figure the engine's per-vCPU clock (configs/qemu.py) and the timing
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

    def latency_ns(self, src: int, dst: int) -> float:
        return self.local_latency_ns + self.hops[src][dst] * self.hop_latency_ns

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


# --- loading and validation --------------------------------------------------
class _Reader:
    def __init__(self, path, data):
        self.path, self.data = path, data

    def get(self, dotted: str, typ, *, required=True, default=None, check=None, expected=""):
        cur = self.data
        for part in dotted.split("."):
            if not isinstance(cur, dict) or part not in cur:
                if required:
                    raise TopologyError(self.path, dotted, f"missing; expected {expected or typ_name(typ)}")
                return default
            cur = cur[part]
        ok = isinstance(cur, typ) and not (isinstance(cur, bool) and bool not in _as_tuple(typ))
        if not ok:
            raise TopologyError(self.path, dotted, f"expected {expected or typ_name(typ)}, got {_short(cur)}")
        if isinstance(cur, float) and not math.isfinite(cur):  # TOML has inf and nan
            raise TopologyError(self.path, dotted, f"expected a finite number, got {cur!r}")
        if check is not None and not check(cur):
            raise TopologyError(self.path, dotted, f"expected {expected}, got {_short(cur)}")
        return cur


def _short(v, limit: int = 80) -> str:
    """A value for a one-line error: a 10**7-element list is not one line."""
    if isinstance(v, (list, dict)) and len(v) > 8:
        return f"{type(v).__name__} of {len(v)} entries"
    text = repr(v)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _as_tuple(t):
    return t if isinstance(t, tuple) else (t,)


def typ_name(t) -> str:
    names = {int: "an integer", float: "a number", str: "a string", list: "a list", dict: "a table"}
    return " or ".join(names.get(x, x.__name__) for x in _as_tuple(t))


NUM = (int, float)


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


def slit_distance(local_ns: float, latency_ns: float) -> float:
    """A node's ACPI SLIT distance before rounding: 10 x its latency ratio (10 is local)."""
    return 10.0 * latency_ns / local_ns


def numa_extremes(count: int, max_hops: int, local: float, hop: float, mbw: float,
                  lbw: float) -> tuple[float, float, set[int]]:
    """What configs/qemu.py numa_args will give QEMU, from a topology file's
    figures before a Topology exists (check_distances checks these): the
    farthest node's SLIT distance and HMAT latency in ns, both before
    rounding, and the HMAT bandwidths in whole MB/s."""
    far = local + max_hops * hop
    gbps = {mbw} | ({min(mbw, lbw)} if count > 1 else set())
    return slit_distance(local, far), far, {round(g * 1000) if g * 1000 < 1 << 64 else 1 << 64 for g in gbps}


def check_distances(path, guest_isa: str, count: int, max_hops: int, local: float, hop: float,
                    mbw: float, lbw: float) -> None:
    """SLIT and HMAT values QEMU can encode (configs/qemu.py numa_args: SLIT
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


def check_host(topo: "Topology") -> None:
    """Guest memory within the host's physical memory: QEMU backs every guest
    MiB with a host MiB. Not part of parse(): a stored run's topology must
    still read back on a smaller host."""
    host = host_memory_mib()
    if topo.total_memory_mib > host:
        raise TopologyError(topo.path, "nodes.memory_mib",
                            f"at most {host // topo.nodes} MiB per node: nodes.count x nodes.memory_mib must fit this "
                            f"host's physical memory, {host} MiB (QEMU backs every guest MiB with host memory), got "
                            f"{topo.nodes} x {topo.memory_mib} = {topo.total_memory_mib} MiB")


def parse(text: str, path: Path) -> Topology:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise TopologyError(path, "(syntax)", f"valid TOML ({e})") from None
    r = _Reader(path, data)
    pos = lambda v: v > 0
    nonneg = lambda v: v >= 0
    name = r.get("name", str)
    guest_isa = r.get("guest_isa", str, check=lambda v: v in GUEST_ISAS, expected=" or ".join(GUEST_ISAS))
    count = r.get("nodes.count", int, check=pos, expected="a positive integer")
    cpn = r.get("nodes.cpus_per_node", int, check=pos, expected="a positive integer")
    check_counts(path, guest_isa, count, cpn)  # before anything grows with them
    mem = r.get("nodes.memory_mib", int, check=lambda v: v >= 16,
                expected="an integer >= 16 (MiB per node; Linux needs room for its own structures)")
    real = r.get("nodes.real_memory_gib", NUM, check=pos, expected="a positive number (GiB per node on the real machine)")
    native_isa = r.get("native_isa", str)
    kind = r.get("interconnect.kind", str, check=lambda v: v in ("torus", "sockets"), expected="'torus' or 'sockets'")
    dims: tuple[int, ...] = ()
    links: tuple[tuple[int, int], ...] = ()
    if kind == "torus":
        d = r.get("interconnect.dims", list, check=lambda v: 1 <= len(v) <= MAX_TORUS_DIMS and all(
                      isinstance(x, int) and not isinstance(x, bool) and 0 < x <= count for x in v),
                  expected=f"a list of 1 to {MAX_TORUS_DIMS} positive integers, each at most nodes.count = {count}, "
                           f"e.g. [4, 8]")
        dims = tuple(d)  # a few factors of at most `count` each: their product is cheap
        if math.prod(dims) != count:
            raise TopologyError(path, "interconnect.dims",
                                f"dimensions whose product equals nodes.count = {count}, got {list(dims)} (= {math.prod(dims)})")
        hops = torus_hops(dims)
    else:
        raw = r.get("interconnect.links", list, expected="a list of [a, b] socket pairs")
        if len(raw) > count * (count - 1) // 2:
            raise TopologyError(path, "interconnect.links",
                                f"at most {count * (count - 1) // 2} links for {count} sockets (one per pair), "
                                f"got {len(raw)}")
        seen = []
        for k, l in enumerate(raw):
            if not (isinstance(l, list) and len(l) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in l)
                    and all(0 <= x < count for x in l) and l[0] != l[1]):
                raise TopologyError(path, f"interconnect.links[{k}]",
                                    f"a pair of distinct socket numbers in 0..{count - 1}, got {_short(l)}")
            seen.append((min(l), max(l)))
        links = tuple(sorted(set(seen)))
        hops = socket_hops(count, links)
        for i, row in enumerate(hops):
            if -1 in row:
                raise TopologyError(path, "interconnect.links",
                                    f"links connecting every socket; socket {row.index(-1)} cannot reach socket {i}")
    local = r.get("memory.local_latency_ns", NUM, check=pos, expected="a positive number of ns")
    hop = r.get("interconnect.hop_latency_ns", NUM, check=nonneg, expected="a non-negative number of ns")
    mbw = r.get("memory.bandwidth_gbps", NUM, check=pos, expected="a positive number of GB/s")
    lbw = r.get("interconnect.link_bandwidth_gbps", NUM, check=pos, expected="a positive number of GB/s")
    check_distances(path, guest_isa, count, max(max(row) for row in hops), float(local), float(hop),
                    float(mbw), float(lbw))
    clock = r.get("cpu.clock_ghz", NUM, check=lambda v: MIN_CLOCK_GHZ <= v <= MAX_CLOCK_GHZ,
                  expected=f"{MIN_CLOCK_GHZ:g} to {MAX_CLOCK_GHZ:g} GHz (our QEMU's per-vCPU clock takes 1 to "
                           f"{QEMU_MAX_CYCLE_PS} ps per instruction)")
    pause = r.get("cpu.pause_cycles", int, required=False, default=1,
                  check=lambda v: 1 <= v <= QEMU_MAX_PAUSE_CYCLES,
                  expected=f"a whole number of cycles from 1 to {QEMU_MAX_PAUSE_CYCLES} (1: no spin-wait hint)")
    if guest_isa != "x86_64" and pause != 1:
        # only the x86 PAUSE is priced (patch 0007): elsewhere the field would do nothing
        raise TopologyError(path, "cpu.pause_cycles", f"1 on an {guest_isa} guest (its cpu_relax() has no PAUSE "
                                                      f"to price), got {pause}")
    caches = []
    cache_tab = r.get("caches", dict, expected="a table of caches, e.g. [caches.l1d]")
    for cname in cache_tab:
        base = f"caches.{cname}"
        size = r.get(f"{base}.size_kib", NUM, check=pos, expected="a positive size in KiB")
        ways = r.get(f"{base}.ways", int, check=pos, expected="a positive integer")
        line = r.get(f"{base}.line_bytes", int, check=lambda v: v > 0 and v & (v - 1) == 0, expected="a power of two")
        lat = r.get(f"{base}.latency_cycles", int, check=nonneg, expected="a non-negative integer")
        sets = size * 1024 / (ways * line)
        if sets != int(sets) or sets < 1:
            raise TopologyError(path, f"{base}.size_kib", f"a size that divides into {ways} ways of {line}-byte lines")
        caches.append(Cache(cname, size, ways, line, lat))
    sources = r.get("sources", list, check=lambda v: len(v) > 0 and all(isinstance(s, str) for s in v),
                    expected="a non-empty list of citations for the figures")
    return Topology(
        name=name, path=path, text=text, description=r.get("description", str, required=False, default=""),
        native_isa=native_isa, guest_isa=guest_isa, nodes=count, cpus_per_node=cpn,
        memory_mib=mem, real_memory_gib=float(real), kind=kind, dims=dims, links=links,
        local_latency_ns=float(local), hop_latency_ns=float(hop), memory_bandwidth_gbps=float(mbw),
        link_bandwidth_gbps=float(lbw), clock_ghz=float(clock), caches=tuple(caches),
        sources=tuple(sources), notes=r.get("notes", str, required=False, default=""), hops=hops,
        disk=r.get("disk.model", str, required=False, default="", check=lambda v: v in _disk_names(),
                   expected=f"a disk model of topologies/disks.toml ({', '.join(_disk_names())})"),
        pause_cycles=int(pause), core=core_mod.parse(r, path, native_isa, TopologyError))


@functools.lru_cache(maxsize=1)  # every topology load checks against it; the file is read once
def _disk_names() -> tuple[str, ...]:
    from topologies import disks
    return tuple(sorted(disks.load_all()))


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

