"""`./run.py bench` end to end on a small guest: it runs each mode asked for
and prints one row per mode with figures taken from the runs it stored.
Slow: boots guests."""
import re
import sqlite3

import pytest

from tests.e2e import REPO, vmlab

pytestmark = pytest.mark.boot


def test_bench_prints_a_row_per_mode_from_its_runs(vmlab_env, tmp_path):
    topo = str(REPO / "tests" / "data" / "x86-2s-small.toml")
    r = vmlab(vmlab_env, None, "bench", "-t", topo, "-e", "memeater", "-p", "chunks=2,cycles=1,swap=none",
              "--modes", "off,fast", "--keep", str(tmp_path))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rows = {m.group(1): m.groups() for m in re.finditer(
        r"^(off|fast)\s+([\d,]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)x", r.stdout, re.M)}
    assert set(rows) == {"off", "fast"}
    assert float(rows["off"][4]) == 1.0            # off is the reference
    con = sqlite3.connect(tmp_path / "bench.db")
    for mode, rid in (("off", 1), ("fast", 2)):
        insns = con.execute("SELECT SUM(insns) FROM vcpu_clocks WHERE run_id = ?", (rid,)).fetchone()[0]
        wall = con.execute("SELECT wall_s, timing_mode FROM runs WHERE id = ?", (rid,)).fetchone()
        assert wall[1] == mode and int(rows[mode][1].replace(",", "")) == insns
        assert float(rows[mode][3]) == pytest.approx(insns / wall[0] / 1e6, abs=0.06)
