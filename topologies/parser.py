"""Topology TOML -> Topology: every field read through one reader, so a
missing or mistyped figure is one line naming the file and the field, and the
limits (topologies/limits.py) checked before anything grows with the sizes."""
from __future__ import annotations

import functools
import math
import tomllib
from pathlib import Path

from topologies import core as core_mod, disks, tlb as tlb_mod
from topologies.errors import TopologyError
from topologies.limits import (
    GUEST_ISAS,
    MAX_CLOCK_GHZ,
    MAX_TORUS_DIMS,
    MEMORY_NODE_LIMITS,
    MIN_CLOCK_GHZ,
    QEMU_MAX_CYCLE_PS,
    QEMU_MAX_PAUSE_CYCLES,
    X86_MAX_NODES,
    check_counts,
    check_distances,
    check_memory_nodes,
)
from topologies.model import Cache, MemoryNode, Switch, Topology
from topologies.routes import socket_hops, torus_hops


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
    real = r.get("nodes.real_memory_gib", NUM, check=pos,
                 expected="a positive number (GiB per node on the real machine)")
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
                                f"dimensions whose product equals nodes.count = {count}, "
                                f"got {list(dims)} (= {math.prod(dims)})")
        hops = torus_hops(dims)
    else:
        raw = r.get("interconnect.links", list, expected="a list of [a, b] socket pairs")
        if len(raw) > count * (count - 1) // 2:
            raise TopologyError(path, "interconnect.links",
                                f"at most {count * (count - 1) // 2} links for {count} sockets (one per pair), "
                                f"got {len(raw)}")
        seen = []
        for k, link in enumerate(raw):
            if not (isinstance(link, list) and len(link) == 2
                    and all(isinstance(x, int) and not isinstance(x, bool) for x in link)
                    and all(0 <= x < count for x in link) and link[0] != link[1]):
                raise TopologyError(path, f"interconnect.links[{k}]",
                                    f"a pair of distinct socket numbers in 0..{count - 1}, got {_short(link)}")
            seen.append((min(link), max(link)))
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
        # only the x86 PAUSE is priced (patch 0003): elsewhere the field would do nothing
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
    # a shared L3 (timing model): how long a line takes from one core's L2 to another's in the socket
    sock_c2c = (r.get("caches.l3.c2c_latency_ns", NUM, check=pos, expected="a positive number of ns (a transfer "
                      "between two L2s of the socket, through the L3)") if "l3" in cache_tab else 0.0)
    sources = r.get("sources", list, check=lambda v: len(v) > 0 and all(isinstance(s, str) for s in v),
                    expected="a non-empty list of citations for the figures")
    disk = r.get("disk.model", str, required=False, default="", check=lambda v: v in _disk_names(),
                 expected=f"a disk model of topologies/disks.toml ({', '.join(_disk_names())})")
    switches = _switches(r, path, count)
    mem_nodes = _memory_nodes(r, path, guest_isa, count, switches, mem, float(real))
    topo = Topology(
        name=name, path=path, text=text, description=r.get("description", str, required=False, default=""),
        native_isa=native_isa, guest_isa=guest_isa, nodes=count + len(mem_nodes), cpus_per_node=cpn,
        memory_mib=mem, real_memory_gib=float(real), kind=kind, dims=dims, links=links,
        local_latency_ns=float(local), hop_latency_ns=float(hop), memory_bandwidth_gbps=float(mbw),
        link_bandwidth_gbps=float(lbw), clock_ghz=float(clock), caches=tuple(caches),
        sources=tuple(sources), notes=r.get("notes", str, required=False, default=""), hops=hops,
        disk=disk or disks.default_for(native_isa), disk_default=not disk,
        pause_cycles=int(pause), core=core_mod.parse(r, path, native_isa, TopologyError),
        tlb=tlb_mod.parse(r, path, native_isa, TopologyError), socket_c2c_ns=float(sock_c2c),
        memory_nodes=mem_nodes, switches=switches, cpu_nodes=count)
    if mem_nodes:  # the hop matrix over every node: a memory node's own link (and its switch's port) count
        topo.hops = [[len(topo.vertex_path(i, j)) for j in range(topo.nodes)] for i in range(topo.nodes)]
        check_memory_nodes(topo)
    return topo


def _within(r, field_: str, limit: str) -> float:
    """A figure within MEMORY_NODE_LIMITS[limit]."""
    lo, hi, what = MEMORY_NODE_LIMITS[limit]
    return float(r.get(field_, NUM, check=lambda v: lo <= v <= hi, expected=f"{lo:g} to {hi:g} {what}"))


def _figures(r, base: str) -> tuple[float, float]:
    """A link's round-trip latency and bandwidth."""
    return (_within(r, f"{base}.link_latency_ns", "link_latency_ns"),
            _within(r, f"{base}.link_bandwidth_gbps", "link_bandwidth_gbps"))


def _switches(r, path, count: int) -> tuple[Switch, ...]:
    """[[switches]]: memory switches shared by sockets (optional)."""
    raw = r.get("switches", list, required=False, default=[], expected="a list of [[switches]] tables")
    out, names = [], set()
    for k, sw in enumerate(raw):
        base = f"switches[{k}]"
        if not isinstance(sw, dict):
            raise TopologyError(path, base, f"a table (name, attach, link_latency_ns, link_bandwidth_gbps), "
                                            f"got {_short(sw)}")
        sr = _Reader(path, {base: sw})
        name = sr.get(f"{base}.name", str, check=lambda v: v.isidentifier() and v not in names,
                      expected="a name of its own (letters, digits, _), not used by another switch")
        names.add(name)
        att = sr.get(f"{base}.attach", list, check=lambda v: len(v) > 0 and len(set(map(repr, v))) == len(v) and all(
                         isinstance(x, int) and not isinstance(x, bool) and 0 <= x < count for x in v),
                     expected=f"a list of distinct CPU node numbers in 0..{count - 1} (the sockets sharing it)")
        out.append(Switch(name, tuple(att), *_figures(sr, base)))
    return tuple(out)


def _memory_nodes(r, path, guest_isa: str, count: int, switches, mib_cpu: int,
                  real_cpu: float) -> tuple[MemoryNode, ...]:
    """[[memory_nodes]]: CPU-less memory nodes (optional), numbered after the
    CPU nodes, at the CPU nodes' memory scale (within 1 %)."""
    scale = mib_cpu / (real_cpu * 1024.0)
    raw = r.get("memory_nodes", list, required=False, default=[], expected="a list of [[memory_nodes]] tables")
    if raw and guest_isa != "x86_64":
        raise TopologyError(path, "memory_nodes",
                            f"no CPU-less memory nodes on an {guest_isa} guest (QEMU's clipper has one memory and "
                            f"no NUMA tables, and Linux removed Alpha NUMA in 5.14: the guest could not see the "
                            f"node), got {len(raw)}")
    if count + len(raw) > X86_MAX_NODES:
        raise TopologyError(path, "memory_nodes",
                            f"at most {X86_MAX_NODES - count} memory nodes beside {count} CPU nodes (at most "
                            f"{X86_MAX_NODES} nodes in all, the guest kernel's MAX_NUMNODES and QEMU's), got "
                            f"{len(raw)}")
    names = {s.name for s in switches}
    out = []
    for k, node in enumerate(raw):
        base = f"memory_nodes[{k}]"
        if not isinstance(node, dict):
            raise TopologyError(path, base, f"a table (attach, memory_mib, real_memory_gib, link_latency_ns, "
                                            f"link_bandwidth_gbps, bandwidth_gbps), got {_short(node)}")
        mr = _Reader(path, {base: node})
        where = f"a CPU node number in 0..{count - 1}" + (f" or a switch ({', '.join(sorted(names))})"
                                                          if names else "")
        attach = mr.get(f"{base}.attach", (int, str), expected=f"{where}: the socket (or switch) it hangs off",
                        check=lambda v: (v in names) if isinstance(v, str) else 0 <= v < count)
        mib = mr.get(f"{base}.memory_mib", int, check=lambda v: v >= 16,
                     expected="an integer >= 16 (MiB at the simulated scale)")
        real = mr.get(f"{base}.real_memory_gib", NUM, check=lambda v: v > 0,
                      expected="a positive number (GiB on the real machine)")
        if abs(mib / (real * 1024.0) - scale) > 0.01 * scale:
            raise TopologyError(path, f"{base}.memory_mib",
                                f"the machine's scale, {mib_cpu} MiB for {real_cpu:g} GiB (scale 1/{1 / scale:g}): "
                                f"{real * 1024.0 * scale:g} MiB for {real:g} GiB, so capacities keep their ratio, "
                                f"got {mib} MiB (scale 1/{real * 1024.0 / mib:g})")
        lat, lbw = _figures(mr, base)
        bw = _within(mr, f"{base}.bandwidth_gbps", "bandwidth_gbps")
        out.append(MemoryNode(attach, mib, float(real), lat, lbw, bw))
    for k, sw in enumerate(switches):
        if not any(m.attach == sw.name for m in out):
            raise TopologyError(path, f"switches[{k}]", f"a memory node attached to switch {sw.name!r} "
                                                        "(memory_nodes[].attach), got none")
    return tuple(out)


@functools.lru_cache(maxsize=1)  # every topology load checks against it; the file is read once
def _disk_names() -> tuple[str, ...]:
    from topologies import disks
    return tuple(sorted(disks.load_all()))
