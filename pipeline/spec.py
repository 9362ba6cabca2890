"""What defines one run, as data: the CLI, a study and a cluster task all
build a RunSpec, and `prepare` checks it against the stages (topology,
experiment, kernel, engine, timing) before anything is built or written.

A run's key hashes what defines its result once resolved: the topology's
content (not its name), the experiment and every resolved parameter, the
kernel (patch set, flavor), how guest time is kept (engine, mode, quantum,
disk model, timing mode, stalls, HMAT, kernel command line), the seed,
the repeat index, whether it was restored from a snapshot, and the model's
warm-up (a sampled run's maxK and warm-up slices too), and what produces
its figures (pipeline/buildkeys.py: the engine build, the timing model, the
kernel build, the guest programs), so a study or `./run.py seeds` into a
database made before any of them changed runs again instead of reusing an
old figure. Limits (timeouts) and the host side's own code are not in it:
re-running after changing that is asked for with --rerun.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields

KEY_VERSION = 3  # bump when what the key covers changes (2: seed and repeat perturb the guest; 3: the builds)


class InputError(ValueError):
    """Bad input, found before a run: one line naming the file or option,
    the field and what was expected."""


@dataclass(frozen=True)
class RunSpec:
    topology: str = "gs1280-32"
    experiment: str = "memeater"
    params: tuple[tuple[str, str], ...] = ()   # overrides, as `--param name=value` gives them
    kernel: str = "vanilla"                     # one patch set of images/patches/
    flavor: str = "default"
    qemu_mode: str = "icount"
    quantum_ns: float = 1000
    engine: str = "vmlab"
    disk: str | None = None                     # a disks.toml model, 'host', or the topology's
    timing: str = "auto"                        # detailed where it can run, else off (timing/modes.py resolve)
    no_stalls: bool = False
    no_hmat: bool = False
    no_profile: bool = False                    # the plugin keeps no profile (it changes no guest figure: not keyed)
    timeout: float | None = None
    boot_timeout: float | None = None
    kernel_append: str = ""
    seed: int = 0
    repeat: int = 0                             # a study's repeat index: same inputs, its own key
    boot: bool = False                          # boot through, not restore the machine's snapshot
    warmup_insns: int = 0                       # detailed: instructions that warm the model before it counts
    slice_insns: int = 100_000_000              # basic-block vectors: instructions per interval
    sample_max_k: int = 10                      # --timing sampled: SimPoint's maxK
    sample_warmup: int = 1                      # --timing sampled: slices of detailed warm-up before each point
    sample_functional: int = 0                  # --timing sampled: slices of functional warm-up before those
    sample_workers: int = 2                     # --timing sampled: regions run at once (a local pool)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RunSpec:
        d = json.loads(text)
        names = {f.name for f in fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise InputError(f"run spec: unknown field(s) {', '.join(sorted(unknown))}")
        d["params"] = tuple(tuple(p) for p in d.get("params", ()))
        return cls(**d)

    def with_params(self, params: dict) -> RunSpec:
        return _replace(self, params=tuple(sorted((str(k), _text(v)) for k, v in params.items())))

    def param_args(self) -> list[str]:
        return [f"{k}={v}" for k, v in self.params]


def _replace(spec: RunSpec, **kw) -> RunSpec:
    return RunSpec(**{**asdict(spec), **kw})


def _text(v) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    return str(v)


def run_key(spec: RunSpec, topology_sha256: str, resolved_params: dict, disk_label: str | None,
            timing_key: dict, start: str = "booted", builds: dict | None = None) -> str:
    """sha256 of what defines the run's result (see the module's docstring).
    timing_key: the timing mode's part (timing/modes.py TimingMode.key, of
    the mode the run resolved to). start: "booted" or "restored" (from a
    snapshot after boot: the same inputs give other figures, so another key;
    a booted run keeps the key it had before snapshots existed). builds:
    what produces its figures (pipeline/buildkeys.build_keys)."""
    what = {
        "v": KEY_VERSION,
        "topology_sha256": topology_sha256,
        "experiment": spec.experiment,
        "params": {k: resolved_params[k] for k in sorted(resolved_params)},
        "kernel": spec.kernel, "flavor": spec.flavor,
        "engine": spec.engine, "qemu_mode": spec.qemu_mode,
        "quantum_ns": float(spec.quantum_ns) if spec.qemu_mode == "icount" else None,
        "disk": disk_label, **timing_key,
        "hmat": not spec.no_hmat, "kernel_append": spec.kernel_append.strip(),
        "seed": spec.seed, "repeat": spec.repeat,
    }
    if start != "booted":
        what["start"] = start
    if builds:
        what["builds"] = builds
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()


__all__ = ["InputError", "RunSpec", "run_key"]
