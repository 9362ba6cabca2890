"""Guest kernels: a kernel line's Debian source package (linux-source-6.1,
or linux-source-6.12) + a committed config fragment (+ the line's own, +
flavor) + a named patch set, built out of tree with ccache.

A kernel is named by its patch set, optionally with a line after `@`:
`vanilla` (the default line, 6.1), `vanilla@6.12`, `zone-reclaim-auto@6.1`.
The line travels inside the patch set's name, so every place a kernel is
named (--kernel a,b comparisons, studies, the run row's patch_set, the
build's arguments) carries it unchanged; `set@6.1` is the same kernel as
`set` (same key, same artifact). A patch set says which lines it applies to
(`lines:` in its series; a set without one was written for 6.1).

An artifact lives under the cache in a directory named by the hash of
everything that decides its content (source package version, fragments,
patches, this recipe), so an unchanged input is never rebuilt and two
variants never overwrite each other.
"""
from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
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
# Bump when the recipe below changes what a build produces.
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
                         f"{', '.join(LINES)} (images/kernel.py LINES), got {line!r}")
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


def _version(line: str) -> str:
    # the default line asks with no argument (tests stand a fake in for source_version())
    return source_version() if line == DEFAULT_LINE else source_version(line)


def key(v: Variant) -> str:
    """The hash of everything that decides the kernel. The default line's
    text is exactly what it was before lines existed (its set's name without
    `@6.1`), so every 6.1 kernel, snapshot and run key stays as it was."""
    ln = LINES[v.line]
    h = hashlib.sha256()
    h.update(f"recipe {RECIPE_VERSION}\nsource {ln.package} {_version(v.line)} "
             f"{ln.tarball.stat().st_size}\n{v.arch} {v.flavor} {v.set}\n".encode())
    for f in fragments(v) + all_patches(v):
        h.update(f"{f.name}\n".encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def artifact_dir(cache: Path, v: Variant) -> Path:
    name = v.set if v.line == DEFAULT_LINE else f"{v.set}{LINE_SEP}{v.line}"
    return cache / "kernels" / f"{v.arch}-{v.flavor}-{name}-{key(v)[:16]}"


# --- build steps -------------------------------------------------------------
def pristine_source(cache: Path, line: str = DEFAULT_LINE) -> Path:
    ver = _version(line)
    pkg, tarball = LINES[line].package, LINES[line].tarball
    dst = cache / "src" / f"{pkg}_{ver}"
    if (dst / "Makefile").is_file():
        return dst
    dst.parent.mkdir(parents=True, exist_ok=True)
    # two trees (arch x flavor) building at once unpack it once
    with open(dst.parent / f"{dst.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (dst / "Makefile").is_file():
            return dst
        tmp = dst.with_name(dst.name + ".partial")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        print(f"  kernel: unpacking {tarball} ...", flush=True)
        subprocess.run(["tar", "-xf", str(tarball), "-C", str(tmp), "--strip-components=1"], check=True)
        tmp.rename(dst)
    return dst


def patched_files(patches: list[Path]) -> list[str]:
    """Source paths (relative, -p1) that a series changes."""
    out = []
    for p in patches:
        for line in p.read_text(errors="replace").splitlines():
            if line.startswith("+++ "):
                path = line[4:].split("\t")[0].strip()
                path = path.split("/", 1)[1] if "/" in path else path
                if path != "/dev/null" and path not in out:
                    out.append(path)
    return out


def work_source(cache: Path, v: Variant) -> Path:
    """The shared source tree of an arch x flavor, switched to v's patch set.

    Every patch set of an arch x flavor builds in ONE source tree and ONE
    build directory, so switching sets is an incremental build: only the
    files a set changes (and the files the previous set had changed) are
    recompiled. The tree is a hard-link copy of the pristine source; a
    switch first puts back fresh copies of what the last set changed (new
    mtimes, so make rebuilds them), then applies the new series. Callers
    hold the arch x flavor lock (build()).
    """
    base = pristine_source(cache, v.line)
    work = cache / "work" / v.tree
    state_f = work / ".vmlab-applied"
    if state_f.is_file() and json.loads(state_f.read_text()).get("source") != base.name:
        # Another source version (the pinned one moved, or a host installed
        # another): start the tree and its build directory over, since the
        # objects there could look newer than this source's files to make.
        shutil.rmtree(cache / "build" / v.tree, ignore_errors=True)
        shutil.rmtree(work)
    if not state_f.is_file():
        tmp = work.with_name(work.name + ".partial")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
        tmp.parent.mkdir(parents=True, exist_ok=True)
        # Hard links: patch(1) writes a new file and renames it, so the
        # pristine tree stays intact and the copy costs no disk.
        subprocess.run(["cp", "-al", str(base), str(tmp)], check=True)
        (tmp / ".vmlab-applied").write_text(json.dumps({"patchset": "vanilla", "files": [], "source": base.name}))
        tmp.rename(work)
    state = json.loads(state_f.read_text())
    patches = all_patches(v)  # the set's series, then the arch's fixes
    if state["patchset"] == v.set and state.get("series") == _series_hash(patches):
        return work
    for rel in state["files"]:  # back to pristine, with a new mtime
        dst = work / rel
        dst.unlink(missing_ok=True)
        if (base / rel).is_file():
            shutil.copyfile(base / rel, dst)
    state = {"patchset": "vanilla", "files": [], "source": base.name}
    state_f.write_text(json.dumps(state))
    files = patched_files(patches)
    # Record the files first: a half-applied series is reverted next time.
    state_f.write_text(json.dumps({**state, "patchset": "(partial)", "files": files}))
    for p in patches:
        r = subprocess.run(["patch", "-p1", "--forward", "--no-backup-if-mismatch", "-d", str(work), "-i", str(p)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            hunks = [s for s in r.stdout.splitlines() if "FAILED" in s or "can't find" in s.lower()]
            rej = ""
            for line in r.stdout.splitlines():
                m = re.search(r"saving rejects to file (\S+)", line)
                if m and (work / m.group(1)).exists():
                    rej = (work / m.group(1)).read_text(errors="replace")[:2000]
                    (work / m.group(1)).unlink()
            where = f"arch fixes {v.arch}" if p.parent.parent == ARCH_FIXES else f"patch set {v.patchset}"
            raise BuildError(f"{where}: {p.name} does not apply: "
                             f"{'; '.join(hunks) or r.stdout.strip()[-300:]}\n{rej}")
    state_f.write_text(json.dumps({**state, "patchset": v.set, "files": files,
                                   "series": _series_hash(patches)}))
    return work


def _series_hash(patches: list[Path]) -> str:
    return hashlib.sha256(b"".join(p.read_bytes() for p in patches)).hexdigest()


def check_config(config: Path, frags: list[Path]) -> None:
    """Every symbol a fragment sets must survive Kconfig's dependency solver;
    a symbol set again by a later fragment (a line's own) is checked at its
    last value, as the merged fragment gives it to Kconfig."""
    have = {}
    for line in config.read_text().splitlines():
        m = re.match(r"(CONFIG_\w+)=(.*)", line) or re.match(r"# (CONFIG_\w+) is not set", line)
        if m:
            have[m.group(1)] = m.group(2) if m.lastindex == 2 else "n"
    wanted: dict[str, tuple[str, Path, int]] = {}
    for f in frags:
        for n, line in enumerate(f.read_text().splitlines(), 1):
            m = re.match(r"(CONFIG_\w+)=(.*)", line.strip())
            if m:
                wanted.pop(m.group(1), None)  # re-inserted: checked in the order of its last setting
                wanted[m.group(1)] = (m.group(2), f, n)
    for sym, (want, f, n) in wanted.items():
        got = have.get(sym, "n")
        if want != got:
            raise BuildError(f"{f}: line {n}: {sym}={want} was not taken by Kconfig "
                             f"(final .config has {got}); a dependency is missing from the fragment")


def _merged_fragment(frags: list[Path], dst: Path) -> Path:
    dst.write_text("".join(f.read_text() + "\n" for f in frags))
    return dst


def build(cache: Path, v: Variant, jobs: int | None = None) -> Path:
    """Build (or find) the kernel for a variant; return its artifact dir."""
    check_variant(v)
    out = artifact_dir(cache, v)
    if (out / "meta.json").is_file():
        return out
    lockf = cache / "work" / f"{v.tree}.lock"
    lockf.parent.mkdir(parents=True, exist_ok=True)
    with open(lockf, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build per arch x flavor tree at a time
        if (out / "meta.json").is_file():  # built meanwhile by another process
            return out
        return _build_locked(cache, v, out, jobs, lock.fileno())


def _build_locked(cache: Path, v: Variant, out: Path, jobs: int | None, lock_fd: int) -> Path:
    """lock_fd: the tree's lock, inherited by make, so that a caller killed
    outright leaves no make writing the tree unlocked beside the next build."""
    a = ARCHES[v.arch]
    src = work_source(cache, v)
    bdir = cache / "build" / v.tree
    bdir.mkdir(parents=True, exist_ok=True)
    frags = fragments(v)
    allconfig = _merged_fragment(frags, bdir / "vmlab-fragment.config")
    env = dict(os.environ, ARCH=a["make_arch"], KBUILD_BUILD_TIMESTAMP="2005-05-24", KBUILD_BUILD_VERSION="1",
               KBUILD_BUILD_USER="vmlab", KBUILD_BUILD_HOST="vmlab",
               CCACHE_DIR=str(cache / "ccache"), CCACHE_BASEDIR=str(cache), CCACHE_NOHASHDIR="1")
    cc = f"ccache {a['cross']}gcc" if shutil.which("ccache") else f"{a['cross']}gcc"
    make = ["make", "-C", str(src), f"O={bdir}", f"CC={cc}"]
    if a["cross"]:
        make.append(f"CROSS_COMPILE={a['cross']}")
    log = bdir / "build.log"
    t0 = time.time()
    with open(log, "w") as lf:
        r = subprocess.run(make + [f"KCONFIG_ALLCONFIG={allconfig}", "allnoconfig"], env=env,
                           stdout=lf, stderr=subprocess.STDOUT)
    if r.returncode:
        raise CompileError(f"kernel {v.label()}: configuration failed, see {log}")
    check_config(bdir / ".config", frags)
    jobs = jobs or os.cpu_count() or 1
    stats_file = cache / "kernels" / "stats.json"
    stats = json.loads(stats_file.read_text()) if stats_file.is_file() else {}
    expected = stats.get(v.tree, 0)
    compiled = 0
    last = 0.0
    with open(log, "a") as lf:
        p = subprocess.Popen(make + [f"-j{jobs}", a["target"]], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, errors="replace", pass_fds=(lock_fd,))
        for line in p.stdout:
            lf.write(line)
            if line.startswith(("  CC ", "  AS ")):
                compiled += 1
            now = time.time()
            if now - last >= 15:
                last = now
                pct = f" (~{min(99, 100 * compiled // expected)}% of last build)" if expected else ""
                print(f"  kernel {v.label()}: {compiled} files compiled{pct}, {now - t0:.0f} s", flush=True)
        rc = p.wait()
    if rc:
        tail = "".join(log.read_text(errors="replace").splitlines(True)[-15:])
        raise CompileError(f"kernel {v.label()}: build failed, see {log}\n{tail}")
    release = subprocess.run(make + ["-s", "kernelrelease"], env=env, capture_output=True, text=True).stdout.strip()
    if compiled > 50:  # a full build; a small incremental one says nothing about the total
        stats[v.tree] = compiled
    stats_file.parent.mkdir(parents=True, exist_ok=True)
    stats_file.write_text(json.dumps(stats))
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    shutil.copy2(bdir / a["image"], tmp / "kernel")
    shutil.copy2(bdir / "System.map", tmp / "System.map")
    shutil.copy2(bdir / ".config", tmp / "config")
    meta = {
        "arch": v.arch, "flavor": v.flavor, "patchset": v.patchset, "line": v.line,
        "patches": [p.name for p in series(v.patchset)], "components": components(v.patchset),
        "arch_fixes": [p.name for p in arch_fixes(v.arch, v.line)],
        "source_package": f"{LINES[v.line].package} {_version(v.line)}", "release": release,
        "config_sha256": hashlib.sha256((bdir / ".config").read_bytes()).hexdigest(),
        "kernel_sha256": hashlib.sha256((bdir / a["image"]).read_bytes()).hexdigest(),
        "key": key(v), "build_s": round(time.time() - t0, 1), "files_compiled": compiled,
    }
    (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    print(f"  kernel {v.label()}: built {release} in {meta['build_s']:.0f} s ({compiled} files compiled)", flush=True)
    return out


def load_meta(artifact: Path) -> dict:
    return json.loads((artifact / "meta.json").read_text())


if __name__ == "__main__":  # handy for a manual build: python -m images.kernel CACHE [ARCH]
    print(build(Path(sys.argv[1]), Variant(sys.argv[2] if len(sys.argv) > 2 else "x86_64")))
