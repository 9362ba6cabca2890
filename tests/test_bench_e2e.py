"""`./run.py bench` end to end on a small guest: it runs each mode asked for
and prints one row per mode with figures taken from the runs it stored.
Slow: boots guests."""
import json
import re
import sqlite3
from pathlib import Path

import pytest

from bootstrap import bootstrap
from engine import snapshot
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
    cache = Path(vmlab_env["VMLAB_CACHE"]) if "VMLAB_CACHE" in vmlab_env else bootstrap.cache_dir()
    for mode, rid in (("off", 1), ("fast", 2)):
        insns = con.execute("SELECT SUM(insns) FROM vcpu_clocks WHERE run_id = ?", (rid,)).fetchone()[0]
        wall = con.execute("SELECT wall_s, timing_mode, snapshot_key FROM runs WHERE id = ?", (rid,)).fetchone()
        # both restored from one snapshot: what each ran is its whole-life count less the snapshot's
        meta = json.loads((snapshot.directory(cache, wall[2]) / "meta.json").read_text())
        insns -= sum(meta["vcpu_insns"])
        assert wall[1] == mode and 0 < int(rows[mode][1].replace(",", "")) == insns
        assert float(rows[mode][3]) == pytest.approx(insns / wall[0] / 1e6, abs=0.06)
