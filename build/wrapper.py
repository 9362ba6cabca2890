"""Build stage front: run SCons on build/SConstruct for what a run
needs and say whether anything was built."""
from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
# How build/SConstruct has SCons print each action it runs (a command line,
# or a Python action as `name([targets], [sources])`): marked, so that _scons
# keeps those lines for the build log and prints the recipes' progress lines.
ACTION = "scons: action: "
TAIL_LINES = 20  # of the build log, in a failed build's error


def print_action(s: str, target, source, env) -> None:
    """SCons's PRINT_CMD_LINE_FUNC (build/SConstruct): the action's line, marked."""
    print(ACTION + s, flush=True)


class BuildFailed(RuntimeError):
    """status: 2 for bad input the build found (a patch that does not
    apply), 1 for a build that failed."""

    def __init__(self, msg: str, status: int = 1):
        super().__init__(msg)
        self.status = status


@dataclass
class Built:
    kernel_dir: Path
    initramfs: Path
    rebuilt: bool
    qemu_dir: Path       # our QEMU (engine/qemu_build.py): bin/, include/, meta.json
    plugin: Path | None = None
    userland: bytes = b""  # the initramfs as built, read under the build lock
    boot_userland: bytes = b""  # a snapshot machine's boot initramfs (engine/snapshot.py), where the arch has one
    user_symbols: str = ""  # the programs' text symbols, kept beside the initramfs (images/initramfs.symbol_table)
    snapshot: tuple[str, Path] | None = None  # (key, directory) of the machine's snapshot, once taken
    snapshot_error: tuple[str, str] | None = None  # (key, why) when the boot for it failed: the run is failed


def build(cache: Path, variant, arch: str, experiment: str, timing: bool = False) -> Built:
    import timing as tm
    from engine import qemu_build
    from images import kernel, variants
    variants.check_variant(variant)
    kdir = variants.artifact_dir(cache, variant)
    initrd = cache / "initramfs" / f"{arch}-{experiment}.cpio"
    args = [sys.executable, "-m", "SCons", "-f", str(HERE / "SConstruct"), "-Q",
            f"repo={REPO}", f"cache={cache}", f"kernels={variant.arch}/{variant.flavor}/{variant.patchset}",
            f"experiments={arch}/{experiment}"]
    plugin = None
    if timing:
        plugin = tm.plugin_path(cache, qemu_build.key())
        args.append(f"timing={plugin}")
    cache.mkdir(parents=True, exist_ok=True)
    print(f"build: kernel {variant.label()}, initramfs {arch}/{experiment}, QEMU + vmlab series"
          f"{', timing plugin' if timing else ''} (cache {cache})", flush=True)
    # The kernel first, outside the build lock: it has its own lock per arch x
    # flavor tree (images/kernel.build), so while one run compiles a kernel
    # (minutes, a patch set's relink mostly on one core) runs whose images are
    # built go on, and another tree builds beside it (a cold CI: the lockstat
    # and the default tree at once). SCons below finds it built.
    try:
        kernel.build(cache, variant)
    except variants.BuildError as e:  # a patch that does not apply, a missing source: one line
        raise BuildFailed(str(e), e.status) from None
    # SCons prints each action it runs (and "... is up to date" otherwise):
    # any other line means something was built. What it prints goes to
    # cache/build.log; the terminal gets the recipes' progress lines.
    # From the repo root, with repo-relative paths in every command, so a
    # second checkout of the same sources finds its guest programs built.
    # One SCons at a time per cache: concurrent runs share its signature
    # database and its output paths (guest programs, initramfs archives).
    # The archive is read before the lock is released, so a run from another
    # checkout cannot swap it between this build and this run's boot.
    with open(cache / "build.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print("build: waiting for another run's build to finish", flush=True)
            fcntl.flock(lock, fcntl.LOCK_EX)
        rebuilt = _scons(args, lock.fileno(), log=cache / "build.log")
        userland = initrd.read_bytes()
        boot = cache / "initramfs" / f"{arch}-boot.cpio"
        boot_userland = boot.read_bytes() if boot.is_file() else b""
        syms = initrd.with_suffix(".syms")
        user_symbols = syms.read_text() if syms.is_file() else ""
    if not rebuilt:
        print("build: up to date, nothing built", flush=True)
    return Built(kdir, initrd, rebuilt, qemu_build.engine_dir(cache), plugin, userland, boot_userland,
                 user_symbols=user_symbols)


def _scons(args, lock_fd: int | None = None, log: Path | None = None) -> bool:
    """Run SCons; True if it built anything. All it prints goes to the log
    (replaced on each build); the terminal gets the rest but SCons's own
    lines (each action it runs, its `scons: ...` messages): the recipes'
    progress lines, and what a compiler says. A failed build's error ends
    with the log's last lines.

    lock_fd: the build lock, inherited by SCons so the lock lives as long as
    the build does: a caller killed outright (SIGKILL, a stopped study's
    prebuild) leaves no SCons writing the cache unlocked beside the next
    build (seen: a second build's sconsign rename failed under the orphan's).
    A caller interrupted in Python stops its SCons, and the compilers under
    it (their own process group), before letting go."""
    p = subprocess.Popen(args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                         pass_fds=() if lock_fd is None else (lock_fd,), start_new_session=True)
    rebuilt = False
    error = ""
    lf = open(log, "w") if log else None
    try:
        for line in p.stdout:
            if lf:
                lf.write(line.removeprefix(ACTION))
                lf.flush()
            if line.startswith("scons: `") and line.rstrip().endswith("is up to date."):
                continue
            rebuilt = True
            if line.startswith("scons: "):  # SCons's own: an action it runs, a failure's "scons: *** ..."
                continue
            if line.startswith("error: "):  # our recipes' one-line errors
                error = line[len("error: "):].strip()
                continue
            print(line, end="", flush=True)
    except BaseException:
        _stop_group(p)
        raise
    finally:
        if lf:
            lf.close()
    if p.wait():
        if error:
            raise BuildFailed(error, 2 if p.returncode == 2 else 1)
        if not log:
            raise BuildFailed(f"build failed (scons exit status {p.returncode}); see the messages above")
        tail = "".join(log.read_text(errors="replace").splitlines(True)[-TAIL_LINES:])
        raise BuildFailed(f"build failed (scons exit status {p.returncode}); the end of {log}:\n{tail.rstrip()}")
    return rebuilt


def _stop_group(p: subprocess.Popen) -> None:
    """SIGTERM to SCons's process group (make deletes its half-written
    target), SIGKILL after a minute."""
    for sig, wait in ((signal.SIGTERM, 60), (signal.SIGKILL, None)):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            return
        try:
            p.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue
