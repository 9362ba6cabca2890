"""tlbprobe's results: no tables of its own. Its "tlb" records (the reach
curve on 4 KiB and 2 MiB pages) and "ptnode" records (page tables local or
remote), by the guest's own clock, beside what the topology's TLB holds and
the published figures they are checked against."""
from __future__ import annotations

from analysis import kit

QUERY_TABLE = "records"

# Mitosis (Achermann et al., ASPLOS 2020, the paper's artifact; shared/probes/
# hardware-anchors.md B): 4-socket Haswell E7-4850 v3, 4 KiB pages, GUPS with
# its page tables on a remote socket and its data local, no interference.
MITOSIS_GUPS = (1.53, "GUPS, remote page tables against local (RP-LD / LP-LD), 4-socket Haswell, 4 KiB pages; "
                      "1.07-1.30x for its other workloads (Mitosis, ASPLOS 2020, artifact figure 6)")


def reach_mib(topo, size: str, levels=("l1d", "l2")) -> dict[str, float]:
    """MiB each TLB level covers with pages of size ("4k" or "2m")."""
    page = {"4k": 4 / 1024, "2m": 2.0, "1g": 1024.0}[size]
    out = {}
    for lv in levels:
        n = sum(a.entries for a in topo.tlb.arrays if a.level == lv and size in a.sizes)
        if n:
            out[lv] = n * page
    return out


def step(rows4k: list[dict], rows2m: list[dict]) -> tuple[int, int] | None:
    """The first two working sets between which the translation's cost per
    load (4 KiB pages less 2 MiB pages, where the kernel backed the 2 MiB
    buffer with huge pages) rises by more than half: below the second-level
    TLB's reach it is the cost of its hit, the same at every size; past it a
    walk is added. (Further up, data and page-table lines crowd each other
    out of the caches: larger rises, not the TLB's.)"""
    two = {b["ws_mib"]: b for b in rows2m if b["huge_share"] >= 0.9}
    cost = [(b["ws_mib"], b["ns_per_load"] - two[b["ws_mib"]]["ns_per_load"]) for b in rows4k if b["ws_mib"] in two]
    for (a, ca), (b, cb) in zip(cost, cost[1:]):
        if ca > 0 and cb > 1.5 * ca:
            return a, b
    return None


def by_ws(recs: list[dict], ws: int) -> float:
    return next(b["ns_per_load"] for b in recs if b["ws_mib"] == ws)


def figures(con, run_id: int, r, params: dict, w) -> None:
    tl = kit.bodies(con, run_id, "tlb")
    if not tl:
        return
    topo = kit.run_topology(con, run_id)
    w(f"\ntlbprobe ({r['timing_mode']} timing): ns per load of a chase touching one line per 4 KiB, guest clock")
    w(f"  TLBs: {topo.tlb.describe()}")
    by = {s: [b for b in tl if b["pages"] == s] for s in ("4k", "2m")}
    two = {b["ws_mib"]: b for b in by["2m"]}
    table = []
    for b in by["4k"]:
        h = two.get(b["ws_mib"])
        table.append([f"{b['ws_mib']} MiB", f"{b['ns_per_load']:.2f} ns"]
                     + ([f"{h['ns_per_load']:.2f} ns", f"{b['ns_per_load'] - h['ns_per_load']:+.2f} ns",
                         f"{100 * h['huge_share']:.0f} %"] if h else ["-", "-", "-"]))
    for line in kit.text_table(["working set", "4 KiB pages", "2 MiB pages", "translation (4 KiB - 2 MiB)",
                                "huge-page share of the 2 MiB buffer"], table):
        w("  " + line)
    for s, label in (("4k", "4 KiB"), ("2m", "2 MiB")):
        reach = reach_mib(topo, s)
        if reach:
            w(f"  {label} pages: the L1 DTLB covers {reach.get('l1d', 0):g} MiB, the second-level TLB "
              f"{reach.get('l2', 0):g} MiB")
    st = step(by["4k"], by["2m"])
    if st:
        w(f"  the translation's cost per load first steps up from {st[0]} to {st[1]} MiB "
          f"({by_ws(by['4k'], st[0]) - by_ws(by['2m'], st[0]):+.2f} -> "
          f"{by_ws(by['4k'], st[1]) - by_ws(by['2m'], st[1]):+.2f} ns)")
    pt = kit.bodies(con, run_id, "ptnode")
    if len(pt) == 2:
        loc, rem = pt
        ratio = rem["ns_per_update"] / max(loc["ns_per_update"], 1e-9)
        w(f"  page tables on node {rem['pt_node']} (SLIT {rem['distance']}) against node {loc['pt_node']}, "
          f"data on node {loc['data_node']}, {loc['ws_mib']} MiB of random updates: {loc['ns_per_update']:.2f} -> "
          f"{rem['ns_per_update']:.2f} ns per update, {ratio:.2f}x; "
          f"published {MITOSIS_GUPS[0]:.2f}x: {MITOSIS_GUPS[1]}")
