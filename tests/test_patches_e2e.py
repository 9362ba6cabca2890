"""Patch sets end to end: vanilla and every set build (the sets
incrementally, in the shared tree), each set is in its kernel (System.map,
every layer of a stacked set) and live in the guest (its boot announcements,
the zone_reclaim_mode the guest had), and `--kernel a,b,...` runs one
comparison. Slow: kernel builds
and guest boots; CI builds them in its shared cold cache."""
import json
import re
import subprocess
from pathlib import Path

import pytest

from images import variants as kvar
from tests.e2e import db, vmlab, vmlab_cmd

# every shipped set, stacked ones (a seed's fix on its period set) included
SETS = [s for s in kvar.patchsets() if s != "vanilla"]
KERNELS = ["vanilla", *SETS]
# One comparison on x86-8s (where zone-reclaim-auto's rule fires), with a
# stacked set in it; every other set proves itself live on a 2-CPU machine,
# two guests at a time (CI time: a boot of x86-8s costs about a minute).
COMPARED = ["vanilla", "zone-reclaim-auto", "mlocked-on-lru-kswapd-sleeps"]
ELSEWHERE = [s for s in SETS if s not in COMPARED]


def symbol(component: str) -> str:
    return "vmlab_patch_" + re.sub(r"\W", "_", component)


# x86-8s: 8 nodes, SLIT up to 25 (> 20, so zone-reclaim-auto's rule fires);
# memeater kept small: the point is the kernels, not the pathology.
TOPO = "x86-8s"
SMALL = ["--exp", "memeater", "--param", "chunks=6,cycles=1", "--timing", "off"]  # what the patches do: functional


@pytest.fixture(scope="module")
def kernels(vmlab_env):
    # --boot: kernels only; the comparison below snapshots the three it boots
    r = vmlab(vmlab_env, None, "build", "--topology", TOPO, "--kernel", ",".join(KERNELS), "--boot")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    dirs = [Path(m) for m in re.findall(r"^kernel:\s+(\S+)$", r.stdout, re.M)]
    assert len(dirs) == len(KERNELS)
    return dict(zip(KERNELS, dirs))


@pytest.mark.engine  # builds the kernels, boots none
def test_each_set_is_in_its_kernel_with_the_vanilla_config(kernels):
    metas = {k: json.loads((d / "meta.json").read_text()) for k, d in kernels.items()}
    for k, d in kernels.items():
        syms = set(re.findall(r"\bvmlab_patch_\w+", (d / "System.map").read_text()))
        want = {symbol(c) for c in kvar.components(k)}  # every layer of a stacked set
        assert syms == want, (k, syms)
        # one config for every variant: vanilla vs patched compares only the patch
        assert metas[k]["config_sha256"] == metas["vanilla"]["config_sha256"]
        assert metas[k]["patchset"] == k and metas[k]["release"] == metas["vanilla"]["release"]
    assert len({m["kernel_sha256"] for m in metas.values()}) == len(KERNELS)


@pytest.fixture(scope="module")
def comparison(vmlab_env, kernels, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("compare")
    r = vmlab(vmlab_env, tmp, "--topology", TOPO, *SMALL, "--kernel", ",".join(COMPARED))
    return r, db(tmp)


@pytest.mark.boot
def test_one_command_runs_several_kernels_and_prints_the_table(comparison):
    r, c = comparison
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    runs = c.execute("SELECT r.* FROM compare_runs x JOIN runs r ON r.id = x.run_id ORDER BY x.position").fetchall()
    assert [x["patch_set"] for x in runs] == COMPARED and {x["status"] for x in runs} == {"ok"}
    for col in ("topology_sha256", "params_json", "seed", "kernel_config_sha256"):
        assert len({x[col] for x in runs}) == 1, col
    assert c.execute("SELECT COUNT(*) FROM compare_sets").fetchone()[0] == 1
    head = next(line for line in r.stdout.splitlines() if line.startswith("figure"))
    assert all(f"{k} (run {x['id']})" in head for k, x in zip(COMPARED, runs))
    others = len(COMPARED) - 1  # each with its value and its % against the first
    assert re.search(r"^vmstat\.pgfault\s+\d+(\s+\d+\s+(new|[+-]?\d+\.\d+%))" + f"{{{others}}}$",
                     r.stdout, re.M), r.stdout[-3000:]


@pytest.mark.boot
def test_each_patch_is_live_in_the_guest(comparison):
    _, c = comparison
    for x in c.execute("SELECT id, patch_set FROM runs"):
        live = {n[len("patch_live."):] for (n,) in c.execute(
            "SELECT name FROM metrics WHERE run_id = ? AND name LIKE 'patch_live.%'", (x["id"],))}
        assert live == set(kvar.components(x["patch_set"])), x["patch_set"]
        zrm = c.execute("SELECT text FROM metrics WHERE run_id = ? AND name = 'guest.zone_reclaim_mode'",
                        (x["id"],)).fetchone()[0]
        # the run left zone_reclaim_mode to the kernel: only the old rule turns it on
        assert zrm == ("1" if x["patch_set"] == "zone-reclaim-auto" else "0"), x["patch_set"]


@pytest.mark.boot
def test_every_other_set_is_live_on_a_small_machine(vmlab_env, kernels, tmp_path):
    """Each set not in the comparison boots on x86-1s-2c and announces every
    one of its layers; two guests at a time, each in its own database."""
    pending, done = list(ELSEWHERE), []
    while pending:
        batch, pending = pending[:2], pending[2:]
        procs = []
        for k in batch:
            d = tmp_path / k
            d.mkdir()
            cmd = vmlab_cmd(d, "--topology", "x86-1s-2c", "--exp", "memeater", "--timing", "off",
                            "--param", "chunks=1,cycles=1,swap=none", "--kernel", k)
            procs.append((k, d, subprocess.Popen(cmd, env=vmlab_env, stdout=subprocess.PIPE,
                                                 stderr=subprocess.STDOUT, text=True)))
        for k, d, p in procs:
            out = p.communicate()[0]
            assert p.returncode == 0, (k, out[-3000:])
            c = db(d)
            (rid, ps), = c.execute("SELECT id, patch_set FROM runs WHERE status = 'ok'").fetchall()
            live = {n[len("patch_live."):] for (n,) in c.execute(
                "SELECT name FROM metrics WHERE run_id = ? AND name LIKE 'patch_live.%'", (rid,))}
            assert ps == k and live == set(kvar.components(k)) and live, (k, live)
            done.append(k)
    assert sorted(done) == sorted(ELSEWHERE) and len(ELSEWHERE) >= 5


@pytest.mark.boot
def test_zone_reclaim_rule_stays_off_within_distance_20(vmlab_env, kernels, tmp_path):
    """gs1280-8's farthest node is at 19: the 2005 rule (distance > 20) keeps
    zone reclaim off there, on the same patched kernel."""
    r = vmlab(vmlab_env, tmp_path, "--topology", "gs1280-8", *SMALL, "--kernel", "zone-reclaim-auto")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    c = db(tmp_path)
    m = dict(c.execute("SELECT name, COALESCE(text, value) FROM metrics WHERE name IN "
                       "('guest.zone_reclaim_mode', 'patch_live.zone-reclaim-auto')").fetchall())
    assert m == {"guest.zone_reclaim_mode": "0", "patch_live.zone-reclaim-auto": 1.0}
