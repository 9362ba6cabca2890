"""End to end: build the images, boot guests under QEMU, check what lands in
SQLite. Slow (a kernel build from a cold cache, then guests booting under
TCG); CI runs them."""
import hashlib
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

import topologies as T
from tests.e2e import REPO, db, vmlab, vmlab_cmd

# Every test here gets the session's environment (tests/conftest.py: in CI,
# the images are built from one cold cache; elsewhere the user's cache keeps
# local runs quick).
SMALL = ["--topology", "gs1280-8", "--exp", "memeater", "--param", "chunks=6,cycles=2"]
OFF = ["--timing", "off"]  # the tests of a run's life (hangs, Ctrl-C, concurrency): functional runs


@pytest.mark.engine
def test_build_then_warm_build_builds_nothing(vmlab_env):
    first = vmlab(vmlab_env, None, "build", *SMALL[:4])
    assert first.returncode == 0, first.stdout + first.stderr
    again = vmlab(vmlab_env, None, "build", *SMALL[:4])
    assert again.returncode == 0
    assert "nothing built" in again.stdout, again.stdout


@pytest.fixture(scope="module")
def small_run(vmlab_env, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("e2e")
    r = vmlab(vmlab_env, tmp, *SMALL, default_timing=True)  # the main job's default: detailed
    return tmp, r


@pytest.mark.boot
def test_guest_sees_the_torus_and_records_land(small_run):
    tmp, r = small_run
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    c = db(tmp)
    run = c.execute("SELECT * FROM runs").fetchone()
    assert run["status"] == "ok" and not run["reason"]
    # the default is the accurate machine: priced in detail, no functional-run note
    assert run["timing_mode"] == "detailed" and "NOTE:" not in r.stdout
    topo = T.load("gs1280-8")
    # the guest saw 8 nodes with exactly the SLIT derived from the 2x4 torus
    assert c.execute("SELECT COUNT(*) FROM guest_nodes WHERE run_id = ?", (run["id"],)).fetchone()[0] == 8
    seen = {(x["src"], x["dst"]): x["distance"] for x in c.execute("SELECT * FROM guest_distances")}
    slit = topo.slit()
    assert seen == {(i, j): slit[i][j] for i in range(8) for j in range(8)}
    assert max(seen.values()) == 19  # 3 hops
    # every chunk of every cycle landed, with a positive guest time
    rows = c.execute("SELECT cycle, chunk, wall_ms FROM chunk_times ORDER BY cycle, chunk").fetchall()
    assert [(x["cycle"], x["chunk"]) for x in rows] == [(cy, ch) for cy in range(2) for ch in range(6)]
    assert all(x["wall_ms"] > 0 for x in rows)
    assert {x[0] for x in c.execute("SELECT DISTINCT phase FROM vmstat")} == {"before", "peak", "after"}
    assert "matches the topology" in r.stdout
    # restored from the machine's snapshot (the default), it pulled its job;
    # every VM knob the run set was accepted by the guest, and swap came up
    assert run["start"] == "restored" and run["snapshot_key"]
    steps = dict(c.execute("SELECT name, value FROM metrics WHERE name LIKE 'init.%'").fetchall())
    assert steps == {f"init.{k}": 1 for k in ("job", "numa_balancing", "thp", "watermark_boost_factor", "swapon")}
    # zone_reclaim_mode is left to the kernel by default: vanilla 6.1 boots with 0
    assert c.execute("SELECT text FROM metrics WHERE name = 'guest.zone_reclaim_mode'").fetchone()[0] == "0"
    assert c.execute("SELECT text FROM metrics WHERE name = 'guest.thp'").fetchone()[0] == "[always] madvise never"


@pytest.mark.boot
def test_run_row_is_complete_and_traceable(small_run):
    tmp, _ = small_run
    run = db(tmp).execute("SELECT * FROM runs").fetchone()
    for col in ("started_at", "ended_at", "wall_s", "boot_wall_s", "host", "vmlab_version", "topology_sha256",
                "topology_toml", "params_json", "kernel_release", "kernel_source", "kernel_config_sha256",
                "kernel_sha256", "initramfs_sha256", "engine_version", "command_line", "log_path", "log_sha256",
                "limitations", "timing_plugin"):
        assert run[col] not in (None, ""), col
    assert run["topology_sha256"] == T.load("gs1280-8").sha256
    assert run["kernel_release"].startswith("6.1.") and run["patch_set"] == "vanilla"
    assert run["qemu_mode"] == "icount" and run["timing_mode"] == "detailed" and run["scale"] == 1 / 64
    log = Path(run["log_path"])
    assert hashlib.sha256(log.read_bytes()).hexdigest() == run["log_sha256"]
    assert "guest ISA x86_64 substituted" in run["limitations"]


@pytest.mark.boot
def test_icount_runs_with_zram_swap_are_deterministic(vmlab_env, tmp_path):
    """Same inputs, same guest: identical per-chunk guest times and a
    byte-identical console (swap on zram, in RAM; disk swap is checked in
    test_determinism_e2e.py). The two runs go at once (CI time: a 4-CPU
    machine of 128 MiB, where this was gs1280-8's 512 MiB one after the
    other)."""
    args = ["--topology", str(REPO / "tests" / "data" / "x86-2s-small.toml"), "--exp", "memeater",
            "--param", "chunks=9,cycles=2,swap=zram,swap_frac=1.0"]
    procs = [subprocess.Popen(vmlab_cmd(tmp_path, *args, *OFF), env=vmlab_env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    for p in procs:
        out = p.communicate()[0]
        assert p.returncode == 0, out[-3000:]
    c = db(tmp_path)
    a, b = ([tuple(x) for x in c.execute("SELECT cycle, chunk, wall_ms, cpu_ms, minflt, majflt FROM chunk_times "
                                         "WHERE run_id = ? ORDER BY cycle, chunk", (rid,))] for rid in (1, 2))
    assert a == b and len(a) == 18
    # 144 MiB into a 128 MiB guest: it really swapped (to zram), and did so the same way twice
    assert c.execute("SELECT delta FROM v_vmstat_delta WHERE run_id = 1 AND counter = 'pswpout'").fetchone()[0] > 0
    logs = [Path(x[0]).read_bytes() for x in c.execute("SELECT log_path FROM runs ORDER BY id")]
    assert logs[0] == logs[1]


@pytest.mark.boot
def test_panicking_guest_is_recorded_failed_with_its_log(vmlab_env, tmp_path):
    r = vmlab(vmlab_env, tmp_path, *SMALL, *OFF, "--kernel-append", "rdinit=/no-such-init init=/no-such-init")
    assert r.returncode == 1
    run = db(tmp_path).execute("SELECT status, reason, log_path FROM runs").fetchone()
    # stopped at the panic line, not by a timeout (no wall-time bound: a shared
    # host, or a build another test holds the lock of, would make one flaky)
    assert run["status"] == "failed" and "Kernel panic" in run["reason"] and "timeout" not in run["reason"]
    assert "Kernel panic" in Path(run["log_path"]).read_text(errors="replace")


@pytest.mark.boot
def test_hanging_guest_is_stopped_by_the_timeout(vmlab_env, tmp_path):
    r = vmlab(vmlab_env, tmp_path, *SMALL, *OFF, "--kernel-append", "vmlab.hang=1", "--timeout", "5")
    assert r.returncode == 1
    run = db(tmp_path).execute("SELECT status, reason FROM runs").fetchone()
    assert run["status"] == "failed" and "timeout" in run["reason"]


@pytest.mark.boot
@pytest.mark.parametrize("sig,inherited", [
    # a terminal's Ctrl-C (the suite itself may run with SIGINT ignored: give the run the default back)
    (signal.SIGINT, signal.SIG_DFL),
    # `kill` of a run a script started in the background (`nohup ./run.py ... &`: SIGINT ignored)
    (signal.SIGTERM, signal.SIG_IGN),
], ids=["ctrl-c", "sigterm-background"])
def test_ctrl_c_aborts_and_leaves_the_database_consistent(vmlab_env, tmp_path, sig, inherited):
    # vmlab.hang=1: the guest waits for ever once up, so the signal always
    # comes mid-run (a restored run of SMALL can end within seconds)
    p = subprocess.Popen(vmlab_cmd(tmp_path, *SMALL, *OFF, "--kernel-append", "vmlab.hang=1"), env=vmlab_env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, inherited))
    # Read its output as it comes (a full pipe would stall it) and interrupt
    # once it says the run started (its row is in the database as `running`).
    lines, started = [], threading.Event()

    def reader():
        for line in p.stdout:
            lines.append(line)
            if re.match(r"run \d+: ", line):
                started.set()

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    assert started.wait(timeout=600), "".join(lines)[-2000:]
    time.sleep(3)  # QEMU is restoring or running
    p.send_signal(sig)
    p.wait(timeout=60)
    t.join(timeout=10)
    out = "".join(lines)
    assert p.returncode == 130, out[-2000:]
    run = db(tmp_path).execute("SELECT status, reason, command_line FROM runs").fetchone()
    assert run["status"] == "aborted"
    # QEMU went with it: no process still runs this run's console
    console = next((tmp_path / "runs").glob("*/console.log"))
    ps = subprocess.run(["pgrep", "-f", str(console)], capture_output=True, text=True)
    assert ps.stdout.strip() == ""
