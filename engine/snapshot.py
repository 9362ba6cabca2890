"""Engine stage: boot once, run many.

A snapshot is the machine just after boot, saved once per machine and guest
and restored by every run that matches it:

- The machine that boots for it has fixed-size disks (swap, data, and a job
  disk the guest has not read) and the vmlab-ctl port (series patch 0006).
  Its /init, finding no job in its initramfs, waits for the disks to go
  quiet and asks for the snapshot itself (`vmlab-probe checkpoint`): QEMU
  stops after that instruction, so the snapshot is taken at a point the
  guest chose, never where the host happened to look. The host then saves
  it with `migrate file:` over QMP (patch 0006 adds the per-vCPU clocks to
  what QEMU saves) and quits.
- A run restores it (`-incoming file:`): the guest goes on from that
  instruction, pulls its job (programs, run.conf, knobs) from the job disk
  and proceeds as a booted run does. A perturbed repeat mixes its seed into
  the kernel's entropy there instead of on the command line.

The key hashes the snapshot machine's whole command line with every file
replaced by what it is (the kernel's and the boot initramfs's hashes, the
disks' sizes), our QEMU's build key and FORMAT: topology content, clock
configuration (cycle, quantum, PAUSE price), disk model, kernel command line
and HMAT all reach the guest through that command line. The timing plugin
does not (a restore loads it; the snapshot is taken without it).
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from engine import qemu
from engine.base import SnapshotError
from engine.machine import Machine, sparse  # noqa: F401  (sparse: this module's disks, and regions')

FORMAT = 1                 # bump when what a snapshot holds or how it is taken changes
JOB_DISK_MIB = 64          # the job channel's capacity: header + programs + run files
JOB_HEADER = 4096
SWAP_DISK_FACTOR = 4       # the swap disk holds swap up to 4x the guest's memory
DATA_DISK_FACTOR = 8       # the data disk: up to 8x the guest's memory, plus DATA_DISK_EXTRA_MIB
DATA_DISK_EXTRA_MIB = 1024
STATE = "state.mig"
MAGIC = b"QEVM"            # QEMU's migration stream (migration/savevm.c QEMU_VM_FILE_MAGIC)


@dataclass(frozen=True)
class Disks:
    swap_mib: int
    data_mib: int
    job_mib: int = JOB_DISK_MIB


def disks_for(topo) -> Disks:
    mem = topo.total_memory_mib
    return Disks(SWAP_DISK_FACTOR * mem, DATA_DISK_FACTOR * mem + DATA_DISK_EXTRA_MIB)


def fits(topo, swap_mib: int, data_mib: int) -> str | None:
    """None if a run's swap and data fit the snapshot machine's disks, else why not."""
    d = disks_for(topo)
    if swap_mib > d.swap_mib:
        return f"its swap ({swap_mib} MiB) is larger than a snapshot machine's swap disk ({d.swap_mib} MiB)"
    if data_mib > d.data_mib:
        return f"its data disk ({data_mib} MiB) is larger than a snapshot machine's ({d.data_mib} MiB)"
    return None


def machine_command(m: Machine, *, binary: Path) -> list[str]:
    """The snapshot machine (m has its three disks: swap, data and job):
    booted to take the snapshot, restored by runs (with their own images,
    and the plugin if timed)."""
    return qemu.command_line(m.with_(qemu_mode="icount"), binary=binary, vcpu_clocks=True)


def key(topo, *, kernel_sha256: str, initrd_sha256: str, engine_key: str, quantum_ns: int, append: str,
        hmat: bool, disk) -> str:
    """What the snapshot depends on, hashed (see the module's docstring)."""
    d = disks_for(topo)
    m = Machine(topo, Path("@kernel"), Path("@initrd"), quantum_ns=quantum_ns, append=append, hmat=hmat,
                disk=disk, swap=Path(f"@swap-{d.swap_mib}M"), data=Path(f"@data-{d.data_mib}M"),
                job=Path(f"@job-{d.job_mib}M"))
    cmd = machine_command(m, binary=Path(f"@{qemu_target(topo)}"))
    what = {"format": FORMAT, "command": cmd, "kernel_sha256": kernel_sha256, "initrd_sha256": initrd_sha256,
            "engine": engine_key}
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()


def qemu_target(topo) -> str:
    from engine import qemu_build
    return qemu_build.TARGETS[topo.guest_isa]


def directory(cache: Path, k: str) -> Path:
    return Path(cache) / "snapshots" / k[:24]


def failed_dir(cache: Path, k: str) -> Path:
    return Path(cache) / "snapshots" / f"{k[:24]}.failed"


def check(sdir: Path, k: str) -> str | None:
    """None if the snapshot in sdir is whole and is the one keyed k, else
    what is wrong (missing, another key, truncated, not a QEMU stream)."""
    meta_f, state = sdir / "meta.json", sdir / STATE
    if not meta_f.is_file() or not state.is_file():
        return f"{sdir}: no snapshot"
    try:
        meta = json.loads(meta_f.read_text())
    except (OSError, ValueError) as e:
        return f"{meta_f}: unreadable ({e})"
    if meta.get("key") != k:
        return f"{meta_f}: snapshot of another machine or build (key {str(meta.get('key'))[:12]}, expected {k[:12]})"
    size = state.stat().st_size
    if size != meta.get("size"):
        return f"{state}: {size} bytes, the snapshot wrote {meta.get('size')} (truncated or replaced)"
    with open(state, "rb") as f:
        if f.read(4) != MAGIC:
            return f"{state}: not a QEMU migration stream"
    return None


def job_image(path: Path, payload: bytes) -> None:
    """The job disk: a header block, then the payload (a newc cpio), in a
    sparse file of the snapshot machine's fixed size."""
    limit = JOB_DISK_MIB * 2**20 - JOB_HEADER
    if len(payload) > limit:
        raise SnapshotError(f"the job is {len(payload)} bytes; the job disk takes at most {limit} "
                            f"(engine/snapshot.py JOB_DISK_MIB = {JOB_DISK_MIB})")
    header = f"VMLABJOB 1 {len(payload)}\n".encode().ljust(JOB_HEADER, b"\0")
    with open(path, "wb") as f:
        f.write(header + payload)
        f.truncate(JOB_DISK_MIB << 20)


class Qmp:
    """The few QMP commands a snapshot needs, over a unix socket."""

    def __init__(self, path: Path, timeout: float = 30, alive=lambda: True):
        """Waits for QEMU's socket while alive() (QEMU still runs), up to
        timeout: its file appears at bind(), before listen(), and a connect
        in between is refused (a region's QEMU on a loaded host, 2026-11-27),
        so a missing or refusing socket is tried again."""
        until = time.monotonic() + timeout
        while True:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(timeout)
            try:
                self.sock.connect(str(path))
                break
            except (ConnectionRefusedError, FileNotFoundError):
                self.sock.close()
                if not alive() or time.monotonic() > until:
                    raise
                time.sleep(0.05)
        self.buf = b""
        self.events: list[dict] = []
        self._read()  # greeting
        self.cmd("qmp_capabilities")

    def _read(self) -> dict:
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise SnapshotError("QEMU closed its QMP socket")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def cmd(self, name: str, **args) -> dict:
        self.sock.sendall(json.dumps({"execute": name, **({"arguments": args} if args else {})}).encode() + b"\n")
        while True:
            msg = self._read()
            if "event" in msg:
                self.events.append(msg)
                continue
            if "error" in msg:
                raise SnapshotError(f"QMP {name}: {msg['error'].get('desc')}")
            return msg.get("return", {})

    def migrate_to(self, path: Path) -> None:
        """Save the (stopped) machine to a file and wait until it is written."""
        self.cmd("migrate", uri=f"file:{path}")
        while True:
            m = self.cmd("query-migrate")
            if m.get("status") == "completed":
                return
            if m.get("status") in ("failed", "cancelled"):
                raise SnapshotError(f"saving the machine failed: {m.get('error-desc', m.get('status'))}")
            time.sleep(0.05)

    def close(self) -> None:
        self.sock.close()


def take(cache: Path, k: str, command, timeout_s: float, log=print) -> Path:
    """The snapshot keyed k, taken now unless already whole in the cache.
    command(work) -> the snapshot machine's command line, its disk images
    made under work (never kept). One process takes a given snapshot;
    others wait on its lock."""
    sdir = directory(cache, k)
    sdir.parent.mkdir(parents=True, exist_ok=True)
    with open(sdir.parent / f"{k[:24]}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        why = check(sdir, k)
        if why is None:
            return sdir
        if sdir.exists():
            log(f"  snapshot: {why}; taking it again")
        work = Path(tempfile.mkdtemp(prefix=f"{k[:24]}.", dir=sdir.parent))
        try:
            _take(work, k, command, timeout_s, log)
        except (SnapshotError, OSError) as e:
            # keep the console and QEMU's log of the boot that failed
            failed = failed_dir(cache, k)
            shutil.rmtree(failed, ignore_errors=True)
            (work / STATE).unlink(missing_ok=True)
            work.rename(failed)
            panic = qemu.PANIC.search((failed / "console.log").read_text(errors="replace")) \
                if (failed / "console.log").exists() else None
            raise SnapshotError(f"{panic.group(0) if panic else e} (the boot's console: {failed / 'console.log'})") \
                from None
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)  # Ctrl-C: nothing half-taken stays
            raise
        shutil.rmtree(sdir, ignore_errors=True)
        work.rename(sdir)
    return sdir


def _take(work: Path, k: str, command, timeout_s: float, log) -> None:
    t0 = time.monotonic()
    sock = Path(tempfile.mkdtemp(prefix="vmlab-qmp-")) / "qmp"  # unix socket paths are short
    try:
        # the disks' contents are never kept: a run brings fresh ones of these sizes
        cmd = command(work) + ["-qmp", f"unix:{sock},server=on,wait=off", "-serial", f"file:{work / 'console.log'}",
                     # a restore then starts the machine itself (no `cont` over QMP)
                     "-global", "migration.store-global-state=off"]
        log(f"  snapshot: booting the machine to snapshot (key {k[:12]}) ...")
        with open(work / "qemu.log", "wb") as ql:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=ql, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        try:
            try:
                q = Qmp(sock, alive=lambda: proc.poll() is None)
            except OSError as e:
                if proc.poll() is not None:
                    raise SnapshotError(f"QEMU exited ({proc.returncode}) before the snapshot; see {work}/qemu.log") \
                        from None
                raise SnapshotError(f"QEMU's QMP socket: {e}; see {work}/qemu.log") from None
            while True:
                status = q.cmd("query-status")["status"]
                if status == "paused":
                    break
                if proc.poll() is not None or status not in ("running", "prelaunch"):
                    raise SnapshotError(f"the guest stopped without asking for a snapshot ({status}); "
                                        f"see {work}/console.log")
                if time.monotonic() - t0 > timeout_s:
                    raise SnapshotError(f"timeout: the guest did not ask for a snapshot within {timeout_s:.0f} s; "
                                        f"see {work}/console.log")
                time.sleep(0.25)
            booted = time.monotonic() - t0
            q.migrate_to(work / STATE)
            saved = time.monotonic() - t0 - booted
            q.cmd("quit")
            q.close()
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        size = (work / STATE).stat().st_size
        # each vCPU's instructions at the snapshot (QEMU prints them as it quits):
        # a restored run's counts less these are what the run itself executed
        insns = [n for _cpu, n, _stall, _clock in sorted(qemu.vcpu_clocks(work / "qemu.log"))]
        meta = {"key": k, "format": FORMAT, "size": size, "taken_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "boot_wall_s": round(booted, 1), "save_wall_s": round(saved, 1), "vcpu_insns": insns,
                "command_line": cmd}
        (work / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
        log(f"  snapshot: booted in {booted:.0f} s, saved {size / 2**20:.0f} MiB in {saved:.1f} s")
    finally:
        for img in work.glob("*.img"):
            img.unlink()
        shutil.rmtree(sock.parent, ignore_errors=True)


def restore_args(sdir: Path) -> list[str]:
    return ["-incoming", f"file:{sdir / STATE}"]


def sizes(cache: Path) -> list[tuple[Path, int]]:
    """Every snapshot in the cache and the bytes it takes on disk."""
    root = Path(cache) / "snapshots"
    return [(d, _du(d)) for d in sorted(root.glob("*")) if d.is_dir() and "." not in d.name] if root.exists() else []


def prune(cache: Path) -> int:
    """Delete every snapshot (each is taken again when a run needs it), the
    consoles of failed snapshot boots, and what a killed process left half
    taken; a snapshot being taken now (its lock held) is left alone. Bytes freed."""
    root = Path(cache) / "snapshots"
    freed = 0
    for lockf in sorted(root.glob("*.lock")) if root.exists() else []:
        with open(lockf, "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            for d in root.glob(lockf.stem + "*"):
                if d.is_dir():
                    freed += _du(d)
                    shutil.rmtree(d, ignore_errors=True)
            lockf.unlink()
    return freed


def _du(d: Path) -> int:
    return sum(f.stat().st_blocks * 512 for f in d.rglob("*") if f.is_file())
