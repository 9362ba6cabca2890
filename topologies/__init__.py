"""Machine stage: topology TOML files -> validated Topology objects.

Everything a run derives from the machine's shape (hop matrix, SLIT distances,
HMAT latency and bandwidth) is computed here from the few figures a file
states, so a typo cannot make the guest see one machine and the model another.
"""
from __future__ import annotations

import functools

import hashlib
import math
import tomllib
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
GUEST_ISAS = ("x86_64", "alpha")
# QEMU's Alpha machine (clipper, DP264) takes at most 4 CPUs.
ALPHA_MAX_CPUS = 4


class TopologyError(ValueError):
    """One line: which file, which field, what was expected."""

    def __init__(self, path, field_name: str, expected: str):
        self.path, self.field_name, self.expected = str(path), field_name, expected
        super().__init__(f"{path}: field '{field_name}': {expected}")


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

    # --- derived -----------------------------------------------------------
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
                    v = round(10.0 * self.latency_ns(i, j) / self.local_latency_ns)
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


# --- hop matrices ------------------------------------------------------------
def torus_coords(node: int, dims: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major coordinates: the last dimension varies fastest."""
    coords = []
    for d in reversed(dims):
        coords.append(node % d)
        node //= d
    return tuple(reversed(coords))


def torus_hops(dims: tuple[int, ...]) -> list[list[int]]:
    """Dimension-order routing with wrap-around: per dimension the shorter way."""
    n = math.prod(dims)
    coords = [torus_coords(i, dims) for i in range(n)]
    hops = [[0] * n for _ in range(n)]
    for i in range(n):
        for j in range(n):
            h = 0
            for a, b, d in zip(coords[i], coords[j], dims):
                delta = abs(a - b)
                h += min(delta, d - delta)
            hops[i][j] = h
    return hops


def socket_hops(n: int, links) -> list[list[int]]:
    """Shortest paths over socket links (BFS; every link is one hop)."""
    adj = [[] for _ in range(n)]
    for a, b in links:
        adj[a].append(b)
        adj[b].append(a)
    hops = []
    for s in range(n):
        dist = [-1] * n
        dist[s] = 0
        q = deque([s])
        while q:
            u = q.popleft()
            for v in adj[u]:
                if dist[v] < 0:
                    dist[v] = dist[u] + 1
                    q.append(v)
        hops.append(dist)
    return hops


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
            raise TopologyError(self.path, dotted, f"expected {expected or typ_name(typ)}, got {cur!r}")
        if check is not None and not check(cur):
            raise TopologyError(self.path, dotted, f"expected {expected}, got {cur!r}")
        return cur


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
    count = r.get("nodes.count", int, check=pos, expected="a positive integer")
    cpn = r.get("nodes.cpus_per_node", int, check=pos, expected="a positive integer")
    mem = r.get("nodes.memory_mib", int, check=lambda v: v >= 16,
                expected="an integer >= 16 (MiB per node; Linux needs room for its own structures)")
    real = r.get("nodes.real_memory_gib", NUM, check=pos, expected="a positive number (GiB per node on the real machine)")
    guest_isa = r.get("guest_isa", str, check=lambda v: v in GUEST_ISAS, expected=" or ".join(GUEST_ISAS))
    native_isa = r.get("native_isa", str)
    kind = r.get("interconnect.kind", str, check=lambda v: v in ("torus", "sockets"), expected="'torus' or 'sockets'")
    dims: tuple[int, ...] = ()
    links: tuple[tuple[int, int], ...] = ()
    if kind == "torus":
        d = r.get("interconnect.dims", list, check=lambda v: len(v) >= 1 and all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in v),
                  expected="a list of positive integers, e.g. [4, 8]")
        dims = tuple(d)
        if math.prod(dims) != count:
            raise TopologyError(path, "interconnect.dims",
                                f"dimensions whose product equals nodes.count = {count}, got {list(dims)} (= {math.prod(dims)})")
        hops = torus_hops(dims)
    else:
        raw = r.get("interconnect.links", list, expected="a list of [a, b] socket pairs")
        seen = []
        for k, l in enumerate(raw):
            if not (isinstance(l, list) and len(l) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in l)
                    and all(0 <= x < count for x in l) and l[0] != l[1]):
                raise TopologyError(path, f"interconnect.links[{k}]",
                                    f"a pair of distinct socket numbers in 0..{count - 1}, got {l!r}")
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
    clock = r.get("cpu.clock_ghz", NUM, check=pos, expected="a positive number of GHz")
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
    if guest_isa == "alpha" and count > 1:
        raise TopologyError(path, "nodes.count",
                            f"1 for an alpha guest (Linux removed Alpha NUMA in 5.14; NUMA shapes need "
                            f"guest_isa = \"x86_64\"), got {count}")
    if guest_isa == "alpha" and count * cpn > ALPHA_MAX_CPUS:
        raise TopologyError(path, "nodes.cpus_per_node",
                            f"at most {ALPHA_MAX_CPUS} CPUs for an alpha guest (QEMU's clipper machine takes at most "
                            f"{ALPHA_MAX_CPUS}; use guest_isa = \"x86_64\" for more), got {count * cpn}")
    return Topology(
        name=name, path=path, text=text, description=r.get("description", str, required=False, default=""),
        native_isa=native_isa, guest_isa=guest_isa, nodes=count, cpus_per_node=cpn,
        memory_mib=mem, real_memory_gib=float(real), kind=kind, dims=dims, links=links,
        local_latency_ns=float(local), hop_latency_ns=float(hop), memory_bandwidth_gbps=float(mbw),
        link_bandwidth_gbps=float(lbw), clock_ghz=float(clock), caches=tuple(caches),
        sources=tuple(sources), notes=r.get("notes", str, required=False, default=""), hops=hops,
        disk=r.get("disk.model", str, required=False, default="", check=lambda v: v in _disk_names(),
                   expected=f"a disk model of topologies/disks.toml ({', '.join(_disk_names())})"))


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
    path = resolve(name_or_path)
    return parse(path.read_text(), path)


from topologies.routes import links_and_routes  # noqa: E402,F401  (re-exported; needs the names above)
