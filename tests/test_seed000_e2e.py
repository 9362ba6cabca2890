"""Seed 000 small, end to end: mlockchurn on a 4-CPU two-node machine (64
MiB nodes, the two locked slots filling most of the first), vanilla 6.1
against the period set (mlocked-on-lru: mlocked pages on the normal LRU and
kswapd without its backoff, as 2.4.9 was), in one command.

The direction that holds at this size is the seed's mechanism: reclaim meets
the locked pages again and again, so the period set scans several times the
pages for the same pages reclaimed, and kswapd takes more CPU over the churn.
It is the kernel's, so the runs are functional (--timing off): measured
2026-11-30, pgscan 66,321 -> 514,297, reclaimed per scanned 0.99 -> 0.13,
kswapd CPU share 0.30 -> 0.81, 21 s of wall for both kernels. Under the
detailed model (2026-11-28, model 4) the same directions were 66,485 ->
482,935, 0.99 -> 0.135 and 0.32 -> 0.76, but the pair took 17 wall minutes, a
sixth of what a cold CI may spend; seed 000's figures on the detailed model
are the campaign's (docs/results/seeds.md), and the default run's life on
the detailed model is test_e2e.py's. Not asserted: kswapd's share while the
program sleeps, the seed's "100 %": on this machine it was 1.00 CPU with
timing off (sleep_s=2) and 0 under the detailed model (sleep_s=1), a storm
that does or does not outlast the churn depending on its timing
(docs/seeds.md). Slow; CI runs it (the kernels are the shipped patch sets CI
builds anyway)."""
import json

import pytest

from analysis.rows import metrics
from tests.e2e import REPO, db, vmlab

TOPO = REPO / "tests" / "data" / "x86-2s-small.toml"
pytestmark = pytest.mark.boot


@pytest.fixture(scope="module")
def churn(tmp_path_factory, vmlab_env):
    tmp = tmp_path_factory.mktemp("seed000")
    r = vmlab(vmlab_env, tmp, "--topology", str(TOPO), "--exp", "mlockchurn", "--kernel", "vanilla,mlocked-on-lru",
              "--param", "sleep_s=1", "--timing", "off")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    c = db(tmp)
    runs = {x["patch_set"]: x for x in c.execute("SELECT * FROM runs WHERE status = 'ok'")}
    assert set(runs) == {"vanilla", "mlocked-on-lru"}
    figs = {ps: metrics(c, x["id"]) for ps, x in runs.items()}
    return r, runs, figs


def test_both_kernels_churned_from_the_snapshot(churn):
    r, runs, figs = churn
    for ps, x in runs.items():
        assert x["timing_mode"] == "off" and x["start"] == "restored"
        assert json.loads(x["params_json"])["sleep_s"] == 1
        assert figs[ps]["mlockchurn.sanity_ok"] == 1
    assert figs["mlocked-on-lru"]["patch_live.mlocked-on-lru"] == 1


def test_the_period_set_scans_the_locked_pages_again_and_again(churn):
    r, runs, figs = churn
    van, per = figs["vanilla"], figs["mlocked-on-lru"]
    assert per["mlockchurn.pgscan"] > 3 * van["mlockchurn.pgscan"], (van, per)
    assert per["mlockchurn.reclaim_efficiency"] < 0.5 * van["mlockchurn.reclaim_efficiency"], (van, per)
    assert per["mlockchurn.kswapd_cpu_share"] > 1.2 * van["mlockchurn.kswapd_cpu_share"], (van, per)
    # one command, two kernels: the comparison names both
    assert "mlocked-on-lru" in r.stdout and "vanilla" in r.stdout
