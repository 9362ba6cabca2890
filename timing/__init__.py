"""Timing stage: the memory-system model that QEMU loads as a TCG plugin.

This module is its host side: it writes the plugin's config from a
topology (CPU -> node, the guest-physical address map, hops, link routes,
caches, latencies, bandwidths, clock), reads the results the plugin writes at exit, and states the model's
formulas so tests can check the plugin against them.

The timing modes (off, fast, detailed, sampled) are timing/modes.py; the
plugin's own modes are fast (instruction counts, basic-block vectors,
phases) and detailed (every data access priced).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from protocol import facts

HERE = Path(__file__).resolve().parent
MODEL_INT = HERE / "model_int.h"
# the plugin's sources; the build compiles the .c files, and the headers are
# here so that a change to them rebuilds it (plugin.c includes the facts it
# shares with the guest and the host from experiments/lib: INCLUDE)
SOURCES = [*(HERE / n for n in ("model.h", "model_int.h", "model_core.h", "model_config.c", "model_state.c",
                                "model_symbols.c", "model_access.c", "model_memsys.c", "model_report.c", "model_tlb.c",
                                "model_tlb.h", "model_mlp.h", "model_exec.c", "model_bpred.c", "decode.h",
                                "decode_x86.c", "decode_alpha.c", "plugin.c", "plugin_mmu.c", "plugin_mmu.h",
                                "plugin_bbv.c", "plugin_bbv.h", "plugin_prof.c", "plugin_prof.h")),
           facts.HEADER]
INCLUDE = facts.HEADER.parent
# the QEMU-free parts the C tests link: the model, and the decoders (which need -lcapstone)
MODEL_C = [s for s in SOURCES if s.suffix == ".c" and s.name.startswith("model")]
DECODE_C = [s for s in SOURCES if s.suffix == ".c" and s.name.startswith("decode")]
# Read from model_int.h, where the model defines them:
MAX_HOPS = facts.integer(MODEL_INT, "MAX_HOPS")             # per-hop counters: hops 0..MAX_HOPS-1
MAX_CPUS = facts.integer(MODEL_INT, "MAX_CPUS")             # a directory entry holds 62 sharer bits
GRANULE = 1 << facts.integer(MODEL_INT, "GRAN_SHIFT")      # the address map's granule
COUNTERS = tuple(c for (c,) in facts.xmacro(MODEL_INT, "COUNTER_FIELDS", 1))  # per CPU and phase, in JSON order
RESULTS_FORMAT = facts.integer(MODEL_INT, "RESULTS_FORMAT")  # the results JSON's "format"
MODEL_VERSION = facts.integer(MODEL_INT, "MODEL_VERSION")    # 2: misses overlap (model_core.h)
KERNEL_BASE = {"x86_64": 0xFFFF800000000000, "alpha": 0xFFFFFC0000000000}
# phase id -> name (experiments/lib/vmlab_facts.h, VMLAB_PHASES)
PHASES = facts.PHASES


class TimingError(RuntimeError):
    pass


# --- the guest-physical address map --------------------------------------------
def address_map(topo) -> list[tuple[int, int, int, int]]:
    """(start, end, node, ram_offset) per contiguous range of guest-physical
    memory. QEMU places node memory back to back in command-line order in
    one RAM block; q35 maps its first part below 4 GiB (all of it up to
    2.75 GiB of RAM, else the first 2 GiB) and the rest from 4 GiB up."""
    total = topo.total_memory_mib << 20
    lowmem = 0x80000000 if total >= 0xB0000000 else 0xB0000000
    below = min(total, lowmem)
    out = []
    off = 0
    for n in range(topo.nodes):
        size = topo.node_memory_mib(n) << 20
        lo, hi = off, off + size
        if lo < below:  # the part below the PCI hole
            out.append((lo, min(hi, below), n, lo))
        if hi > below:  # the part above 4 GiB
            s = max(lo, below)
            out.append((s - below + (1 << 32), hi - below + (1 << 32), n, s))
        off = hi
    return out


def check_address_map(topo) -> None:
    for start, end, node, off in address_map(topo):
        if (start | end | off) % GRANULE:
            odd = (["nodes.memory_mib"] if topo.memory_mib % 2 else []) + [
                f"memory_nodes[{k}].memory_mib" for k, m in enumerate(topo.memory_nodes) if m.memory_mib % 2]
            where = odd[0] if odd else "nodes.memory_mib"
            raise TimingError(f"{topo.path}: field '{where}': expected a multiple of 2 MiB for the "
                              f"timing model's address map (node {node} spans {start:#x}-{end:#x})")


SRAT = re.compile(r"ACPI: SRAT: Node (\d+) PXM \d+ \[mem (0x[0-9a-f]+)-(0x[0-9a-f]+)\]")


def srat_ranges(console: str) -> dict[int, list[tuple[int, int]]]:
    """Per node, the memory ranges the guest's SRAT lines report (holes below
    1 MiB, like the 640 KiB-1 MiB legacy hole, merged away)."""
    per: dict[int, list[tuple[int, int]]] = {}
    for m in SRAT.finditer(console):
        per.setdefault(int(m.group(1)), []).append((int(m.group(2), 16), int(m.group(3), 16) + 1))
    return {n: _merge(r) for n, r in per.items()}


def _merge(ranges):
    out = []
    for s, e in sorted(ranges):
        if out and s - out[-1][1] < (1 << 20):
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def map_matches_srat(topo, console: str) -> tuple[bool, str]:
    """Does the derived address map agree with what the guest's firmware
    tables told Linux? Returns (ok, one line)."""
    seen = srat_ranges(console)
    if not seen:
        return False, "no SRAT memory lines on the console"
    want: dict[int, list] = {}
    for s, e, n, _ in address_map(topo):
        want.setdefault(n, []).append((s, e))
    want = {n: _merge(r) for n, r in want.items()}
    for n in sorted(set(want) | set(seen)):
        if want.get(n) != seen.get(n):
            w = ", ".join(f"{s:#x}-{e - 1:#x}" for s, e in want.get(n, []))
            g = ", ".join(f"{s:#x}-{e - 1:#x}" for s, e in seen.get(n, []))
            return False, f"node {n}: model maps [{w}], guest SRAT says [{g}]"
    return True, f"{len(want)} nodes, {sum(len(r) for r in want.values())} ranges agree with the guest's SRAT"


# the plugin's configuration: timing/plugin_config.py (one typed object, one writer)


def memory_lines(topo) -> list[str]:
    """The model's config lines for CPU-less memory nodes (timing/model_config.c):
    `node_bw N GBPS` for each memory node's device, `link_fig I LAT_NS GBPS`
    for each link that is not the interconnect's (a memory node's own link, a
    switch port), numbered as topologies.links_and_routes numbers them; such
    a link's bandwidth is the data it carries (its protocol's overhead taken
    off in the topology's figure), where the interconnect's is a raw rate the
    model takes a 16-byte header off. None for a machine without memory
    nodes: its config is what it always was. The model refuses a node with
    memory and no CPUs that has no node_bw line."""
    if not topo.memory_nodes:
        return []
    import topologies
    links, _ = topologies.links_and_routes(topo)
    out = [f"node_bw {n} {topo.node_bandwidth_gbps(n)}" for n in range(topo.cpu_nodes, topo.nodes)]
    for i, (a, b) in enumerate(links):
        if max(a, b) >= topo.cpu_nodes:
            lat, bw = topo.link_figures(a, b)
            out.append(f"link_fig {i} {lat} {bw}")
    return out


# --- the model's formulas (what tests check the plugin against) -------------------
def cycle_ps(topo) -> int:
    return topo.cycle_ps  # the engine's cycle: the model reads it from its config


def l2_ps(topo) -> int:
    return next(c for c in topo.caches if c.name == "l2").latency_cycles * cycle_ps(topo)


def leg_ps(topo, a: int, b: int) -> int:
    """One leg a -> b as the model adds it (model_state.c leg_ps): half of
    each crossed link's round trip, in whole ps."""
    if not topo.memory_nodes:
        return topo.hops[a][b] * int(topo.hop_latency_ns * 500 + 0.5)
    return sum(int(topo.link_figures(u, v)[0] * 500 + 0.5) for u, v in topo.vertex_path(a, b))


def memory_ns(topo, cpu_node: int, home: int) -> float:
    """Load-to-use latency of a miss served by memory, without queueing."""
    if topo.memory_nodes:
        return (int(topo.local_latency_ns * 1000 + 0.5) + leg_ps(topo, cpu_node, home)
                + leg_ps(topo, home, cpu_node)) / 1000.0
    return topo.local_latency_ns + topo.hops[cpu_node][home] * topo.hop_latency_ns


def c2c_ns(topo, req: int, home: int, owner: int) -> float:
    """A line owned by another cache: requester -> home -> owner -> requester.
    With a shared L3 per socket (model_memsys.c from_owner) the owner's socket
    hands it over at [caches.l3] c2c_latency_ns, and a home on the owner's
    socket answers from its on-die snoop filter instead of its memory directory."""
    ctrl = int(topo.local_latency_ns * 1000 + 0.5) - l2_ps(topo)
    legs = leg_ps(topo, req, home) + leg_ps(topo, home, owner) + leg_ps(topo, owner, req)
    if any(c.name == "l3" for c in topo.caches) and topo.guest_isa == "x86_64":
        sock = int(topo.socket_c2c_ns * 1000 + 0.5)
        if owner == home:
            return (sock + leg_ps(topo, req, home) + leg_ps(topo, owner, req)) / 1000.0
        return (ctrl + sock + legs) / 1000.0
    return (2 * l2_ps(topo) + ctrl + legs) / 1000.0


def pingpong_ns(topo, a: int, home: int, b: int) -> float:
    """The mean hand-off of a line two nodes' CPUs take turns to own: to a
    from b, then back (the two differ where the home's side matters)."""
    return (c2c_ns(topo, a, home, b) + c2c_ns(topo, b, home, a)) / 2


# --- the plugin build -----------------------------------------------------------------
def plugin_path(cache: Path, engine_key: str) -> Path:
    """The plugin is built against our QEMU's plugin header (its series adds
    the stall API), so it is cached per engine build and per content of its
    sources: two checkouts sharing a cache never load each other's plugin."""
    import hashlib
    h = hashlib.sha256()
    for src in SOURCES:
        h.update(src.name.encode() + b"\0" + src.read_bytes())
    return cache / "timing" / f"{engine_key[:16]}-{h.hexdigest()[:12]}" / "libvmlab_timing.so"


# --- results ----------------------------------------------------------------------------
def load_results(path: Path) -> dict:
    try:
        res = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise TimingError(f"{path}: cannot read the timing results: {e}") from None
    if not isinstance(res, dict) or res.get("format") != RESULTS_FORMAT:
        got = res.get("format") if isinstance(res, dict) else type(res).__name__
        raise TimingError(f"{path}: field 'format': expected {RESULTS_FORMAT} (model_int.h RESULTS_FORMAT), "
                          f"got {got!r}")
    return res
