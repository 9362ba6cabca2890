"""Seed 003 small, end to end: qsbench above RAM on a 4-CPU two-node
machine, vanilla 6.1 against allocators-reclaim (Rik's patch in 6.1's
terms: an allocator that wakes kswapd first reclaims a batch itself), in
one command per perturbation seed, read through the seed page's own row
(seeds/tables.py, S003): system time on the guest clock, the sorters' exact
CPU time less their user time in the profile. getrusage's system time is a
split by 100 Hz ticks and too noisy to hold a direction of this size.

Measured 2026-12-01 with `--timing fast` (the profile, on instruction
counts: the extra reclaim is the kernel's work), `mem_frac=1.1`, seeds 0 /
1 / 2 (the test runs 1 and 2, for CI's time): system on the guest clock
0.330 / 0.301 / 0.300 s on vanilla and 0.356 / 0.344 / 0.342 s with the
patch (about +12 %, the ranges apart), where getrusage's split gave 0.380
/ 0.297 / 0.311 against 0.366 / 0.384 / 0.324 (overlapping); direct
reclaim's steals 1569 / 140 / 643 against 12119 / 12027 / 11578. The campaign's detailed runs on a 2-CPU 256 MiB
machine show the same rise, by about a seventh, on both disks
(docs/results/seeds.md). Elapsed time is not asserted: as in the seed, the
kernels are within a per cent. Slow; CI runs it (allocators-reclaim is a
shipped patch set CI builds anyway)."""
import pytest

from images import variants as kvar
from seeds.kit import delta, fig
from seeds.tables import S003
from tests.e2e import REPO, db, metrics, reproducer_ok, vmlab

TOPO = REPO / "tests" / "data" / "x86-2s-small.toml"
SEEDS = (1, 2)
pytestmark = pytest.mark.boot
ROWS = {row.key: row for table in S003.tables for row in table.rows}


@pytest.fixture(scope="module")
def sorts(tmp_path_factory, vmlab_env):
    tmp = tmp_path_factory.mktemp("seed003")
    for seed in SEEDS:
        r = vmlab(vmlab_env, tmp, "--topology", str(TOPO), "--exp", "qsbench", "--kernel", "vanilla,allocators-reclaim",
                  "--timing", "fast", "--param", "mem_frac=1.1", "--seed", str(seed))
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    c = db(tmp)
    runs = c.execute("SELECT * FROM runs WHERE status = 'ok' ORDER BY id").fetchall()
    assert sorted((x["patch_set"], x["seed"]) for x in runs) == sorted(
        (k, s) for k in ("vanilla", "allocators-reclaim") for s in SEEDS)
    return c, runs


def test_both_kernels_sorted_the_same_array_above_ram(sorts):
    c, runs = sorts
    sums = set()
    for x in runs:
        assert x["kernel_flavor"] == "default" and x["timing_mode"] == "fast"
        live = {n for (n,) in c.execute("SELECT name FROM metrics WHERE run_id = ? AND name LIKE 'patch_live.%'",
                                        (x["id"],))}
        assert live == {f"patch_live.{k}" for k in kvar.components(x["patch_set"])}
        assert fig("qsbench.pswpout")(c, x["id"]) > 0 and fig("qsbench.majflt")(c, x["id"]) > 0
        sums.add(c.execute("SELECT text FROM metrics WHERE run_id = ? AND name = 'qsbench.checksum'",
                           (x["id"],)).fetchone()[0])
    assert len(sums) == 1  # same qs_seed, same array, whatever the kernel and the perturbation


def test_the_allocators_reclaim_for_themselves_and_their_system_time_rises(sorts):
    c, runs = sorts
    by = {k: [x["id"] for x in runs if x["patch_set"] == k] for k in ("vanilla", "allocators-reclaim")}
    # the patch's mechanism: an allocator that woke kswapd reclaims a batch itself
    steals = delta("pgsteal_direct")  # the page's vmstat reader
    van_steals = [steals(c, r) for r in by["vanilla"]]
    per_steals = [steals(c, r) for r in by["allocators-reclaim"]]
    assert min(per_steals) > 4 * max(van_steals), (van_steals, per_steals)
    # the seed's direction, on the page's own row: every run with the patch above every vanilla run
    clock = ROWS["system_clock"].value
    van, per = [clock(c, r) for r in by["vanilla"]], [clock(c, r) for r in by["allocators-reclaim"]]
    assert min(per) > max(van) > 0, (van, per)
    # and it is the sort's time, not the whole kernel's: under its exact CPU time
    for r in by["vanilla"] + by["allocators-reclaim"]:
        busy = fig("qsbench.user_s")(c, r) + fig("qsbench.sys_s")(c, r)
        assert 0 < clock(c, r) < 0.2 * busy


def test_the_reproducer_records_each_sort(sorts):
    """qsbench's own records on every run (the reproducer's end-to-end check,
    which had two runs of its own in tests/test_reproducers.py)."""
    c, runs = sorts
    for x in runs:
        reproducer_ok(c, x["id"], "qsbench")
        m = metrics(c, x["id"])
        assert m["qsbench.elapsed_s"] > 0 and m["qsbench.host_wall_s"] > 0  # the guest's clock and the host's
        procs = c.execute("SELECT * FROM qsbench_procs WHERE run_id = ?", (x["id"],)).fetchall()
        ram_mib = 128  # x86-2s-small: 2 x 64 MiB
        assert len(procs) == 1 and procs[0]["unsorted"] == 0
        assert procs[0]["elements"] == round(1.1 * ram_mib) * (1 << 20) // 4
        assert len(m["qsbench.checksum"]) == 16
