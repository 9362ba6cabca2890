"""The machine's interconnect: hop counts between nodes and the routes a
message takes, which directed links it crosses (dimension-order on the
torus, shortest paths between sockets). The timing model queues on these
links. The parser (topologies/parser.py) builds its hop matrices here and
topologies/__init__.py re-exports these functions; this module needs
nothing from either."""
from __future__ import annotations

import math
from collections import deque

from topologies.errors import TopologyError


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


def links_and_routes(topo) -> tuple[list[tuple[int, int]], dict[tuple[int, int], list[int]]]:
    """Directed links, and for every node pair the links a message crosses:
    dimension-order routing on the torus (first dimension first, the shorter
    way round, ties the positive way), shortest paths between sockets."""
    n = topo.nodes
    links: list[tuple[int, int]] = []
    index: dict[tuple[int, int], int] = {}

    def link(a, b):
        if (a, b) not in index:
            index[(a, b)] = len(links)
            links.append((a, b))
        return index[(a, b)]

    routes: dict[tuple[int, int], list[int]] = {}
    if topo.kind == "torus":
        dims = topo.dims

        def node_of(c):
            v = 0
            for x, d in zip(c, dims):
                v = v * d + x
            return v

        for a in range(n):
            for b in range(n):
                cur, dst = list(torus_coords(a, dims)), torus_coords(b, dims)
                path = []
                for k, d in enumerate(dims):
                    fwd = (dst[k] - cur[k]) % d
                    step = 1 if fwd <= d - fwd else -1
                    while cur[k] != dst[k]:
                        here = node_of(cur)
                        cur[k] = (cur[k] + step) % d
                        path.append(link(here, node_of(cur)))
                routes[(a, b)] = path
    else:
        adj = [[] for _ in range(n)]
        for a, b in topo.links:
            adj[a].append(b)
            adj[b].append(a)
        for s in range(n):
            prev = {s: None}
            q = deque([s])
            while q:
                u = q.popleft()
                for v in sorted(adj[u]):
                    if v not in prev:
                        prev[v] = u
                        q.append(v)
            for t in range(n):
                hops = []
                v = t
                while prev.get(v) is not None:
                    hops.append((prev[v], v))
                    v = prev[v]
                routes[(s, t)] = [link(a, b) for a, b in reversed(hops)]
    for (a, b), path in routes.items():
        if len(path) != topo.hops[a][b]:
            raise TopologyError(topo.path, "interconnect", f"route {a}->{b} has {len(path)} links, the hop "
                                f"matrix says {topo.hops[a][b]}")
    return links, routes


