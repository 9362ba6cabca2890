"""Guest kernels, built: a variant's (images/variants.py) source tree
unpacked from its line's Debian source package, switched to its patch set,
configured from its fragments on top of allnoconfig and built out of tree
with ccache into a cache directory named by its key.

Every patch set of an arch x flavor builds in one shared tree (work_source),
so switching sets recompiles only what the sets change.
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
import time
from pathlib import Path

# build/SConstruct calls Variant, key and artifact_dir as kernel.NAME: it is in every
# run key (pipeline/buildkeys.py), so it keeps those names here rather than follow them.
from images.variants import (
    ARCHES,
    DEFAULT_LINE,
    LINES,
    BuildError,
    CompileError,
    Variant,
    all_patches,
    arch_fixes,
    artifact_dir,
    check_variant,
    components,
    fragments,
    key,
    line_version,
    series,
)


def pristine_source(cache: Path, line: str = DEFAULT_LINE) -> Path:
    ver = line_version(line)
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
            where = f"arch fixes {v.arch}" if p in arch_fixes(v.arch, v.line) else f"patch set {v.patchset}"
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
        "source_package": f"{LINES[v.line].package} {line_version(v.line)}", "release": release,
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
