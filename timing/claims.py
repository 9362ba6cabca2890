"""What the timing model prices and what it leaves out, in the words the
run row's limitations use (timing/modes.py Detailed.limitation): each from
the topology the run had."""
from __future__ import annotations


def core(topo) -> str:
    """What the model's core executes (model version 4, timing/model_exec.c)."""
    c = topo.core
    if c.model != "out-of-order":
        return "a blocking core: every instruction one cycle, every miss stalls its full latency"
    if topo.guest_isa not in ("x86_64", "alpha"):
        return "no decoder for this guest: instructions one per cycle"
    return (f"the core executes the instructions: register dataflow (flags included), {c.width}-wide dispatch "
            f"into its window, per-class latencies and execution units, a {c.predictor} branch predictor with a "
            f"{c.mispredict_cycles}-cycle penalty, store-to-load forwarding; not modeled: macro-fusion, "
            "partial-register merges, micro-op splits, the decoded-op cache; an instruction the decoder does "
            "not know costs one ALU cycle (counted: timing_cpu.unknown_insns); a block cut short by an "
            "exception or interrupt is priced whole")


def translation(topo) -> str:
    """What the model prices of address translation and instruction fetch."""
    if topo.guest_isa != "x86_64" or not topo.tlb.on:
        return ("no TLB or page walk (the walker reads x86-64 page tables only)" if topo.tlb.on else
                "no TLB or page walk") + ", no instruction fetch (L1I hits at 1 instruction per cycle)"
    fetch = ("instruction fetch through an L1I (a block's lines fetched together, its slowest line stalls "
             "the front end)" if any(c.name == "l1i" for c in topo.caches)
             else "no instruction fetch (L1I hits at 1 instruction per cycle)")
    return (f"TLBs and page walks: {topo.tlb.describe()}; walks read the guest's page tables through the data "
            "caches at their home nodes; a CR3 write flushes every non-global entry (no PCID); " + fetch)


def l3(topo) -> str:
    l3 = next((c for c in topo.caches if c.name == "l3"), None)
    if not l3 or topo.guest_isa != "x86_64":
        return "no shared L3"
    return (f"a shared L3 per socket ({l3.size_kib:g} KiB, {l3.ways}-way, {l3.latency_cycles} cycles): a victim cache "
            "of its CPUs' L2s holding clean lines (dirty lines are written back as they leave an L2), lines moved "
            f"between the socket's L2s at {topo.socket_c2c_ns:g} ns")
