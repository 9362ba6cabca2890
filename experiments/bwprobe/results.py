"""bwprobe's results: no tables of its own. Its "bw" records (one per access
pattern and node) and "bw_node" record, by the guest's own clock, beside the
published figure for the machine the topology models and the bound the
topology's own numbers set (Little's law over its miss tracking)."""
from __future__ import annotations

from analysis import kit

QUERY_TABLE = "records"

# Published single-core figures, per native ISA (sources in the topology
# files and shared/probes/hardware-anchors.md).
PUBLISHED = {
    "x86_64": {"read": (12.0, "GB/s", "single-thread STREAM, Xeon Platinum 8176 (AnandTech's Skylake-SP review)"),
               "node": (122.1, "GB/s", "all cores of a socket, local read, Xeon 6252N 6 x DDR4-2933 (Intel MLC "
                                       "--bandwidth_matrix, FD.io CSIT)")},
    "alpha": {"read": (12.8, "GB/s", "EV7 local memory peak per CPU (design figure, Mukherjee et al. 2002); "
                                     "no single-CPU STREAM figure read")},
}


def rows(con, run_id: int) -> tuple[list[dict], dict | None]:
    """Its "bw" records, and its "bw_node" record (or None)."""
    node = kit.bodies(con, run_id, "bw_node")
    return kit.bodies(con, run_id, "bw"), node[0] if node else None


def bounds(topo, home: int, node: int) -> dict:
    """What the topology's own numbers allow one core of node `home` reading
    node `node`: the latency (the topology's, CPU-less memory nodes' own
    links included), and the stream bandwidth Little's law gives its miss
    tracking."""
    lat = topo.latency_ns(home, node)
    c = topo.core
    track = c.l2_queue if c.prefetch_streams else c.fill_buffers
    return {"latency_ns": lat, "stream_gbps": min(track * 64 / lat, topo.memory_bandwidth_gbps),
            "random_ns": lat / c.fill_buffers}


def figures(con, run_id: int, r, params: dict, w) -> None:
    recs, node = rows(con, run_id)
    if not recs:
        return
    topo = kit.run_topology(con, run_id)
    pub = PUBLISHED.get(topo.native_isa, {})
    w(f"\nbwprobe ({r['timing_mode']} timing; {topo.core.describe()}): guest clock")
    home, table = recs[0]["node"], []
    for b in recs:
        hops = topo.hops[home][b["node"]]
        bd = bounds(topo, home, b["node"])
        bound = (f"{bd['latency_ns']:.1f} ns latency" if b["test"] == "chase" else
                 f"{bd['random_ns']:.1f} ns (latency / fill buffers)" if b["test"] == "random" else
                 f"{bd['stream_gbps']:.1f} GB/s (Little's law)" if b["test"] == "read" else "")
        table.append([b["node"], hops, b["test"], f"{b['gbps']:.2f}",
                      f"{b['ns_per_access']:.2f}" if b["accesses"] else "-", bound])
    for line in kit.text_table(["node", "hops", "test", "GB/s", "ns/access", "topology bound"], table, left={2, 5}):
        w("  " + line)
    chase = {b["node"]: b["ns_per_access"] for b in recs if b["test"] == "chase"}
    rnd = {b["node"]: b["ns_per_access"] for b in recs if b["test"] == "random"}
    for n in chase:
        if rnd.get(n):
            w(f"  node {n}: independent random loads {chase[n] / rnd[n]:.1f}x faster per load than the chase")
    if "read" in pub:
        rd = next(b["gbps"] for b in recs if b["test"] == "read")
        v, unit, src = pub["read"]
        w(f"  one core's local read {rd:.2f} GB/s; published {v:g} {unit}: {src} ({100 * (rd - v) / v:+.0f} %)")
    if node:
        line = (f"  all {node['cpus']} CPUs of node {node['node']} reading at once: {node['gbps']:.2f} GB/s; the "
                f"topology's memory bandwidth {topo.memory_bandwidth_gbps:g} GB/s")
        if "node" in pub:
            v, unit, src = pub["node"]
            line += f" (published {v:g} {unit} for a whole {src})"
        w(line)
