"""A machine written for a run, without a [disk] section, repeats: it gets
the default disk model for its native ISA (topologies/disks.py), so two
restored runs of the same inputs give byte-identical consoles and per-vCPU
counts. Before, such a machine ran with host-timed disks and two restored
runs differed (a restored run pulls its job from a disk), while the row
said "deterministic". The pair runs at once into one database, as
test_determinism_e2e.py's pairs do. Slow: boots the machine once for its
snapshot, then two restored runs."""
import subprocess
from pathlib import Path

import pytest

from tests.e2e import REPO, db, vmlab_cmd

pytestmark = pytest.mark.boot

TOPO = REPO / "tests" / "data" / "ring6-custom.toml"   # 6 CPUs on a ring, no [disk]


def test_two_restored_runs_on_a_topology_without_a_disk_repeat_exactly(vmlab_env, tmp_path):
    assert "[disk]" not in TOPO.read_text()
    # three sorting processes on six CPUs; swap and job disks on the default model (the array fits in
    # memory, so qsbench's own sanity line, which expects swapping, says FAILED: not what is checked here)
    cmd = vmlab_cmd(tmp_path, "-t", str(TOPO), "-e", "qsbench", "-p", "mem_frac=0.1,procs=3", "--timing", "off")
    procs = [subprocess.Popen(cmd, env=vmlab_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for _ in range(2)]
    outs = [p.communicate()[0] for p in procs]
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out[-4000:]
    c = db(tmp_path)
    runs = c.execute("SELECT id, status, start, disk_model, limitations, log_path FROM runs ORDER BY id").fetchall()
    assert len(runs) == 2 and all(r["status"] == "ok" and r["start"] == "restored" for r in runs)
    for r in runs:
        assert r["disk_model"].startswith("ssd-980pro:")
        assert r["disk_model"].endswith("the topology names no disk model")
        assert "default disk model ssd-980pro (the topology names none" in r["limitations"]
        assert "deterministic: the same inputs give the same console" in r["limitations"]
    a, b = (Path(r["log_path"]).read_bytes() for r in runs)
    assert a == b, "consoles differ"
    clocks = [[tuple(x) for x in c.execute("SELECT cpu, insns, clock_ps FROM vcpu_clocks WHERE run_id = ? "
                                           "ORDER BY cpu", (r["id"],))] for r in runs]
    assert clocks[0] == clocks[1] and len(clocks[0]) == 6
