"""Address translation in the timing model (timing/model_tlb.h), outside
QEMU: tests/c/tlb_walk.c builds x86-64 page tables in a fake guest memory,
hands the model a walker over them (vm_set_mmu, as the plugin does) and
checks each figure against the topology's own numbers: a cold walk reads
four entries from memory at the tables' home node (remote tables cost the
remote latency per read), the paging-structure cache leaves one read, a
2 MiB leaf covers 512 pages, flushes drop what the hardware drops, the
reach of the L1 DTLB and the STLB, and a block's instruction fetch."""
import subprocess
from pathlib import Path

import pytest

import timing as T
import topologies
from tests.cbuild import gcc
from timing.plugin_config import config_text
from topologies import tlb


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    return gcc(tmp_path_factory.mktemp("tlb") / "tlb_walk", Path(__file__).parent / "c" / "tlb_walk.c", *T.MODEL_C,
               include=[T.HERE])


def run(harness, tmp_path, topo, scenario):
    cfg = tmp_path / "t.conf"
    cfg.write_text(config_text(topologies.load(topo), "detailed", tmp_path / "o.json"))
    r = subprocess.run([str(harness), str(cfg), scenario], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("ok"), r.stdout + r.stderr
    return r.stdout


@pytest.mark.parametrize("scenario", ["walk", "remote", "huge", "flush", "reach", "fetch"])
def test_translation_on_cascade_lake(harness, tmp_path, scenario):
    run(harness, tmp_path, "x86-2s", scenario)


def test_remote_page_tables_cost_the_remote_latency_per_read(harness, tmp_path):
    local = float(run(harness, tmp_path, "x86-2s", "walk").split()[2])
    remote = float(run(harness, tmp_path, "x86-2s", "remote").split()[2])
    topo = topologies.load("x86-2s")
    # the first walk reads 4 entries, the second 1: 5 reads, each one hop farther
    assert remote - local == pytest.approx(4 * topo.hop_latency_ns, abs=5)


def test_the_ev7_shape_has_no_second_level_tlb(harness, tmp_path):
    # gs1280's 128-entry fully associative DTB covers 512 KiB of 4 KiB pages: 1024 pages walk again
    with pytest.raises(AssertionError, match="1024 pages: within the STLB"):
        run(harness, tmp_path, "gs1280-8", "reach")


def test_tlb_table_errors_name_the_field(tmp_path):
    base = Path(topologies.__file__).parent / "x86-2s.toml"
    text = base.read_text() + '\n[tlb]\narrays = [{level = "l1d", sizes = ["4k"], entries = 48, ways = 4}]\n'
    p = tmp_path / "bad.toml"
    p.write_text(text)
    with pytest.raises(topologies.TopologyError, match=r"tlb.arrays\[0\].entries"):
        topologies.load(str(p))
    p.write_text(base.read_text() + '\n[tlb]\nmodel = "none"\n')
    t = topologies.load(str(p))
    assert not t.tlb.on and "tlb " not in config_text(t, "detailed", tmp_path / "o.json")


def test_tlb_limits_are_the_model_s_arrays():
    from protocol import facts
    h = T.HERE / "model_tlb.h"
    assert tlb.MAX_ARRAYS == facts.integer(h, "MAX_TLBS")
    assert tlb.MAX_WALKERS == facts.integer(h, "MAX_WALKERS")
    assert tlb.MAX_PSC == facts.integer(h, "MAX_PSC")
