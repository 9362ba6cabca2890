"""The timing modes, one class each: everything that differs between
`--timing off`, `fast`, `detailed` and `sampled` is said here and nowhere
else (tests/test_timing_modes.py greps the other modules for a mode name
compared as a string).

A mode owns: its input checks, whether the plugin loads and in which of
its own modes, whether the model's stalls reach the guest's clocks, its
part of the run key, the plugin's configuration for the run (one typed
object, timing/plugin_config.py), its limitation sentence, the host-time
factor its runs need, and its finishing step (a sampled run's regions).

The pipeline holds a mode object and asks it; the finishing step is the
mode's decision over steps the run offers (`run.sample_regions()`), since
what a step needs (the engine, the database) lies above this stage.
"""
from __future__ import annotations

import timing
from timing import plugin_config
from timing.plugin_config import PluginConfig

MAX_K = 100          # --sample-max-k
MAX_WARMUP = 100     # --sample-warmup, --sample-functional (slices)
DEFAULT_SLICE = 100_000_000


TimingError = timing.TimingError


class TimingMode:
    name: str
    plugin: str | None = None        # the plugin's own mode for the run itself; None: no plugin
    prices_accesses = False          # the model prices every data access (its stalls exist)
    slowdown = 1.0                   # host time against a run without the plugin (the run's wall-clock limit)
    boot_slowdown = 1.0              # a booted run's boot (unpriced up to the experiment's marker in detailed)
    simpoint_profile = False         # the run is a SimPoint profile (vectors, hops, checkpoint points)

    @property
    def loads_plugin(self) -> bool:
        return self.plugin is not None

    # --- input -----------------------------------------------------------------------
    def check(self, spec, topo) -> None:
        """Every option of `spec` this mode cannot honour, as one line
        (TimingError), before anything is built."""
        self.check_options(spec)
        if not 10_000 <= spec.slice_insns <= 10**12:
            raise TimingError(f"--slice-insns: expected 10,000 to 1e12 instructions per interval, got "
                              f"{spec.slice_insns}")
        if self.loads_plugin:
            plugin_config.check(topo, self.plugin, spec.qemu_mode)

    def check_options(self, spec) -> None:
        """The mode's own options (a mode without a model refuses the model's)."""
        if spec.warmup_insns:
            raise TimingError(f"--warmup-insns: expected a positive instruction count below 1e13 with "
                              f"--timing detailed (it warms the model's caches), got {spec.warmup_insns} "
                              f"with --timing {self.name}")
        if spec.no_stalls:
            raise TimingError(f"--no-stalls: only with --timing detailed (it keeps the model's stalls off the "
                              f"guest's clocks); --timing {self.name} prices no access, so has no stalls")

    def check_start(self, boots_why: str | None) -> None:
        """The run boots instead of restoring (boots_why says why): fine unless the mode needs a snapshot."""

    def stalls_reach_guest(self, spec) -> bool:
        """Whether the model's stalls are charged to the vCPUs' clocks."""
        return False

    def core_charges(self, spec, topo) -> bool:
        """Whether the model's core sets each instruction's time (the engine
        then counts an instruction at the core's best case: timing/plugin.c
        core_charges)."""
        return self.stalls_reach_guest(spec) and topo.core.model == "out-of-order"

    def key(self, spec) -> dict:
        """The mode's part of the run key (pipeline/spec.run_key): a run
        without a warm-up or with the default interval keeps the key it had
        before those existed."""
        out = {"timing": self.name, "stalls": self.prices_accesses and not spec.no_stalls}
        if spec.warmup_insns:
            out["warmup_insns"] = spec.warmup_insns
        if spec.slice_insns != DEFAULT_SLICE:
            out["slice_insns"] = spec.slice_insns
        return out

    # --- the plugin ----------------------------------------------------------------------
    def plugin_config(self, spec, topo, out_dir, symbols, restored: bool,
                      user_symbols=None) -> PluginConfig | None:
        """The plugin's configuration for the run itself (None: no plugin);
        out_dir holds its results, vectors and profile (on the guest
        clock: per-vCPU clocks only; user_symbols, the programs' table)."""
        if not self.loads_plugin:
            return None
        return PluginConfig(
            mode=self.plugin, out=out_dir / "timing.json", symbols=symbols, bbv_dir=out_dir,
            interval=spec.slice_insns, qemu_mode=spec.qemu_mode, stalls=self.stalls_reach_guest(spec),
            price_from_marker=not restored and topo.guest_isa == "x86_64", warmup_insns=spec.warmup_insns,
            restored=restored, mem_hops=self.simpoint_profile, checkpoint_points=self.simpoint_profile,
            profile=None if spec.no_profile else out_dir / "profile.json", user_symbols=user_symbols,
            pause_extra_ps=(topo.pause_cycles - 1) * topo.cycle_ps)

    # --- what the run says -----------------------------------------------------------------
    def limitation(self, topo, stalls: bool) -> str:
        raise NotImplementedError  # every mode below says its own

    def headline(self) -> str:
        """The summary's first word on what the run's figures are ('' for the accurate machine)."""
        return ""

    def cold_start(self) -> str:
        """What a restored run's model starts with (the restore sentence)."""
        return " and the timing model's caches cold" if self.loads_plugin else ""

    # --- after the guest -------------------------------------------------------------------
    def finish(self, run) -> str:
        """The mode's last step over the stored run; returns the run's status."""
        return run.status


class Off(TimingMode):
    name = "off"

    def headline(self) -> str:
        return ("functional run (timing off): guest time counts instructions at one a cycle; no cache, memory, "
                "remote-access or lock cost is in any figure")

    def limitation(self, topo, stalls: bool) -> str:
        return ("no memory-system model: guest time counts instructions only (1 per cycle), no cache, "
                "remote-memory or lock latency")


class Fast(TimingMode):
    name = "fast"
    plugin = "fast"
    slowdown = 1.5
    boot_slowdown = 1.5

    def headline(self) -> str:
        return ("functional run (timing fast): guest time counts instructions at one a cycle (the profile and "
                "basic-block vectors are kept); no cache, memory, remote-access or lock cost is in the guest's figures")

    def limitation(self, topo, stalls: bool) -> str:
        return ("timing model fast: the guest does not feel its latencies (reported beside the guest's figures); "
                "instruction counts and basic-block vectors only")


class Detailed(TimingMode):
    name = "detailed"
    plugin = "detailed"
    prices_accesses = True
    # `./run.py bench` (model 4, gs1280-8 memeater): detailed 0.21x the speed of off in wall time, so 4.8x its
    # host time; 8x leaves room for a loaded host and for guests whose code the model finds costlier. A run
    # priced in detail is not killed for being expensive; a hung guest still is, at that limit.
    slowdown = 8.0
    boot_slowdown = 1.5              # a booted detailed run counts its boot unpriced

    def check_options(self, spec) -> None:
        if spec.warmup_insns and not 0 < spec.warmup_insns < 10**13:
            raise TimingError(f"--warmup-insns: expected a positive instruction count below 1e13, got "
                              f"{spec.warmup_insns}")
        if spec.warmup_insns and spec.boot:
            raise TimingError("--warmup-insns: a restored run's (a booted detailed run counts its boot "
                              "unpriced up to the experiment's marker; a warm-up needs the restore before it)")

    def stalls_reach_guest(self, spec) -> bool:
        return not spec.no_stalls and spec.qemu_mode == "icount"

    def limitation(self, topo, stalls: bool) -> str:
        how = ("its stalls are charged to the vCPU clocks, so the guest feels them" if stalls else
               "the guest does not feel its latencies (reported beside the guest's figures)")
        from timing import claims
        return (f"timing model detailed: {how}; model version {timing.MODEL_VERSION}: "
                f"{topo.core.describe()}; private L1D/L2, MESI directory, hops, queueing and bandwidth caps on "
                f"controllers and links modeled; {claims.core(topo)}; {claims.translation(topo)}; "
                f"{claims.l3(topo)}; rep string instructions count one instruction per iteration")


class Sampled(TimingMode):
    """The run is a fast profile; its SimPoint regions then run detailed
    from checkpoints (pipeline/sampled.py), and the whole run's figures are
    estimated from them."""
    name = "sampled"
    plugin = "fast"
    slowdown = 1.5       # its fast profile (the regions have their own limits)
    boot_slowdown = 1.5
    simpoint_profile = True

    def check(self, spec, topo) -> None:
        super().check(spec, topo)
        plugin_config.check(topo, "detailed", spec.qemu_mode)  # its regions

    def check_options(self, spec) -> None:
        if not 1 <= spec.sample_max_k <= MAX_K:
            raise TimingError(f"--sample-max-k: expected 1..{MAX_K} clusters, got {spec.sample_max_k}")
        if not 0 <= spec.sample_warmup <= MAX_WARMUP:
            raise TimingError(f"--sample-warmup: expected 0..{MAX_WARMUP} slices of warm-up, got "
                              f"{spec.sample_warmup}")
        if not 0 <= spec.sample_functional <= MAX_WARMUP:
            raise TimingError(f"--sample-functional: expected 0..{MAX_WARMUP} slices of functional warm-up, "
                              f"got {spec.sample_functional}")
        if spec.sample_workers < 1:
            raise TimingError(f"--sample-workers: expected at least 1, got {spec.sample_workers}")
        if spec.warmup_insns:
            raise TimingError("--warmup-insns: not with --timing sampled (each region warms for --sample-warmup "
                              "slices)")
        super().check_options(spec)

    def check_start(self, boots_why: str | None) -> None:
        if boots_why:
            raise TimingError(f"--timing sampled: its regions start from snapshots, and this run cannot restore "
                              f"the machine's ({boots_why})")

    def key(self, spec) -> dict:
        out = super().key(spec)
        out["sample"] = {"max_k": spec.sample_max_k, "warmup": spec.sample_warmup}  # not its workers
        if spec.sample_functional:  # a run without one keeps the key it had before functional warm-up existed
            out["sample"]["functional"] = spec.sample_functional
        return out

    def region_config(self, spec, topo, out_dir, symbols, plugin_mode: str) -> PluginConfig:
        """A checkpoint segment's (plugin_mode fast) or a region's (detailed),
        restored: TLBs reset where checkpoints are taken, as in the profile."""
        return PluginConfig(mode=plugin_mode, out=out_dir / "timing.json", symbols=symbols, bbv_dir=out_dir,
                            interval=spec.slice_insns, qemu_mode=spec.qemu_mode, stalls=not spec.no_stalls,
                            restored=True, checkpoint_points=True)

    def limitation(self, topo, stalls: bool) -> str:
        return ("timing model sampled: the guest ran under the fast profile (its own figures are those of a "
                "run without stalls); the modeled figures are estimates from SimPoint regions run detailed "
                "from checkpoints, each a warm-up (functional with --sample-functional: the model warms, "
                "nothing charged; then priced) and one slice (sample_regions, sample_estimates), so they "
                "carry the clustering's and the warm-up's error, and the fast profile's history (its kernel's "
                "work, idle time and lock contention, which a timed run changes: docs/sampling.md); elapsed "
                "is the regions' busy time per instruction plus the idle time the profile measured (x86 HLT; "
                "Alpha's is all per instruction); "
                "every checkpoint is checked against the profile (its vCPUs within 0.01 % of a slice of the "
                "profile's; one restored from another that leaves the path is taken again from the snapshot "
                "after boot: sampled.checkpoints_retaken); per-phase figures are not estimated")

    def finish(self, run) -> str:
        return run.sample_regions() if run.status == "ok" else run.status


MODES: dict[str, TimingMode] = {m.name: m for m in (Off(), Fast(), Detailed(), Sampled())}
NAMES = tuple(MODES)
AUTO = "auto"        # --timing's default: the accurate machine wherever it can run
CHOICES = (AUTO, *NAMES)


def get(name: str) -> TimingMode:
    """The mode called `name` (--timing, or a run row's timing_mode)."""
    if name not in MODES:
        raise TimingError(f"--timing: expected one of {', '.join(CHOICES)}, got {name!r}")
    return MODES[name]


def resolve(name: str, qemu_mode: str, plugin_loads: bool) -> tuple[TimingMode, str]:
    """The mode a run asked for as `name`; `auto` is detailed (the accurate
    machine) unless the run cannot load the model (plugin_loads: the engine
    can; qemu_mode: the model needs per-vCPU clocks), then off, with why."""
    if name != AUTO:
        return get(name), ""
    if not plugin_loads:
        return MODES["off"], "this engine cannot load the timing plugin"
    if qemu_mode != "icount":
        return MODES["off"], f"--qemu-mode {qemu_mode} cannot run the timing model (it needs icount)"
    return MODES["detailed"], ""
