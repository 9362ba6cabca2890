"""The build lock follows the build (build/wrapper.py): SCons holds
the cache's lock itself, so a caller killed outright leaves no build writing
the cache unlocked, and a caller interrupted in Python stops SCons and
everything under it before it lets go."""
import fcntl
import os
import signal
import subprocess
import sys
import time

import pytest

from build import wrapper
from tests.e2e import REPO


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead too
        return open(f"/proc/{pid}/stat").read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def _wait_for(path, timeout=20):
    end = time.time() + timeout
    while not path.exists() or not path.read_text().strip():
        assert time.time() < end, f"{path} never written"
        time.sleep(0.05)
    return path.read_text().split()


def test_the_build_keeps_the_lock_when_its_caller_dies(tmp_path):
    lockfile, pids = tmp_path / "build.lock", tmp_path / "pids"
    # The caller: takes the lock and runs a "build" that outlives it.
    caller = subprocess.Popen([sys.executable, "-c", f"""
import fcntl, sys
sys.path.insert(0, {str(REPO)!r})
from build import wrapper
w = wrapper
with open({str(lockfile)!r}, "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    w._scons([sys.executable, "-c",
              "import os, time; open({str(pids)!r}, 'w').write(str(os.getpid())); time.sleep(30)"],
             lock.fileno())
"""])
    build = int(_wait_for(pids)[0])
    caller.kill()  # outright: no Python cleanup runs
    caller.wait()
    assert _alive(build)
    with open(lockfile, "w") as other:
        with pytest.raises(BlockingIOError):  # the orphaned build still holds the lock
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.kill(build, signal.SIGKILL)
        end = time.time() + 10
        while _alive(build) and time.time() < end:
            time.sleep(0.05)
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free once the build is gone


def test_an_interrupted_caller_stops_the_build_and_its_children(tmp_path, monkeypatch):
    pids = tmp_path / "pids"
    w = wrapper
    # A "build" that starts a compiler-like child, reports both pids, then prints a line.
    script = ("import os, subprocess, sys, time\n"
              "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
              f"open({str(pids)!r}, 'w').write(f'{{os.getpid()}} {{c.pid}}')\n"
              "print('compiling', flush=True)\n"
              "time.sleep(60)\n")
    real_print = print

    def interrupted(*a, **k):
        if a and "compiling" in str(a[0]):
            raise KeyboardInterrupt
        real_print(*a, **k)
    monkeypatch.setattr("builtins.print", interrupted)
    with pytest.raises(KeyboardInterrupt):
        w._scons([sys.executable, "-c", script])
    monkeypatch.undo()
    scons, child = (int(x) for x in _wait_for(pids))
    end = time.time() + 10
    while (_alive(scons) or _alive(child)) and time.time() < end:
        time.sleep(0.05)
    assert not _alive(scons) and not _alive(child)


def test_the_kernel_builds_outside_the_build_lock_before_scons_runs(tmp_path, monkeypatch):
    """A kernel compiles under its own tree's lock, not the cache's build
    lock: while it does, other runs' builds (SCons, which finds it built)
    go on, and another tree can build beside it (a cold CI's two workers)."""
    from images import kernel, variants
    seen = []

    def kernel_build(cache, v, jobs=None):
        with open(cache / "build.lock", "w") as f:  # free now: not taken before the kernel
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        seen.append(("kernel", v.patchset))
        return cache / "kernels" / "k"

    def scons(args, lock_fd=None, log=None):
        with open(tmp_path / "build.lock", "w") as f:  # held by the wrapper now
            with pytest.raises(BlockingIOError):
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        seen.append(("scons", lock_fd is not None, log == tmp_path / "build.log"))
        (tmp_path / "initramfs").mkdir(exist_ok=True)
        (tmp_path / "initramfs" / "x86_64-memeater.cpio").write_bytes(b"cpio")
        return True
    monkeypatch.setattr(kernel, "build", kernel_build)
    monkeypatch.setattr(wrapper, "_scons", scons)
    built = wrapper.build(tmp_path, variants.Variant(patchset="vanilla"), "x86_64", "memeater")
    assert seen == [("kernel", "vanilla"), ("scons", True, True)] and built.userland == b"cpio"


def test_a_kernel_that_does_not_apply_fails_the_build_with_one_line_and_status_2(tmp_path, monkeypatch):
    from images import kernel, variants

    def kernel_build(cache, v, jobs=None):
        raise variants.BuildError("images/patches/x/0001.patch does not apply: Hunk #1 FAILED")
    monkeypatch.setattr(kernel, "build", kernel_build)
    with pytest.raises(wrapper.BuildFailed, match="does not apply") as e:
        wrapper.build(tmp_path, variants.Variant(), "x86_64", "memeater")
    assert e.value.status == 2 and not (tmp_path / "build.lock").exists()


def test_every_kernel_function_the_sconstruct_calls_is_there():
    """build/SConstruct is part of every run key (pipeline/buildkeys.py), so
    it cannot follow a function that moves: whatever `kernel.NAME(` it calls
    must still be in images/kernel.py (a missing one fails only a cold
    kernel build, in the slow tests)."""
    import re

    from images import kernel
    called = set(re.findall(r"\bkernel\.(\w+)\(", (REPO / "build" / "SConstruct").read_text()))
    assert {"build", "Variant", "key"} <= called
    assert not [n for n in called if not hasattr(kernel, n)]
