"""What produces a run's figures beyond its inputs, for its key: the engine
build (our QEMU's series, or Debian's package), the timing model (its
version and the plugin's sources, for a run that loads it), the kernel build
(source package, config fragments, patch set) and the guest programs (the
experiment's sources, the guest library, /init and the probe, and the build
recipe that compiles them). A run whose key is already `ok` is skipped by a
study or `./run.py seeds`: with these in the key, a change to any of them
runs it again instead of reusing a figure another engine, model or kernel
made.

Each part is hashed from files in the repository (and the installed kernel
source package's version), so computing the key builds nothing.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import timing
from images import variants

REPO = Path(__file__).resolve().parent.parent
# what compiles and packs the guest's programs, beside the experiment's own sources
GUEST_SIDE = [REPO / "experiments" / "lib", REPO / "images" / "initramfs", REPO / "images" / "initramfs.py",
              REPO / "build" / "SConstruct"]


def _files_sha256(paths) -> str:
    h = hashlib.sha256()
    for p in paths:
        files = sorted(q for q in p.rglob("*") if q.is_file()) if p.is_dir() else [p]
        for f in files:
            name = f.relative_to(REPO) if f.is_relative_to(REPO) else f
            h.update(str(name).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def programs_sha256(exp) -> str:
    """The guest programs' inputs: the experiment's sources and the guest side."""
    return _files_sha256([*exp.programs, *GUEST_SIDE])


def model_sha256() -> str:
    """The timing model's version and every source of the plugin."""
    return f"{timing.MODEL_VERSION} " + _files_sha256(timing.SOURCES)


def build_keys(engine, mode, exp, variant) -> dict[str, str]:
    """engine, model (when the timing mode loads the plugin), kernel,
    programs: what the run key adds."""
    out = {"engine": engine.build_key(), "kernel": variants.key(variant), "programs": programs_sha256(exp)}
    if mode.loads_plugin:
        out["model"] = model_sha256()
    return out
