"""The timing plugin's configuration: one typed object, written here only,
read by timing/model_config.c (the model's keys, refused when unknown) and
timing/plugin.c read_plugin_keys (the `plugin.*` keys below, refused when
unknown too: PLUGIN_KEYS is the list both sides must agree on, and
tests/test_timing_modes.py checks plugin.c against it).

The plugin's own modes are "fast" (instruction counts, vectors, phases)
and "detailed" (every access priced); which one a run uses is its timing
mode's decision (timing/modes.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import timing
import topologies

PLUGIN_MODES = ("fast", "detailed")
# every plugin.* key the plugin reads (timing/plugin.c read_plugin_keys)
PLUGIN_KEYS = ("plugin.kernel_up", "plugin.stalls", "plugin.price_from_marker", "plugin.warmup_insns",
               "plugin.bbv_dir", "plugin.interval", "plugin.global_bbv", "plugin.mem_hops",
               "plugin.checkpoint_points", "plugin.stop_after_slices", "plugin.region_warmup_slices",
               "plugin.functional_slices", "plugin.first_slice_done", "plugin.stop_for_exit", "plugin.profile",
               "plugin.user_symbols", "plugin.pause_extra_ps", "plugin.sample_ps")
# a kernel stack sample every 250 us of a vCPU's modeled time: perf's default 4 kHz
SAMPLE_PS = 250_000_000


def check(topo, mode: str, qemu_mode: str = "icount") -> None:
    """Everything that keeps the model from running this topology in the
    plugin's `mode`, as one line, before anything is built or booted."""
    if mode == "detailed" and qemu_mode != "icount":
        raise timing.TimingError("--timing detailed: needs --qemu-mode icount (the model is one serial state, and "
                                 "QEMU 10.0.2 can abort on MMIO addresses under MTTCG)")
    if mode not in PLUGIN_MODES:
        raise timing.TimingError(f"the timing plugin's mode: expected one of {', '.join(PLUGIN_MODES)}, "
                                 f"got {mode!r}")
    if topo.max_hops() >= timing.MAX_HOPS:
        raise timing.TimingError(f"{topo.path}: {topo.max_hops()} hops between the farthest nodes; the timing "
                                 f"model counts at most {timing.MAX_HOPS - 1}")
    if topo.cpus > timing.MAX_CPUS:
        raise timing.TimingError(f"{topo.path}: {topo.cpus} CPUs; the timing model's directory holds at most "
                                 f"{timing.MAX_CPUS}")
    timing.check_address_map(topo)
    caches = {c.name: c for c in topo.caches}
    for name in ("l1d", "l2"):
        if name not in caches:
            raise timing.TimingError(f"{topo.path}: field 'caches.{name}': expected a cache for the timing model")
    for name in ("l2", "l1i", "l3"):
        if name in caches and caches[name].line_bytes != caches["l1d"].line_bytes:
            raise timing.TimingError(f"{topo.path}: field 'caches.{name}.line_bytes': expected the L1D's line size")


@dataclass(frozen=True)
class PluginConfig:
    """mode: the plugin's (fast or detailed); out: its results JSON.
    stalls: in detailed mode, charge every access's modeled latency beyond
    an L1 hit to the running vCPU's clock (our QEMU's series), so the guest
    feels it; without per-vCPU clocks (mttcg) QEMU refuses them.
    price_from_marker: a booted detailed run counts instructions through the
    boot and prices from the guest's marker where the experiment begins
    (x86 guests; a restored run is priced from the restore).
    warmup_insns: the first instructions priced (all vCPUs together) only
    warm the model; its figures count from the end of the warm-up.
    restored: the guest's kernel is up from the first block (a restore may
    start in user space: its blocks are the user's, not the boot's).
    mem_hops: the machine-wide slices count loads and stores by hops to
    their home node (a sampled run's profile: where its data lives).
    checkpoint_points: every vCPU's TLB is reset at the run's first block
    and where a checkpoint is or would be taken (a sampled run's profile,
    checkpoint segments and regions: plugin_bbv.c), so that machines
    restored from its checkpoints go on as the profile did.
    The region fields (pipeline/sampled.py, timing/plugin.c): stop the
    machine `stop_after_slices` slices on, the first `region_warmup_slices`
    warming the model (the first `functional_slices` of those charging
    nothing), the first slice `first_slice_done` instructions short, and
    `stop_for_exit`: the stop ends the run.
    profile: where the profile on the guest clock goes (timing/plugin_prof.h;
    per-vCPU clocks only), with the programs' symbols (user_symbols), a
    PAUSE's extra time on the engine's clock (pause_extra_ps) and, in
    detailed mode, a kernel stack sample every sample_ps."""
    mode: str
    out: Path
    symbols: Path | None = None
    bbv_dir: Path | None = None
    interval: int = 100_000_000
    qemu_mode: str = "icount"
    stalls: bool = True
    price_from_marker: bool = False
    warmup_insns: int = 0
    restored: bool = False
    mem_hops: bool = False
    checkpoint_points: bool = False
    stop_after_slices: int = 0
    region_warmup_slices: int = 0
    functional_slices: int = 0
    first_slice_done: int = 0
    stop_for_exit: bool = False
    profile: Path | None = None
    user_symbols: Path | None = None
    pause_extra_ps: int = 0
    sample_ps: int = SAMPLE_PS

    def text(self, topo) -> str:
        check(topo, self.mode, self.qemu_mode)
        caches = {c.name: c for c in topo.caches}
        l1, l2 = caches["l1d"], caches["l2"]
        lines = ["vmlab-timing 1", f"mode {self.mode}", f"out {self.out}", f"isa {topo.guest_isa}",
                 f"kernel_base {timing.KERNEL_BASE[topo.guest_isa]:#x}",
                 f"cpus {topo.cpus}", f"nodes {topo.nodes}", f"clock_ghz {topo.clock_ghz}",
                 f"cycle_ps {topo.cycle_ps}", f"line_bytes {l1.line_bytes}",
                 f"l1d {l1.size_kib * 1024} {l1.ways} {l1.latency_cycles}",
                 f"l2 {l2.size_kib * 1024} {l2.ways} {l2.latency_cycles}",
                 f"local_ns {topo.local_latency_ns}", f"hop_ns {topo.hop_latency_ns}",
                 f"mem_bw_gbps {topo.memory_bandwidth_gbps}", f"link_bw_gbps {topo.link_bandwidth_gbps}",
                 *topo.core.config_lines(topo.cycle_ps)]
        if topo.guest_isa == "x86_64":  # the walker reads x86-64 page tables (timing/plugin_mmu.c)
            lines += topo.tlb.config_lines()
            if "l3" in caches:  # a shared L3 per socket (node)
                l3 = caches["l3"]
                lines += [f"l3 {int(l3.size_kib * 1024)} {l3.ways} {l3.latency_cycles}",
                          f"l3_c2c_ns {topo.socket_c2c_ns}"]
            if "l1i" in caches:
                i = caches["l1i"]
                lines.append(f"l1i {i.size_kib * 1024} {i.ways} {i.latency_cycles}")
        if self.symbols:
            lines.append(f"symbols {self.symbols}")
        lines += self.plugin_lines()
        for n in range(topo.nodes):
            lines += [f"cpu_node {c} {n}" for c in topo.node_cpus(n)]
        lines += [f"hops {i} " + " ".join(map(str, row)) for i, row in enumerate(topo.hops)]
        links, routes = topologies.links_and_routes(topo)
        lines.append(f"links {len(links)}")
        lines += [f"link {i} {a} {b}" for i, (a, b) in enumerate(links)]
        lines += [f"route {a} {b} " + " ".join(map(str, p)) for (a, b), p in sorted(routes.items()) if p]
        lines += [f"range {s:#x} {e:#x} {n} {o:#x}" for s, e, n, o in timing.address_map(topo)]
        lines += timing.memory_lines(topo)  # CPU-less memory nodes (none: the config as it always was)
        return "\n".join(lines) + "\n"

    def plugin_lines(self) -> list[str]:
        """The plugin.* lines, each only when it differs from the plugin's default."""
        icount = self.qemu_mode == "icount"
        on = lambda b: "on" if b else "off"
        out = ["plugin.kernel_up on"] if self.restored else []
        if self.mode == "detailed":
            out.append(f"plugin.stalls {on(self.stalls and icount)}")
            if self.price_from_marker:
                out.append("plugin.price_from_marker on")
            if self.warmup_insns:
                out.append(f"plugin.warmup_insns {int(self.warmup_insns)}")
        if self.bbv_dir:
            # machine-wide slices need one vCPU at a time: round-robin TCG under -icount (plugin_bbv.c)
            out += [f"plugin.bbv_dir {self.bbv_dir}", f"plugin.interval {self.interval}",
                    f"plugin.global_bbv {on(icount)}"]
            if self.mem_hops:
                out.append("plugin.mem_hops on")
            if self.checkpoint_points and icount:
                out.append("plugin.checkpoint_points on")
        for key, v in (("stop_after_slices", self.stop_after_slices), ("region_warmup_slices",
                       self.region_warmup_slices), ("functional_slices", self.functional_slices),
                       ("first_slice_done", self.first_slice_done)):
            if v:
                out.append(f"plugin.{key} {int(v)}")
        if self.stop_for_exit:
            out.append("plugin.stop_for_exit on")
        if self.profile and icount:
            out.append(f"plugin.profile {self.profile}")
            if self.user_symbols:
                out.append(f"plugin.user_symbols {self.user_symbols}")
            if self.pause_extra_ps:
                out.append(f"plugin.pause_extra_ps {int(self.pause_extra_ps)}")
            if self.mode == "detailed" and self.sample_ps:
                out.append(f"plugin.sample_ps {int(self.sample_ps)}")
        return out


def config_text(topo, mode: str, out: Path, **kw) -> str:
    """The configuration's text (PluginConfig's fields as keywords)."""
    return PluginConfig(mode, out, **kw).text(topo)
