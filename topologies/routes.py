"""The machine's routes: which directed links a message between two nodes
crosses (dimension-order on the torus, shortest paths between sockets).
The timing model queues on these links."""
from __future__ import annotations

from collections import deque

from topologies import TopologyError, torus_coords


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


