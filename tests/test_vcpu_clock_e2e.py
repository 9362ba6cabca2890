"""End to end on our QEMU's per-vCPU clocks (engine/qemu-patches/0002):
parallel work takes parallel time in the guest, and Alpha SMP guests' vCPUs
are told apart (that runs repeat: tests/test_determinism_e2e.py). Slow:
builds and boots guests."""
import json
import math
from pathlib import Path

import pytest

from bootstrap import bootstrap
from engine import snapshot
from tests.e2e import db, vmlab

pytestmark = pytest.mark.boot


def test_four_sorts_on_an_eight_cpu_guest_take_a_quarter_of_the_time(vmlab_env, tmp_path):
    """Same total work in 1 and in 4 processes: upstream -icount charged every
    vCPU's work to one clock (1.09x); per-vCPU clocks give the machine's 4x."""
    for procs in (1, 4):
        r = vmlab(vmlab_env, tmp_path, "-t", "x86-4s", "-e", "qsbench", "-p", f"mem_frac=0.1,swap=none,procs={procs}",
                  "--timing", "off")  # the clocks without the model: instructions at the cycle
        # the run must succeed (status ok); only the sanity record's swap checks fail (no swap, by design)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    c = db(tmp_path)
    runs = c.execute("SELECT id, status, clock_model FROM runs ORDER BY id").fetchall()
    assert len(runs) == 2 and all(x["status"] == "ok" for x in runs)
    assert all("per-vCPU clocks" in x["clock_model"] for x in runs)
    # the sort is what counts: every process sorted its share (the swap checks fail without swap)
    for x in runs:
        checks = dict(c.execute("SELECT check_name, ok FROM repro_sanity WHERE run_id = ?", (x["id"],)).fetchall())
        assert checks.get("sorted") == 1, (x["id"], checks)
    el, user, work = [], [], []
    for x in runs:
        procs = c.execute("SELECT elements, elapsed_ms, user_ms, checksum, unsorted FROM qsbench_procs "
                          "WHERE run_id = ?", (x["id"],)).fetchall()
        assert procs and all(p["checksum"] and p["unsorted"] == 0 for p in procs)
        el.append(max(p["elapsed_ms"] for p in procs))
        user.append(sum(p["user_ms"] for p in procs))
        # a sort of n elements costs n log n: four quarter-size sorts do
        # about 9 % less work than one sort of them all, not the same
        work.append(sum(p["elements"] * math.log2(p["elements"]) for p in procs))
    assert sum(work) > 0 and work[1] < work[0]
    assert el[0] / el[1] >= 3.5, el
    # the CPU time the guest charged follows the work, however it is split
    assert user[1] / user[0] == pytest.approx(work[1] / work[0], rel=0.05), (user, work)
    # every vCPU's clock is its own: at exit the busy ones have run alone, not a sum
    clocks = c.execute("SELECT cpu, insns, clock_ps FROM vcpu_clocks WHERE run_id = ?", (runs[1]["id"],)).fetchall()
    assert len(clocks) == 8 and all(k["insns"] > 0 for k in clocks)


def test_alpha_smp_guest_vcpus_are_told_apart(vmlab_env, tmp_path):
    """Upstream reports the translating vCPU to plugins under -icount; the
    series reports the running one, so a 4-CPU Alpha guest gets per-CPU figures."""
    r = vmlab(vmlab_env, tmp_path, "-t", "es-clipper-4", "-e", "memeater", "--timing", "fast",
              "-p", "chunks=2,cycles=1,swap=none")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    c = db(tmp_path)
    cpus = {x["cpu"]: x["insns"] for x in c.execute("SELECT cpu, insns FROM timing_cpu")}
    clocks = {x["cpu"]: x["insns"] for x in c.execute("SELECT cpu, insns FROM vcpu_clocks")}
    assert sorted(cpus) == [0, 1, 2, 3] and all(n > 0 for n in cpus.values())
    start, key = c.execute("SELECT start, snapshot_key FROM runs").fetchone()
    if start == "restored":
        # QEMU's counts are whole-life; the plugin, loaded at the restore, counts from there
        cache = Path(vmlab_env["VMLAB_CACHE"]) if "VMLAB_CACHE" in vmlab_env else bootstrap.cache_dir()
        at = json.loads((snapshot.directory(cache, key) / "meta.json").read_text())["vcpu_insns"]
        clocks = {cpu: n - at[cpu] for cpu, n in clocks.items()}
    # the plugin's per-CPU counts are QEMU's own per-vCPU counts
    for cpu, n in clocks.items():
        assert cpus[cpu] == pytest.approx(n, rel=0.01), (cpu, cpus[cpu], n)
