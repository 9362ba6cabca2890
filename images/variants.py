"""What names a guest kernel and what its key hashes: the kernel lines
(a Debian source package each), the patch sets under images/patches/ and
their series, the config fragments of arch, line and flavor, and the
variant (arch x flavor x patch set[@line]) that images/kernel.py builds.

A kernel is named by its patch set, optionally with a line after `@`:
`vanilla` (the default line, 6.1), `vanilla@6.12`, `zone-reclaim-auto@6.1`.
The line travels inside the patch set's name, so every place a kernel is
named (--kernel a,b comparisons, studies, the run row's patch_set, the
build's arguments) carries it unchanged; `set@6.1` is the same kernel as
`set` (same key, same artifact). A patch set says which lines it applies to
(`lines:` in its series; a set without one was written for 6.1).

An artifact lives under the cache in a directory named by the hash of
everything that decides its content (source package version, fragments,
patches, the recipe's version), so an unchanged input is never rebuilt and
two variants never overwrite each other. Reading a kernel's name or key
needs no build tools: the run keys (pipeline/buildkeys.py) and the CLI's
option checks (run.py) use this module alone.
"""
from __future__ import annotations

import functools
import hashlib
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
KDIR = HERE / "kernel"
PATCHES = HERE / "patches"  # images/patches/<set>/series (+ README.md); vanilla = the empty set
# Per-arch fixes applied to every build of that arch after the patch set's
# series (e.g. Alpha: make 6.1.192 build at all); part of the cache key.
ARCH_FIXES = KDIR / "arch-fixes"
SOURCE_PACKAGE = "linux-source-6.1"
SOURCE_TARBALL = Path("/usr/src/linux-source-6.1.tar.xz")
# Bump when images/kernel.py's recipe changes what a build produces.
RECIPE_VERSION = "1"


@dataclass(frozen=True)
class Line:
    """A kernel line: the Debian source package its kernels are built from
    (bootstrap/apt-packages.txt installs it), the guest ISAs it builds, and
    its own config fragment on top of the arch's (images/kernel/<arch>-<line>.config,
    when the line needs one)."""
    name: str
    package: str
    tarball: Path
    arches: tuple[str, ...]


LINES = {
    "6.1": Line("6.1", SOURCE_PACKAGE, SOURCE_TARBALL, ("x86_64", "alpha")),
    # Memory tiers from HMAT (abstract distance of CPU-less nodes, 6.7+;
    # memory_tier_late_init for nodes without CPUs, 6.10+). x86_64 only: the
    # Alpha build fixes (images/kernel/arch-fixes/alpha) are for 6.1.
    "6.12": Line("6.12", "linux-source-6.12", Path("/usr/src/linux-source-6.12.tar.xz"), ("x86_64",)),
}
DEFAULT_LINE = "6.1"
LINE_SEP = "@"


def split_kernel(name: str) -> tuple[str, str]:
    """'set' or 'set@line' -> (set, line); the line is DEFAULT_LINE when not named."""
    base, sep, line = name.partition(LINE_SEP)
    return base, (line if sep else DEFAULT_LINE)


ARCHES = {
    "x86_64": {"make_arch": "x86_64", "cross": "", "image": "arch/x86/boot/bzImage", "target": "bzImage"},
    # QEMU's clipper loads the ELF vmlinux itself (its PALcode comes with QEMU).
    "alpha": {"make_arch": "alpha", "cross": "alpha-linux-gnu-", "image": "vmlinux", "target": "vmlinux"},
}
FLAVORS = ("default", "lockstat", "mglru")


class BuildError(RuntimeError):
    """Bad input the build found (status 2): a patch that does not apply, a
    missing source, an option Kconfig dropped."""
    status = 2


class CompileError(BuildError):
    """make itself failed (status 1)."""
    status = 1


@dataclass(frozen=True)
class Variant:
    arch: str = "x86_64"
    flavor: str = "default"
    patchset: str = "vanilla"   # a patch set, optionally `@line` (split_kernel)

    def label(self) -> str:
        return f"{self.arch}/{self.flavor}/{self.patchset}"

    @property
    def set(self) -> str:
        """The patch set without its line."""
        return split_kernel(self.patchset)[0]

    @property
    def line(self) -> str:
        return split_kernel(self.patchset)[1]

    @property
    def tree(self) -> str:
        """The shared source and build tree of its arch x flavor (x line):
        `x86_64-default` for the default line, as before lines existed."""
        return f"{self.arch}-{self.flavor}" + ("" if self.line == DEFAULT_LINE else f"{LINE_SEP}{self.line}")


def check_variant(v: Variant) -> None:
    if v.arch not in ARCHES:
        raise BuildError(f"--arch: expected one of {', '.join(ARCHES)}, got {v.arch!r}")
    if v.flavor not in FLAVORS:
        raise BuildError(f"--flavor: expected one of {', '.join(FLAVORS)}, got {v.flavor!r}")
    name, line = split_kernel(v.patchset)
    if line not in LINES:
        raise BuildError(f"--kernel: expected a kernel line after '{LINE_SEP}' in {v.patchset!r}: one of "
                         f"{', '.join(LINES)} (images/variants.py LINES), got {line!r}")
    if v.arch not in LINES[line].arches:
        raise BuildError(f"--kernel: kernel line {line} builds {', '.join(LINES[line].arches)} guests, not "
                         f"{v.arch} (this topology's guest_isa), got {v.patchset!r}")
    if name != "vanilla" and not (PATCHES / name / "series").is_file():
        known = ", ".join(patchsets())
        raise BuildError(f"--kernel: expected a patch set under images/patches/ ({known}), optionally with "
                         f"{LINE_SEP}LINE ({', '.join(LINES)}), got {v.patchset!r}")
    if line not in set_lines(name):
        f = PATCHES / name / "series"
        raise BuildError(f"{f}: field 'lines': patch set {name} applies to kernel line(s) "
                         f"{', '.join(set_lines(name))}, not {line} (asked: {v.patchset!r})")


def patchsets() -> list[str]:
    return sorted({"vanilla"} | {p.parent.name for p in PATCHES.glob("*/series")})


def set_lines(patchset: str) -> list[str]:
    """The kernel lines a set's patches are written for: its series' `lines:`
    (e.g. `lines: 6.1 6.12`); a set without one was written for 6.1, and the
    empty set `vanilla` applies to every line."""
    name = split_kernel(patchset)[0]
    f = PATCHES / name / "series"
    if name == "vanilla" and not f.exists():
        return list(LINES)
    for line in f.read_text().splitlines():
        if line.strip().startswith("lines:"):
            return line.split("#", 1)[0].split(":", 1)[1].split()
    return [DEFAULT_LINE]


def series(patchset: str) -> list[Path]:
    """The ordered patches of a set (a `set@line` name: its set's); `vanilla` is the empty set."""
    patchset = split_kernel(patchset)[0]
    f = PATCHES / patchset / "series"
    if patchset == "vanilla" and not f.exists():
        return []
    return _read_series(f)


def _read_series(f: Path) -> list[Path]:
    out = []
    for n, line in enumerate(f.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("lines:"):
            continue
        p = f.parent / line
        if not p.is_file():
            raise BuildError(f"{f}: line {n}: patch file {line!r} not found")
        out.append(p)
    return out


def components(patchset: str) -> list[str]:
    """What a set's patches announce at boot (`vmlab-patch: NAME`), in series
    order: a set stacked on another (a seed's fix on its period set) names
    every layer, so a run proves each one live."""
    names = []
    for p in series(patchset):
        for m in re.finditer(r'^\+.*"vmlab-patch: ([\w.-]+)', p.read_text(errors="replace"), re.M):
            if m.group(1) not in names:
                names.append(m.group(1))
    return names


def arch_fixes(arch: str, line: str = DEFAULT_LINE) -> list[Path]:
    """The arch's own fix series (empty for most arches), for the default
    line (the only line the arches with fixes build)."""
    f = ARCH_FIXES / arch / "series"
    return _read_series(f) if f.is_file() and line == DEFAULT_LINE else []


def all_patches(v: Variant) -> list[Path]:
    return series(v.patchset) + arch_fixes(v.arch, v.line)


def fragments(v: Variant) -> list[Path]:
    """The arch's fragment, the line's own on top (where the line has one),
    then the flavor's; a later fragment's value wins (check_config)."""
    frags = [KDIR / f"{v.arch}.config"]
    own = KDIR / f"{v.arch}-{v.line}.config"
    if v.line != DEFAULT_LINE and own.is_file():
        frags.append(own)
    if v.flavor != "default":
        frags.append(KDIR / f"{v.flavor}.config")
    return frags


@functools.cache  # key() asks on every call; dpkg-query is a process
def source_version(line: str = DEFAULT_LINE) -> str:
    """Debian package version of the line's source package (e.g. 6.1.192-2)."""
    pkg, tarball = LINES[line].package, LINES[line].tarball
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg],
                             capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        out = ""
    if not out or not tarball.is_file():
        raise BuildError(f"kernel source missing: install it with `apt-get install {pkg}` (or ./run.py, whose "
                         f"bootstrap installs bootstrap/apt-packages.txt)")
    return out


def line_version(line: str) -> str:
    # the default line asks with no argument (tests stand a fake in for source_version())
    return source_version() if line == DEFAULT_LINE else source_version(line)


def key(v: Variant) -> str:
    """The hash of everything that decides the kernel. The default line's
    text is exactly what it was before lines existed (its set's name without
    `@6.1`), so every 6.1 kernel, snapshot and run key stays as it was."""
    ln = LINES[v.line]
    h = hashlib.sha256()
    h.update(f"recipe {RECIPE_VERSION}\nsource {ln.package} {line_version(v.line)} "
             f"{ln.tarball.stat().st_size}\n{v.arch} {v.flavor} {v.set}\n".encode())
    for f in fragments(v) + all_patches(v):
        h.update(f"{f.name}\n".encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def artifact_dir(cache: Path, v: Variant) -> Path:
    name = v.set if v.line == DEFAULT_LINE else f"{v.set}{LINE_SEP}{v.line}"
    return cache / "kernels" / f"{v.arch}-{v.flavor}-{name}-{key(v)[:16]}"
