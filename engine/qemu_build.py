"""Engine stage: our QEMU, built from Debian's source of QEMU 10.0.2 plus the
patch series in engine/qemu-patches/ (as QFlex, MARSSx86 and SimBricks
build theirs).

The series is topics, one patch each, applied in `series` order. The QEMU
source files our series adds whole (the device lists, the scheduler's
headers, the vmlab-ctl device) are not patch hunks but real files under
engine/qemu-files/, each at its path inside the QEMU tree; they are copied
into the unpacked source before the patches are applied (the Kconfig and
meson.build hunks that build them stay in the patches), and a file QEMU
already has is refused.

The source is Debian's bookworm-backports upstream tarball, fetched with
`apt-get source` through a private deb-src list (the system's apt config is
not touched) and checked twice: against the SHA256 in the signed Sources
index, and against the SHA256 pinned here. The build is keyed by the hash of
tarball + series + configure flags + this recipe, lives under the cache, and
is never rebuilt for the same key; ccache makes a rebuild after a patch
change take about a minute. "The series" (its hash in the key and in the
label a run row names the engine by) is the patches and those files.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PATCHES = HERE / "qemu-patches"
FILES = HERE / "qemu-files"   # new QEMU source files of ours, at their paths in the QEMU tree
UPSTREAM_VERSION = "10.0.2"
ORIG_TARBALL = "qemu_10.0.2+ds.orig.tar.xz"
ORIG_SHA256 = "0901da33844a331bf8b3602b9c1fbd178e60b737c8e3ade678255bd090c9b9f1"
TARGETS = {"x86_64": "qemu-system-x86_64", "alpha": "qemu-system-alpha"}
# Only what vmlab runs: two system targets, TCG with plugins, the device
# lists in engine/qemu-files/configs/devices/ (vmlab.mak); firmware comes
# from Debian's packages (seabios, qemu-system-data: SeaBIOS,
# linuxboot_dma.bin, the clipper PALcode).
CONFIGURE = [
    "--target-list=x86_64-softmmu,alpha-softmmu", "--without-default-features", "--without-default-devices",
    "--with-devices-x86_64=vmlab", "--with-devices-alpha=vmlab", "--enable-plugins", "--enable-tcg",
    "--disable-download", "--disable-docs", "--disable-tools", "--disable-user", "--disable-kvm", "--disable-xen",
    "--disable-werror", "--disable-guest-agent", "--disable-install-blobs",
    "--firmwarepath=/usr/share/qemu:/usr/share/seabios:/usr/lib/ipxe/qemu",
]
# Bump when the recipe below changes what a build produces.
RECIPE_VERSION = "1"
APT_SRC = ("deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
           "http://deb.debian.org/debian bookworm-backports main\n")


class EngineBuildError(RuntimeError):
    """status 2: bad input (a patch that does not apply, a source that cannot
    be had); status 1: the build itself failed."""

    def __init__(self, msg: str, status: int = 2):
        super().__init__(msg)
        self.status = status


def series(patches: Path = PATCHES) -> list[Path]:
    f = patches / "series"
    if not f.is_file():
        raise EngineBuildError(f"{f}: missing (the QEMU patch series: one patch file name per line)")
    out = []
    for n, line in enumerate(f.read_text().splitlines(), 1):
        name = line.split("#", 1)[0].strip()
        if not name:
            continue
        p = patches / name
        if not p.is_file():
            raise EngineBuildError(f"{f}: line {n}: expected a patch file in {patches}, {name!r} is not there")
        out.append(p)
    return out


def qemu_files(files: Path = FILES) -> list[str]:
    """Our new QEMU source files: their paths inside the QEMU tree (relative
    to `files`), sorted. A missing folder is none."""
    if not files.is_dir():
        return []
    out = []
    for f in files.rglob("*"):
        if f.is_symlink() or not (f.is_file() or f.is_dir()):
            raise EngineBuildError(f"{f}: expected a plain file (engine/qemu-files holds QEMU source files)")
        if f.is_file():
            out.append(f.relative_to(files).as_posix())
    return sorted(out)


def series_sha256(patches: Path = PATCHES, files: Path = FILES) -> str:
    """The series' hash: every patch in order, then every file of ours."""
    h = hashlib.sha256()
    for p in series(patches):
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    for rel in qemu_files(files):
        h.update(b"file\0" + rel.encode() + b"\0" + (files / rel).read_bytes() + b"\0")
    return h.hexdigest()


def key(patches: Path = PATCHES, files: Path = FILES) -> str:
    h = hashlib.sha256()
    for part in (ORIG_SHA256, series_sha256(patches, files), " ".join(CONFIGURE), RECIPE_VERSION):
        h.update(part.encode() + b"\0")
    return h.hexdigest()


def engine_dir(cache: Path, patches: Path = PATCHES, files: Path = FILES) -> Path:
    return cache / "qemu" / f"{UPSTREAM_VERSION}-{key(patches, files)[:16]}"


def binary(cache: Path, isa: str, patches: Path = PATCHES, files: Path = FILES) -> Path:
    return engine_dir(cache, patches, files) / "bin" / TARGETS[isa]


def label(patches: Path = PATCHES, files: Path = FILES) -> str:
    """What a run row names the engine by."""
    return (f"QEMU {UPSTREAM_VERSION} (Debian {ORIG_TARBALL}) + vmlab series "
            f"{series_sha256(patches, files)[:12]}")


def debian_version() -> str:
    """The installed Debian QEMU binary package (for `--engine debian`)."""
    r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "qemu-system-x86"], capture_output=True, text=True)
    return r.stdout.strip() or "not installed"


# --- the source --------------------------------------------------------------------
def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _say(msg: str) -> None:
    print(msg, flush=True)


def fetch_source(cache: Path, log=_say) -> Path:
    """Debian's upstream tarball of QEMU 10.0.2, cached; checked against the
    signed Sources index and the pinned SHA256."""
    dst = cache / "qemu-source" / ORIG_TARBALL
    if dst.is_file() and _sha256(dst) == ORIG_SHA256:
        return dst
    work = cache / "qemu-source" / "apt.work"
    shutil.rmtree(work, ignore_errors=True)
    (work / "lists" / "partial").mkdir(parents=True)
    (work / "sources.list").write_text(APT_SRC)
    opts = ["-o", f"Dir::Etc::SourceList={work / 'sources.list'}", "-o", "Dir::Etc::SourceParts=/nonexistent",
            "-o", f"Dir::State::Lists={work / 'lists'}"]
    log(f"  qemu: fetching Debian's {ORIG_TARBALL} with apt-get source (deb-src bookworm-backports) ...")
    r = subprocess.run(["apt-get", "-q", *opts, "update"], capture_output=True, text=True)
    if r.returncode:
        raise EngineBuildError(f"apt-get update (deb-src bookworm-backports) failed: {r.stderr.strip()[-300:]}")
    uris = subprocess.run(["apt-get", *opts, "source", "--print-uris", "qemu"], cwd=work,
                          capture_output=True, text=True)
    orig = [ln.split() for ln in uris.stdout.splitlines() if ln.startswith("'") and f" {ORIG_TARBALL} " in ln]
    if not orig:
        raise EngineBuildError(f"bookworm-backports' qemu source package no longer ships {ORIG_TARBALL} "
                               f"(apt-get source --print-uris qemu: {uris.stdout.strip()[-200:]}); the patch "
                               f"series in {PATCHES} is for QEMU {UPSTREAM_VERSION}")
    index_sha = orig[0][3].split(":", 1)[1]
    # The .dsc and .debian.tar of backports answer 404 here; the tarball is all we need.
    subprocess.run(["apt-get", *opts, "source", "--download-only", "qemu"], cwd=work, capture_output=True, text=True)
    tar = work / ORIG_TARBALL
    if not tar.is_file():
        raise EngineBuildError(f"apt-get source did not download {ORIG_TARBALL}; "
                               "check that deb.debian.org is reachable")
    got = _sha256(tar)
    if got != index_sha:
        raise EngineBuildError(f"{tar}: SHA256 {got} does not match the signed Sources index ({index_sha})")
    if got != ORIG_SHA256:
        raise EngineBuildError(f"{tar}: SHA256 {got} is not the pinned {ORIG_SHA256} (engine/qemu_build.py)")
    dst.parent.mkdir(parents=True, exist_ok=True)
    tar.rename(dst)
    shutil.rmtree(work, ignore_errors=True)
    return dst


# --- patching --------------------------------------------------------------------------
def add_files(tree: Path, files: Path = FILES) -> list[str]:
    """Copy our new QEMU source files into the unpacked tree, each to its
    path there; one that QEMU already has is refused (these are files the
    series adds, never changes to QEMU's: those are patches)."""
    names = qemu_files(files)
    for rel in names:  # all checked before any is copied
        if (tree / rel).exists() or (tree / rel).is_symlink():
            raise EngineBuildError(f"{files / rel}: QEMU {UPSTREAM_VERSION} already has {rel}; "
                                   f"{files} holds only files our series adds (change QEMU's with a patch)")
    for rel in names:
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(files / rel, tree / rel)
    return names


def apply_series(tree: Path, patches: list[Path]) -> None:
    """Apply each patch in order; the first that does not apply is named
    with its failing hunk."""
    for p in patches:
        r = subprocess.run(["patch", "-p1", "--forward", "--batch", "--no-backup-if-mismatch", "-r", "-",
                            "-d", str(tree), "-i", str(p)], capture_output=True, text=True)
        if r.returncode:
            out = (r.stdout + r.stderr).splitlines()
            where = ""
            for line in out:
                m = re.match(r"(?:patching file|checking file) (\S+)", line)
                if m:
                    where = m.group(1)
                if "FAILED" in line or "can't find file" in line.lower() or "malformed" in line.lower():
                    raise EngineBuildError(f"{p}: does not apply to QEMU {UPSTREAM_VERSION}: "
                                           f"{where + ': ' if where else ''}{line.strip()}")
            raise EngineBuildError(f"{p}: does not apply to QEMU {UPSTREAM_VERSION}: "
                                   f"{(out or ['patch failed'])[-1].strip()}")


# --- the build -------------------------------------------------------------------------
def build(cache: Path, patches: Path = PATCHES, jobs: int | None = None, log=_say, files: Path = FILES) -> Path:
    """Build (or find) our QEMU; return its directory (bin/, include/, meta.json)."""
    out = engine_dir(cache, patches, files)
    if (out / "meta.json").is_file():
        return out
    lockf = out.with_name(out.name + ".lock")
    lockf.parent.mkdir(parents=True, exist_ok=True)
    with open(lockf, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # concurrent first runs build it once
        if (out / "meta.json").is_file():
            return out
        return _build_locked(cache, patches, files, out, jobs, log)


def _build_locked(cache: Path, patches: Path, files: Path, out: Path, jobs: int | None, log) -> Path:
    pl = series(patches)
    tarball = fetch_source(cache, log)
    work = out.with_name(out.name + ".work")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    t0 = time.monotonic()
    log(f"  qemu: unpacking {tarball.name}, adding {len(qemu_files(files))} files of {files.name}/ and "
        f"applying {len(pl)} patches from {patches.name}/series ...")
    with tarfile.open(tarball) as t:
        t.extractall(work, filter="tar")
    src = next(work.glob("qemu-*"))
    added = add_files(src, files)
    apply_series(src, pl)
    bdir = work / "build"
    bdir.mkdir()
    blog = out.with_name(out.name + ".build.log")
    env = dict(os.environ, CCACHE_DIR=str(cache / "ccache"), CCACHE_BASEDIR=str(work), CCACHE_NOHASHDIR="1")
    cc = "ccache gcc" if shutil.which("ccache") else "gcc"
    cxx = "ccache g++" if shutil.which("ccache") else "g++"
    with open(blog, "w") as lf:
        r = subprocess.run([str(src / "configure"), "--python=/usr/bin/python3", f"--cc={cc}", f"--cxx={cxx}",
                            f"--objcc={cc}", *CONFIGURE], cwd=bdir, env=env, stdout=lf, stderr=subprocess.STDOUT)
    if r.returncode:
        raise EngineBuildError(f"QEMU configure failed (see {blog}): {_last_error(blog)}", status=1)
    log(f"  qemu: configured in {time.monotonic() - t0:.0f} s; compiling (ninja) ...")
    jobs = jobs or os.cpu_count() or 1
    last = 0.0
    with open(blog, "a") as lf:
        p = subprocess.Popen(["ninja", f"-j{jobs}", *TARGETS.values()], cwd=bdir, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, errors="replace")
        for line in p.stdout:
            lf.write(line)
            m = re.match(r"\[(\d+)/(\d+)\]", line)
            now = time.monotonic()
            if m and (now - last > 15 or m.group(1) == m.group(2)):
                last = now
                log(f"  qemu: {m.group(1)}/{m.group(2)} build steps, {now - t0:.0f} s")
        if p.wait():
            raise EngineBuildError(f"QEMU build failed at: {_last_error(blog)} (log: {blog})", status=1)
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "bin").mkdir(parents=True)
    (tmp / "include").mkdir()
    for name in TARGETS.values():
        shutil.copy2(bdir / name, tmp / "bin" / name)
    shutil.copy2(src / "include" / "qemu" / "qemu-plugin.h", tmp / "include" / "qemu-plugin.h")
    meta = {"upstream": UPSTREAM_VERSION, "tarball": ORIG_TARBALL, "tarball_sha256": ORIG_SHA256,
            "series": [p.name for p in pl], "files": added, "series_sha256": series_sha256(patches, files),
            "configure": CONFIGURE, "key": key(patches, files), "build_s": round(time.monotonic() - t0, 1)}
    (tmp / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    shutil.rmtree(work, ignore_errors=True)  # 750 MB of objects; ccache keeps what a rebuild needs
    log(f"  qemu: built in {time.monotonic() - t0:.0f} s -> {out}")
    return out


def _last_error(log: Path) -> str:
    lines = log.read_text(errors="replace").splitlines()
    for line in reversed(lines):
        if "error" in line.lower() or line.startswith("FAILED"):
            return line.strip()[:300]
    return (lines[-1].strip()[:300] if lines else "no output")


def load_meta(d: Path) -> dict:
    return json.loads((d / "meta.json").read_text())


if __name__ == "__main__":  # ./engine/qemu_build.py CACHE: build by hand
    try:
        print(build(Path(sys.argv[1])))
    except EngineBuildError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(e.status)
