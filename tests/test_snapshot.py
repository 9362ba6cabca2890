"""Boot once, run many (engine/snapshot.py): what the snapshot's key covers
and what it leaves out, the job disk as the host writes it and the guest's
reader (vmlab-probe, compiled for the host) reads it, a broken snapshot
found before any guest runs, and which runs restore."""
import json
import subprocess

import pytest

import experiments
import topologies
from engine import snapshot
from images import initramfs
from pipeline import execute
from pipeline.spec import InputError, RunSpec, run_key
from tests.cbuild import GUEST, gcc
from topologies import disks

X86 = topologies.load("x86-2s")
KEYARGS = dict(kernel_sha256="k" * 64, initrd_sha256="i" * 64, engine_key="e" * 16, quantum_ns=1000, append="",
               hmat=True, disk=disks.get("ssd-980pro"))


def k(topo=X86, **kw):
    return snapshot.key(topo, **{**KEYARGS, **kw})


@pytest.mark.parametrize("change", [
    dict(kernel_sha256="K" * 64), dict(initrd_sha256="I" * 64), dict(engine_key="E" * 16), dict(quantum_ns=500),
    dict(append="vmlab.hang=1"), dict(hmat=False), dict(disk=disks.get("cheetah-15k4")), dict(disk=None),
])
def test_what_reaches_the_guest_changes_the_key(change):
    assert k(**change) != k()


def test_the_machine_s_shape_and_clock_change_the_key():
    assert k(topologies.load("x86-4s-16c")) != k()
    # cycle, quantum and PAUSE price reach the guest through the -icount option the key hashes
    cmd = snapshot.machine_command(_machine(), binary="q")
    icount = cmd[cmd.index("-icount") + 1]
    assert f"cycle-ps={X86.cycle_ps}" in icount and f"pause-cycles={X86.pause_cycles}" in icount


def _machine(**kw):
    from pathlib import Path

    from engine.machine import Machine
    return Machine(X86, Path("k"), Path("i"), swap=Path("s"), data=Path("d"), job=Path("j"), **kw)


def test_the_key_is_stable_and_ignores_what_a_restore_brings():
    assert k() == k()
    # the plugin is loaded by the restore, never by the snapshot's machine
    cmd = snapshot.machine_command(_machine(), binary="q")
    with_plugin = snapshot.machine_command(_machine(plugin=("p.so", "c.conf")), binary="q")
    assert "-plugin" in with_plugin and "-plugin" not in cmd
    assert "vmlab-ctl" in " ".join(cmd) and cmd.count("-drive") == 3


def test_job_disk_round_trip_through_the_guest_reader(tmp_path):
    probe = gcc(tmp_path / "vmlab-probe", initramfs.PROBE_SRC, *experiments.lib_sources(),
                flags=GUEST, include=[experiments.LIB])
    payload = bytes(range(256)) * 4099 + b"tail"   # not a multiple of a block
    img = tmp_path / "job.img"
    snapshot.job_image(img, payload)
    assert img.stat().st_size == snapshot.JOB_DISK_MIB << 20
    out = subprocess.run([str(probe), "job", str(img)], capture_output=True, check=True).stdout
    assert out == payload
    # a disk without the header: the reader says so and fails
    snapshot.sparse(tmp_path / "empty.img", 1)
    r = subprocess.run([str(probe), "job", str(tmp_path / "empty.img")], capture_output=True, text=True)
    assert r.returncode != 0 and "no job header" in r.stderr


def test_a_job_too_large_names_the_limit(tmp_path):
    with pytest.raises(snapshot.SnapshotError, match=r"at most \d+ .*JOB_DISK_MIB = 64"):
        snapshot.job_image(tmp_path / "j.img", b"x" * (snapshot.JOB_DISK_MIB << 20))
    assert not (tmp_path / "j.img").exists()


def _fake_snapshot(d, key, body=b"QEVM" + b"\0" * 100):
    d.mkdir(parents=True)
    (d / snapshot.STATE).write_bytes(body)
    (d / "meta.json").write_text(json.dumps({"key": key, "size": len(body)}))


def test_a_broken_snapshot_is_found_before_a_guest_runs(tmp_path):
    key = "a" * 64
    assert "no snapshot" in snapshot.check(tmp_path / "none", key)
    _fake_snapshot(tmp_path / "ok", key)
    assert snapshot.check(tmp_path / "ok", key) is None
    assert "another machine or build" in snapshot.check(tmp_path / "ok", "b" * 64)
    _fake_snapshot(tmp_path / "cut", key)
    with open(tmp_path / "cut" / snapshot.STATE, "r+b") as f:
        f.truncate(50)
    assert "truncated" in snapshot.check(tmp_path / "cut", key)
    _fake_snapshot(tmp_path / "junk", key, b"JUNK" + b"\0" * 100)
    assert "not a QEMU migration stream" in snapshot.check(tmp_path / "junk", key)


def test_a_broken_snapshot_in_the_cache_is_taken_again(tmp_path):
    key = "c" * 64
    sdir = snapshot.directory(tmp_path, key)
    _fake_snapshot(sdir, key)
    (sdir / snapshot.STATE).write_bytes(b"QEVM")            # truncated
    taken = []

    def fake_take(work, k, command, timeout_s, log):
        taken.append(k)
        (work / snapshot.STATE).write_bytes(b"QEVM1234")
        (work / "meta.json").write_text(json.dumps({"key": k, "size": 8}))
    orig = snapshot._take
    snapshot._take = fake_take
    try:
        assert snapshot.take(tmp_path, key, None, 1, log=lambda m: None) == sdir
        assert taken == [key] and snapshot.check(sdir, key) is None
        snapshot.take(tmp_path, key, None, 1, log=lambda m: None)   # whole now: not taken again
        assert taken == [key]
    finally:
        snapshot._take = orig


def _prep(**kw):
    return execute.prepare(RunSpec(topology=kw.pop("topology", "x86-2s"), experiment="memeater", **kw))


def test_which_runs_restore_and_why_the_others_boot():
    assert _prep().start == "restored"
    assert (_prep(boot=True).start, _prep(boot=True).boot_reason) == ("booted", "--boot")
    assert "mttcg" in _prep(qemu_mode="mttcg").boot_reason
    assert "Debian" in _prep(engine="debian").boot_reason
    assert _prep(topology="es-clipper-4").start == "restored"   # series patch 0007: the clipper restores too
    big = _prep(params=(("swap_frac", "9"),))
    assert big.start == "booted" and "swap disk" in big.boot_reason


def test_a_booted_run_keeps_its_old_key_and_a_restored_one_has_its_own():
    from timing import modes
    spec = RunSpec(topology="x86-2s", timing="detailed")
    mode_key = modes.get("detailed").key(spec)
    old = run_key(spec, "t", {"a": 1}, None, mode_key)
    assert run_key(spec, "t", {"a": 1}, None, mode_key, "booted") == old
    assert run_key(spec, "t", {"a": 1}, None, mode_key, "restored") != old
    assert _prep().key != _prep(boot=True).key


def test_boot_is_a_run_option_a_study_can_set():
    from pipeline import study
    assert "boot" in study.RUN_FIELDS
    with pytest.raises(InputError):
        RunSpec.from_json('{"bogus": 1}')


def test_qmp_connects_to_a_socket_that_is_bound_before_it_listens(tmp_path):
    """QEMU's QMP socket file appears at bind(), before listen(): a connect in
    between is refused, and is tried again (a region failed so in a cold CI
    run). A QEMU that has exited is not waited for."""
    import json
    import socket
    import threading
    import time

    from engine.snapshot import Qmp
    path = tmp_path / "qmp"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))  # the file exists; nothing listens yet
    with pytest.raises(ConnectionRefusedError):
        Qmp(path, timeout=5, alive=lambda: False)

    def serve():
        time.sleep(0.3)
        srv.listen(1)
        conn, _ = srv.accept()
        conn.sendall(b'{"QMP": {"version": {}}}\n')
        conn.recv(4096)  # qmp_capabilities
        conn.sendall(b'{"return": {}}\n')
        conn.recv(4096)
        conn.sendall(json.dumps({"return": {"status": "paused"}}).encode() + b"\n")

    t = threading.Thread(target=serve)
    t.start()
    q = Qmp(path, timeout=5)
    assert q.cmd("query-status")["status"] == "paused"
    t.join()
    srv.close()
