"""Seed 004's table (memeater: swapping beside free nodes), as rows over our
database: fill order, time per chunk by hops from home, swap and free
memory; seeds/tables.py gathers the five seeds."""
from __future__ import annotations

import statistics
from collections.abc import Callable

from seeds.kit import Headline, Row, Seed, Table, delta, fig, params, run_of, scalar, topology_of


# --- 004: memeater ---------------------------------------------------------------------
def _swap_start(con, rid):
    """(cycle, chunk) of the first chunk after which swap was in use (as the
    memeater verdict reads it), or None."""
    return con.execute("SELECT cycle, chunk FROM chunk_times WHERE run_id = ? AND swap_used_kib > 0 "
                       "ORDER BY cycle, chunk LIMIT 1", (rid,)).fetchone()


def _free_at(con, rid, cycle, chunk) -> list[int]:
    return [r[0] for r in con.execute("SELECT free_kib FROM node_free WHERE run_id = ? AND cycle = ? AND chunk = ? "
                                      "ORDER BY node", (rid, cycle, chunk))]


FILLED_KIB = 16384  # a node with at most this free counts as filled (the memeater verdict's line)


def _touched(con, rid):
    """Memory touched before swapping began, in nodes' worth (all of it when
    nothing swapped: a lower bound, like the seed's 'got 90GB without heavy paging')."""
    p, r = params(con, rid), run_of(con, rid)
    s = _swap_start(con, rid)
    if s is None or s["cycle"] > 0:
        # a run shortened below memeater's fill (004-zone-reclaim-5: 38 chunks of 1 MiB) that never
        # swapped bounds nothing: its few MiB would read as "swapped early"
        if p.get("chunks", 0) * p.get("chunk_mib", 0) < p.get("fill_frac", 0.5) * r["nodes"] * r["memory_mib_per_node"]:
            return None
        chunks = p.get("chunks", 0)
    else:
        chunks = s["chunk"] + 1
    return chunks * p.get("chunk_mib", 0) / r["memory_mib_per_node"]


def _at_swap_start(f: Callable) -> Callable:
    def get(con, rid):
        s = _swap_start(con, rid)
        free = _free_at(con, rid, s["cycle"], s["chunk"]) if s else []
        return f(con, rid, free) if free else None
    return get


def _per_quarter_node(con, rid) -> float:
    """What turns a run's ms per chunk into ms per quarter node, the seed's
    1 GB chunk on 4 GB RADs: 1 for the default chunk (chunk_frac 0.25), more
    for the smaller chunks the zone_reclaim_mode=5 blocks take."""
    r = run_of(con, rid)
    chunk = params(con, rid).get("chunk_mib")
    return r["memory_mib_per_node"] / 4 / chunk if chunk and r["memory_mib_per_node"] else 1.0


def _ms(before: bool) -> Callable:
    def get(con, rid):
        s = _swap_start(con, rid)
        if not before and (s is None or s["cycle"] > 0):
            return None  # no swapping in the first cycle
        cut = s["chunk"] if s is not None and s["cycle"] == 0 else None
        ms = [r[1] for r in con.execute("SELECT chunk, wall_ms FROM chunk_times WHERE run_id = ? AND cycle = 0 "
                                        "ORDER BY chunk", (rid,)) if cut is None or (r[0] < cut) == before]
        return statistics.mean(ms) * _per_quarter_node(con, rid) if ms else None
    return get


def _hops(con, rid) -> list[int] | None:
    """Hops from the node of the CPU memeater was pinned to, from the run's own topology."""
    r = run_of(con, rid)
    topo, cpu = topology_of(r["topology"], r["topology_toml"]), params(con, rid).get("cpu")
    ok = topo is not None and isinstance(cpu, int) and 0 <= cpu < topo.cpus
    return list(topo.hops[cpu // topo.cpus_per_node]) if ok else None


def _ms_at_hop(h: int) -> Callable:
    def get(con, rid):
        hops = _hops(con, rid)
        ms = [r[1] for r in con.execute("SELECT main_node, wall_ms FROM chunk_times WHERE run_id = ? AND cycle = 0",
                                        (rid,)) if hops and r[0] is not None and r[0] < len(hops) and hops[r[0]] == h]
        return statistics.mean(ms) * _per_quarter_node(con, rid) if ms else None
    return get


def _free_at_hop(h: int) -> Callable:
    """Mean free memory of the nodes h hops from home after the last chunk of the first cycle."""
    def get(con, rid):
        hops = _hops(con, rid)
        last = con.execute("SELECT MAX(chunk) FROM chunk_times WHERE run_id = ? AND cycle = 0", (rid,)).fetchone()[0]
        free = _free_at(con, rid, 0, last) if last is not None else []
        at = [kib / 1024 for n, kib in enumerate(free) if hops and n < len(hops) and hops[n] == h]
        return statistics.mean(at) if at else None
    return get


def _memeater_rows(con, run_ids) -> tuple:
    hops = max((max(h) for h in (_hops(con, r) for r in run_ids) if h), default=-1)
    cycles = con.execute(f"SELECT DISTINCT cycle FROM memeater_cycles WHERE run_id IN "
                         f"({', '.join('?' * len(run_ids))}) ORDER BY cycle", run_ids).fetchall()
    return (
        Row("touched", "memory touched before swapping began (all, if none)", "nodes' worth", _touched),
        Row("filled", "nodes filled when swapping began", "nodes",
            _at_swap_start(lambda c, r, free: sum(1 for k in free if k <= FILLED_KIB))),
        Row("free_nodes", "nodes with free memory when swapping began", "nodes",
            _at_swap_start(lambda c, r, free: sum(1 for k in free if k > FILLED_KIB))),
        Row("free_pct", "free memory when swapping began", "% of memory",
            _at_swap_start(lambda c, r, free: 100 * sum(free) / 1024
                           / (run_of(c, r)["nodes"] * run_of(c, r)["memory_mib_per_node"]))),
        Row("cycle", "cycle in which swapping began", "cycle",
            lambda con, rid: None if _swap_start(con, rid) is None else float(_swap_start(con, rid)["cycle"])),
        Row("ms_before", "ms per quarter node (the seed's 1 GB chunk) before swapping, first cycle", "ms", _ms(True)),
        Row("ms_after", "ms per quarter node (the seed's 1 GB chunk) once swapping, first cycle", "ms", _ms(False)),
        *(Row(f"ms_hop{h}", f"ms per quarter node {h} hop{'' if h == 1 else 's'} from home, first cycle", "ms",
              _ms_at_hop(h))
          for h in range(hops + 1)),
        *(Row(f"swap_c{c[0]}", f"swap used after cycle {c[0]}", "MiB",
              scalar(f"SELECT swap_used_kib FROM memeater_cycles WHERE run_id = ? AND cycle = {int(c[0])}", 1 / 1024))
          for c in cycles),
        Row("swap_peak", "swap used at the peak", "MiB", fig("memeater.swap_peak_kib", 1 / 1024)),
        Row("pswpout", "pages swapped out", "pages", delta("pswpout")),
        *(Row(f"free_hop{h}", f"free memory per node {h} hop{'' if h == 1 else 's'} from home, end of first cycle",
              "MiB", _free_at_hop(h)) for h in range(hops + 1)),
    )


S004 = Seed(
    "004", "HP GS1280 (32 CPUs, 4x8 torus, 128 GB, Tru64 5.1B), virtual memory problem (2005)",
    "004_a7c680989fc1af5f.txt", "memeater", ("Tru64 5.1B-PK4", "Tru64 patched (May 2005)"),
    {"vanilla": "Tru64 patched (May 2005)", "zone-reclaim-auto": "Tru64 5.1B-PK4",
     "vanilla, zone_reclaim_mode=5": "Tru64 5.1B-PK4"},
    "6.1 allocates on other nodes before reclaiming locally; zone-reclaim-auto (mode 1) reclaims clean page "
    "cache on the local node first; zone_reclaim_mode=5 also unmaps the program's pages there into swap (without "
    "mode 2 it writes none to disk), the local paging of Tru64's RADs in 6.1's terms",
    (Table("fill order, time per quarter node (the seed's 1 GB chunk), swap and free memory",
           _memeater_rows, (Headline("touched", "memory touched before swapping began"),)),),
    by_machine=True, param_columns=("zone_reclaim_mode", "cache_frac"))
