"""Determinism on per-vCPU clocks (engine/qemu-patches/: the clocks and their
scheduler 0002, the TLB's resize window 0004, the disk 0005, snapshots 0006):
the same inputs give the same console, per-vCPU instruction counts and
clocks, on 1 CPU under the plugin (fast: counts and basic-block vectors)
and on 8 without it, while the guest swaps to the modeled disk, and on 8
with the detailed model and on 32 under the plugin's fast mode, whose four
sorts fit in memory (below). Every pair is restored from the machine's
snapshot after boot (the default). In the 8-CPU pair without the plugin,
the second run goes under a host kick storm (the series' 0002's
x-kick-storm-us: the running vCPU kicked every random 1-20 host us, where
RCU and the main loop kick now and then): the determinism hole was a host
kick deciding where a woken vCPU starts. A boot repeating exactly is
test_snapshot_e2e.py's (a snapshot taken again, by a second boot, gives
byte-identical runs); the booted 8-CPU triple that was a case here went
when CI's cold run passed its hour again (72 min, 2026-11-26).
The two runs of a pair go at once into one database, so they also differ in
host load, in who writes first and in which of them takes the snapshot
while the other waits for it. Slow: boots guests. (8 CPUs in fast mode was
a case too: detailed mode loads the same plugin as fast and more, so the
TLB-sizing divergence fast mode once showed is caught there; 32 CPUs in
fast mode was dropped when CI's cold run passed its hour (68.6 min, mostly
cold kernel and QEMU builds) and is back since restored runs brought CI
under it (2026-11-27): it replaces the 32-CPU pair without the plugin, whose
interleaving fast mode keeps (the plugin charges no stall), so it covers
that and the plugin's callbacks on many vCPUs. Its sorts fit in memory
since 2026-12-01 (206 s for the swapping pair in a cold run here, the
suite's longest run after the builds; the disk's determinism is the 1- and
8-CPU pairs'). 32 CPUs under the detailed
model is not a case, for CI time. The 8-CPU detailed pair sorted above RAM
until 2026-11-30: 15.5 wall minutes for the pair, a sixth of a cold CI's
time; its array is now 0.3 of memory: the pair took 104 s alone here and
162 s in a cold CI run beside the other worker. The model's stalls on 8
vCPUs are still checked; the disk's timing is the 1- and 8-CPU (off)
pairs'.)"""
import subprocess
from pathlib import Path

import pytest

from engine.qemu import KICK_STORM_ENV
from tests.e2e import REPO, db, vmlab_cmd

pytestmark = pytest.mark.boot

MACHINES = {1: "x86-1c-small", 8: "x86-2s-8c-small", 32: "x86-4s-32c-small"}
# The first pass of this test found fast mode on 8 CPUs diverging: QEMU sized
# each vCPU's TLB by host time, so page walks (and the accessed bits reclaim
# reads) came at host-timed points. Series patch 0004 keeps it in guest time.


# the array as a fraction of memory: above RAM (it swaps) on 1 and 8 CPUs
# without the model; in memory in the detailed pair, which prices every
# instruction, and on 32 CPUs, whose pair swapping took 206 s of a cold CI
# run here (CI time, above)
MEM_FRAC = {(1, "fast"): 1.05, (8, "off"): 1.05, (8, "detailed"): 0.3, (32, "fast"): 0.3}


@pytest.mark.parametrize("cpus,mode", list(MEM_FRAC))
def test_a_swapping_run_repeats_exactly(vmlab_env, tmp_path, cpus, mode):
    topo = str(REPO / "tests" / "data" / f"{MACHINES[cpus]}.toml")
    swaps = MEM_FRAC[cpus, mode] > 1
    cmd = vmlab_cmd(tmp_path, "-t", topo, "-e", "qsbench", "--timing", mode,
                    "-p", f"mem_frac={MEM_FRAC[cpus, mode]},procs={min(cpus, 4)}")
    # On 8 CPUs without the plugin a third, perturbed run (--seed 1) goes at
    # the same time: repeats of a study are such runs, and must not be copies.
    perturbed = cpus == 8 and mode == "off"
    storm = dict(vmlab_env, **{KICK_STORM_ENV: "20"}) if perturbed else vmlab_env
    # the storm's exits take host time (an 8-CPU run's wall about doubles):
    # limits that leave it room on a loaded host; the limits are in no key
    stormed = cmd + (["--boot-timeout", "1200", "--timeout", "2400"] if perturbed else [])
    procs = [subprocess.Popen(c, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for c, e in [(cmd, vmlab_env), (stormed, storm)] + ([(cmd + ["--seed", "1"], vmlab_env)] if perturbed
                                                                  else [])]
    outs = [p.communicate()[0] for p in procs]
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out[-4000:]
    c = db(tmp_path)
    if perturbed:
        check_the_perturbed_run_differs(c)
    runs = c.execute("SELECT id, log_path, timing_mode, clock_model, quantum_ns, disk_model, limitations, start, "
                     "command_line FROM runs WHERE seed = 0 ORDER BY id").fetchall()
    assert len(runs) == 2 and all(r["timing_mode"] == mode for r in runs)
    # the storm was on for one run of the pair (the rows need not be in start order)
    assert sum("x-kick-storm-us=20" in r["command_line"] for r in runs) == (1 if perturbed else 0)
    assert all(r["start"] == "restored" for r in runs)
    assert "per-vCPU clocks" in runs[0]["clock_model"] and runs[0]["quantum_ns"] == 1000
    assert runs[0]["disk_model"].startswith("ssd-980pro") and "deterministic" in runs[0]["limitations"]
    a, b = (Path(r["log_path"]).read_bytes() for r in runs)
    assert a == b, "consoles differ"
    ids = [r["id"] for r in runs]
    clocks = [[tuple(x) for x in c.execute("SELECT cpu, insns, stall_ps, clock_ps FROM vcpu_clocks "
                                           "WHERE run_id = ? ORDER BY cpu", (i,))] for i in ids]
    assert clocks[0] == clocks[1] and len(clocks[0]) == cpus
    assert all(k[1] > 0 for k in clocks[0])
    # stalls reach the clocks in detailed mode only
    assert (sum(k[2] for k in clocks[0]) > 0) == (mode == "detailed")
    # it swapped to the modeled disk where the array was above RAM, by the same amount both times (32 CPUs'
    # kernel leaves less room: it swaps a little with the array in memory, which the pair repeats too)
    out = [c.execute("SELECT delta FROM v_vmstat_delta WHERE run_id = ? AND counter = 'pswpout'", (i,)).fetchone()
           for i in ids]
    assert out[0] is not None and out[0][0] == out[1][0]
    if swaps:
        assert out[0][0] > 0
    elif cpus != 32:
        assert out[0][0] == 0
    el = [sorted(tuple(x) for x in c.execute("SELECT elapsed_ms, user_ms, sys_ms FROM qsbench_procs "
                                            "WHERE run_id = ?", (i,))) for i in ids]
    assert el[0] == el[1] and len(el[0]) == min(cpus, 4)
    if mode != "off":  # the plugin saw the same instruction stream on every CPU
        counts = [[tuple(x) for x in c.execute("SELECT cpu, insns FROM timing_cpu WHERE run_id = ? ORDER BY cpu",
                                              (i,))] for i in ids]
        assert counts[0] == counts[1] and len(counts[0]) == cpus


def check_the_perturbed_run_differs(c):
    """--seed 1 mixes vmlab.perturb=1.0 into the restored guest's entropy
    pool, before its job (a booted guest gets it on its command line:
    test_qemu_cmdline.py), and nothing else: the same work, sorted right, but another interleaving,
    so the guest's figures differ from the unperturbed pair's."""
    runs = c.execute("SELECT id, seed, command_line, log_path FROM runs ORDER BY seed, id").fetchall()
    assert [r["seed"] for r in runs] == [0, 0, 1]
    assert "vmlab.perturb=1.0" not in runs[2]["command_line"]
    assert "vmlab.perturb" not in runs[0]["command_line"]
    perturb_note = '"step":"perturb","ok":1'
    assert perturb_note in Path(runs[2]["log_path"]).read_text(errors="replace")
    assert perturb_note not in Path(runs[0]["log_path"]).read_text(errors="replace")
    assert Path(runs[0]["log_path"]).read_bytes() != Path(runs[2]["log_path"]).read_bytes()
    figures = [sorted(tuple(x) for x in c.execute("SELECT proc, elapsed_ms, user_ms, sys_ms FROM qsbench_procs "
                                                 "WHERE run_id = ?", (r["id"],))) for r in (runs[0], runs[2])]
    assert len(figures[1]) == 4 and figures[0] != figures[1]
    sums = [c.execute("SELECT text FROM metrics WHERE run_id = ? AND name = 'qsbench.checksum'",
                      (r["id"],)).fetchone() for r in (runs[0], runs[2])]
    assert sums[0][0] and sums[0] == sums[1], "a perturbed run must do the same work"
