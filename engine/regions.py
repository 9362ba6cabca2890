"""Engine stage: checkpoints inside a run, and region runs from them
(SimPoint sampling; pipeline/sampled.py drives it, sampling/estimate.py
estimates from it).

- **Checkpoints**: the profiled run again (restored, fast, the same job),
  in segments: each restores the checkpoint before it (the first, the
  machine's snapshot after boot) and its timing plugin stops the machine
  a number of machine-wide slices later (`plugin.stop_after_slices`, series
  patch 0008); the host saves it with `migrate file:`, copies its disks
  (sparse) and quits. So the pass costs the run up to the last checkpoint.
  The plugin asks again at every block while a modelled disk request is
  outstanding (those are not in QEMU's migrated state); how late that made
  a checkpoint is kept.
- **A region run** restores one checkpoint, with copies of its disks, under
  the detailed model: its warm-up slices, then the measured slice, at whose
  end the plugin stops the machine and the host quits it; the plugin's
  results and slices are the region's figures.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from engine.base import RegionError
from engine.snapshot import STATE, Qmp, SnapshotError

DISKS = ("swap.img", "data.img", "job.img")
QMP_ARGS = ["-global", "migration.store-global-state=off"]  # a restore starts the machine itself



# Set (Ctrl-C in the thread that drives a pool of regions): every machine
# waiting for its stop is quit, so none runs on after the run is given up.
STOP = threading.Event()


def copy_disks(src: Path, dst: Path) -> None:
    """The machine's disks as they are now, sparse (only what the guest wrote takes space)."""
    dst.mkdir(parents=True, exist_ok=True)
    for name in DISKS:
        if (src / name).exists():
            subprocess.run(["cp", "--sparse=always", str(src / name), str(dst / name)], check=True)


def _stops(path: Path) -> list[dict]:
    """bbv.stops (timing/plugin_bbv.c): per stop the boundary, how late, each vCPU's instructions."""
    if not path.exists():
        return []
    out = []
    for ln in path.read_text().splitlines():
        if ln.startswith("#") or not ln.strip():
            continue
        f = [int(x) for x in ln.split()]
        out.append({"boundary": f[0], "late_insns": f[1], "cpu_insns": f[2:]})
    return out


class _Machine:
    """QEMU with a QMP socket and its console in a file, stopped and reaped on any exit."""

    def __init__(self, cmd: list[str], work: Path):
        self.tmp = Path(tempfile.mkdtemp(prefix="vmlab-qmp-"))
        sock = self.tmp / "qmp"  # unix socket paths are short
        self.log = open(work / "qemu.log", "wb")
        # -S: the restored machine waits for `cont`, so the QMP handshake
        # happens before its first instruction; while it runs the host sends
        # nothing and only waits for the STOP event (polling QMP while a
        # machine ran made its idle time differ from run to run)
        self.proc = subprocess.Popen(cmd + QMP_ARGS + ["-S", "-qmp", f"unix:{sock},server=on,wait=off",
                                                      "-serial", f"file:{work / 'console.log'}"],
                                     stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        try:
            self.qmp = Qmp(sock, alive=lambda: self.proc.poll() is None)
        except OSError as e:
            if self.proc.poll() is not None:
                raise RegionError(f"QEMU exited ({self.proc.returncode}) at its start; see {work / 'qemu.log'}") \
                    from None
            self.proc.kill()
            self.proc.wait()
            raise RegionError(f"QEMU's QMP socket: {e}; see {work / 'qemu.log'}") from None

    def run_to_stop(self, deadline: float, what: str, work: Path, end_ok: bool = False) -> bool:
        """Start the restored machine and wait, silent, for the plugin's stop
        (True); end_ok: the guest powering off first is an end too (False)."""
        while self.qmp.cmd("query-status")["status"] == "inmigrate":  # loading: nothing runs yet
            time.sleep(0.05)
        self.qmp.events.clear()
        self.qmp.cmd("cont")
        self.qmp.sock.settimeout(1.0)
        while not any(e.get("event") == "STOP" for e in self.qmp.events):
            try:
                self.qmp.events.append(self.qmp._read())
            except TimeoutError:
                pass
            except SnapshotError:  # QEMU closed its socket: it is exiting
                try:
                    self.proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    raise RegionError(f"QEMU closed its QMP socket but runs on; see {work / 'qemu.log'}") from None
            if self.proc.poll() is not None:
                if end_ok and self.proc.returncode == 0:
                    return False
                raise RegionError(f"the machine ended (QEMU exit status {self.proc.returncode}) before {what}; "
                                  f"see {work / 'console.log'}")
            if STOP.is_set():
                raise RegionError(f"interrupted before {what}")
            if time.monotonic() > deadline:
                raise RegionError(f"timeout: {what} not reached; see {work / 'console.log'}")
        self.qmp.sock.settimeout(30)
        return True

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                try:
                    self.qmp.cmd("quit")
                except (SnapshotError, OSError):
                    pass
                self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            try:
                self.qmp.close()
            except AttributeError:
                pass
            self.log.close()
            shutil.rmtree(self.tmp, ignore_errors=True)


def checkpoint(cmd: list[str], work: Path, ckpt: Path, timeout_s: float) -> dict:
    """Run cmd (a restored machine whose plugin stops once, with its disks
    and bbv directory in `work`) to that stop and save it there as a
    checkpoint: ckpt/{state.mig, disks, meta.json}; then quit it. Returns
    the meta (the plugin's stop line, the state's size, wall times).

    Each checkpoint is taken by a run restored from the one before (or from
    the machine's snapshot after boot), never by continuing a machine after
    saving it: a machine continued after `migrate` did not repeat (found by
    two sampled runs of latprobe whose second checkpoints differed), while a
    restored machine does (tests/test_determinism_e2e.py)."""
    t0 = time.monotonic()
    m = _Machine(cmd, work)
    try:
        m.run_to_stop(t0 + timeout_s, "the checkpoint", work)
        stops = _stops(work / "bbv.stops")
        if len(stops) != 1:
            raise RegionError(f"the machine stopped, but the plugin logged {len(stops)} stops; see {work / 'qemu.log'}")
        reached = time.monotonic() - t0
        ckpt.mkdir()
        m.qmp.migrate_to(ckpt / STATE)
        copy_disks(work, ckpt)
    finally:
        m.close()
    meta = {**stops[0], "size": (ckpt / STATE).stat().st_size, "reach_wall_s": round(reached, 2),
            "save_wall_s": round(time.monotonic() - t0 - reached, 2)}
    (ckpt / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    return meta


def region(cmd: list[str], work: Path, timeout_s: float) -> float:
    """Run cmd (a checkpoint restored under the detailed model, its plugin
    stopping after the measured slice) until that stop, then quit it so the
    plugin writes its results. Returns the wall seconds."""
    t0 = time.monotonic()
    m = _Machine(cmd, work)
    try:
        # a point in the run's last slice: the guest powers off in it
        m.run_to_stop(t0 + timeout_s, "the region's end", work, end_ok=True)
    finally:
        m.close()
    return time.monotonic() - t0
