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
    way round, ties the positive way), shortest paths between sockets; a
    memory node's routes go over its own link (and its switch's port), see
    vertex_paths. A link joins two vertices: nodes, or a switch (numbered
    after the nodes)."""
    n = topo.nodes
    links: list[tuple[int, int]] = []
    index: dict[tuple[int, int], int] = {}

    def link(a, b):
        if (a, b) not in index:
            index[(a, b)] = len(links)
            links.append((a, b))
        return index[(a, b)]

    routes = {(a, b): [link(u, v) for u, v in topo.vertex_path(a, b)] for a in range(n) for b in range(n)}
    return links, _checked(topo, routes)


def _checked(topo, routes):
    for (a, b), path in routes.items():
        if len(path) != topo.hops[a][b]:
            raise TopologyError(topo.path, "interconnect", f"route {a}->{b} has {len(path)} links, the hop "
                                f"matrix says {topo.hops[a][b]}")
    return routes


# --- CPU-less memory nodes ------------------------------------------------------
def _cpu_vertex_paths(kind, dims, n, links) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """Between the CPU nodes: the (from, to) nodes of each link crossed, as
    links_and_routes routes them (dimension order on the torus, BFS between
    sockets, the lowest-numbered neighbour first)."""
    out: dict[tuple[int, int], list[tuple[int, int]]] = {}
    if kind == "torus" and n > 1:
        def node_of(c):
            v = 0
            for x, d in zip(c, dims):
                v = v * d + x
            return v
        for a in range(n):
            for b in range(n):
                cur, dst, path = list(torus_coords(a, dims)), torus_coords(b, dims), []
                for k, d in enumerate(dims):
                    fwd = (dst[k] - cur[k]) % d
                    step = 1 if fwd <= d - fwd else -1
                    while cur[k] != dst[k]:
                        here = node_of(cur)
                        cur[k] = (cur[k] + step) % d
                        path.append((here, node_of(cur)))
                out[(a, b)] = path
        return out
    adj = [[] for _ in range(n)]
    for a, b in links:
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
            hops, v = [], t
            while prev.get(v) is not None:
                hops.append((prev[v], v))
                v = prev[v]
            out[(s, t)] = list(reversed(hops))
    return out


def vertex_paths(topo) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """For every pair of nodes, the (from, to) vertices of each link a
    message crosses. Vertices: the CPU nodes 0..c-1, the memory nodes
    c..nodes-1, the switches nodes.. in file order. Between CPU nodes, the
    interconnect's routes. A memory node is a leaf: it is reached over its
    own link from its socket, or from its switch, which a socket reaches
    over its own port; a switch never carries traffic between sockets. A
    memory node behind a switch shared by sockets is reached through the
    attached socket nearest the other end (lowest latency, then fewest
    links, then lowest number)."""
    c = topo.cpu_nodes
    cpu = _cpu_vertex_paths(topo.kind, topo.dims, c, topo.links)
    sw_id = {s.name: topo.nodes + i for i, s in enumerate(topo.switches)}
    lat = lambda path: sum(topo.link_figures(a, b)[0] for a, b in path)

    def down(m: int) -> list[tuple[int, list[tuple[int, int]]]]:
        """(attached socket, the links from it to memory node m), one per way in."""
        mn = topo.memory_nodes[m - c]
        if isinstance(mn.attach, int):
            return [(mn.attach, [(mn.attach, m)])]
        w = sw_id[mn.attach]
        return [(a, [(a, w), (w, m)]) for a in next(s for s in topo.switches if s.name == mn.attach).attach]

    def rev(path):
        return [(b, a) for a, b in reversed(path)]

    def best(cands):
        return min(cands, key=lambda p: (lat(p[1]), len(p[1]), p[0]))[1]

    out = dict(cpu)
    for m in range(c, topo.nodes):
        out[(m, m)] = []
        for s in range(c):
            there = best([(a, cpu[(s, a)] + d) for a, d in down(m)])
            out[(s, m)], out[(m, s)] = there, rev(there)
    for m1 in range(c, topo.nodes):
        for m2 in range(c, topo.nodes):
            if m1 == m2:
                continue
            a1, a2 = topo.memory_nodes[m1 - c].attach, topo.memory_nodes[m2 - c].attach
            if isinstance(a1, str) and a1 == a2:  # two devices behind one switch
                out[(m1, m2)] = [(m1, sw_id[a1]), (sw_id[a1], m2)]
                continue
            out[(m1, m2)] = best([(x, rev(d1) + cpu[(x, y)] + d2) for x, d1 in down(m1) for y, d2 in down(m2)])
    return out


