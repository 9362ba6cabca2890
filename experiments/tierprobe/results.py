"""tierprobe's results: no tables of its own. Its numa_view record (the
guest's nodes, distances, HMAT figures and memory tiers) and its tier_bw /
tier_bw_node records (by the guest's own clock) beside what the topology
configures: the target's load-to-use latency (topologies Topology.latency_ns),
one core's bound (Little's law over its miss tracking, capped by the path's
bandwidth) and the path's bandwidth (the node's own, or a link on the way)."""
from __future__ import annotations

from analysis import kit

QUERY_TABLE = "records"


def expected(topo, home: int, node: int) -> dict:
    """The topology's figures for CPUs of node `home` reading node `node`."""
    lat = topo.latency_ns(home, node)
    bw = topo.bandwidth_gbps(home, node)
    c = topo.core
    track = c.l2_queue if c.prefetch_streams else c.fill_buffers
    return {"latency_ns": lat, "node_gbps": bw, "core_gbps": min(track * 64 / lat, bw)}


def view_lines(view: dict) -> list[str]:
    """The guest's NUMA view as numactl -H prints it, with the tiers."""
    nodes = view["nodes"]
    out = [f"  available: {len(nodes)} nodes (0-{len(nodes) - 1})"]
    for n in nodes:
        out.append(f"  node {n['node']} cpus: {n['cpus'] or '(none)'}")
        out.append(f"  node {n['node']} size: {n['mem_total_kib'] // 1024} MB  (free {n['mem_free_kib'] // 1024} MB; "
                   f"HMAT {n['hmat_read_latency_ns']} ns, {n['hmat_read_bandwidth_mbps']} MB/s; tier {n['tier']})")
    out.append("  node distances:")
    out.append("  node " + "".join(f"{n['node']:>4}" for n in nodes))
    out += [f"  {n['node']:>4}:" + "".join(f"{d:>4}" for d in n["distances"]) for n in nodes]
    if view.get("tiers_sysfs"):
        tiers = ", ".join(f"memory_tier{t['tier']}: nodes {','.join(map(str, t['nodes']))}" for t in view["tiers"])
        out.append(f"  memory tiers ({len(view['tiers'])}): {tiers}; demotion_enabled {view['demotion_enabled']}")
    else:
        out.append("  no /sys/devices/virtual/memory_tiering (the kernel has no memory tiers)")
    return out


def figures(con, run_id: int, r, params: dict, w) -> None:
    topo = kit.run_topology(con, run_id)
    views = kit.bodies(con, run_id, "numa_view")
    if views:
        w("\ntierprobe: the guest's NUMA view")
        for line in view_lines(views[0]):
            w(line)
    bw = kit.bodies(con, run_id, "tier_bw")
    if not bw:
        return
    w(f"\ntierprobe ({r['timing_mode']} timing): guest clock, beside the topology")
    w("  where   node dist  test     measured        topology          off")
    home = bw[0]["cpu"] // topo.cpus_per_node
    for b in bw:
        e = expected(topo, home, b["node"])
        if b["test"] == "chase":
            got, want, unit = b["ns_per_access"], e["latency_ns"], "ns"
        else:
            got, want, unit = b["gbps"], e["core_gbps"], "GB/s"
        w(f"  {b['where']:<7} {b['node']:>4} {b['distance']:>4}  {b['test']:<6} {got:>8.2f} {unit:<5} {want:>8.2f} "
          f"{unit:<5} {100 * (got - want) / want:+6.1f} %")
    for n in kit.bodies(con, run_id, "tier_bw_node"):
        e = expected(topo, n["from_node"], n["node"])
        w(f"  all {n['cpus']} CPUs of node {n['from_node']} reading node {n['node']}: {n['gbps']:.2f} GB/s; the "
          f"topology's {e['node_gbps']:g} GB/s ({100 * (n['gbps'] - e['node_gbps']) / e['node_gbps']:+.1f} %)")
    w("  (one core's bound: Little's law, its L2 queue of misses over the latency, capped by the path's bandwidth)")
