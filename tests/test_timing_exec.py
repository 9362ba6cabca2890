"""The timing model's dataflow core (timing/model_exec.c, model_bpred.c) and
its decoders (timing/decode_x86.c, decode_alpha.c), outside QEMU:
tests/c/core_exec.c runs synthetic blocks of decoded instructions through the
model's C API and checks each figure against the config's own numbers: a
dependent chain costs its latency sum, independent chains reach the width, a
divider's throughput is its busy time, a load's consumer waits for the miss
(a chase through registers or through a spilled value pays the full memory
latency), independent loads overlap, a random branch pays half the penalty;
the decoders give the registers and classes the manuals say for known bytes."""
import subprocess
from pathlib import Path

import pytest

import timing as T
import topologies
from tests import bootstrapped
from tests.cbuild import gcc
from timing.plugin_config import config_text


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    bootstrapped.apt("libcapstone-dev")
    return gcc(tmp_path_factory.mktemp("exec") / "core_exec", Path(__file__).parent / "c" / "core_exec.c",
               *T.MODEL_C, *T.DECODE_C, include=[T.HERE], libs=["-lcapstone"])


def run(harness, tmp_path, topo, scenario):
    cfg = tmp_path / "t.conf"
    cfg.write_text(config_text(topologies.load(topo), "detailed", tmp_path / "o.json"))
    r = subprocess.run([str(harness), str(cfg), scenario], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.startswith("ok"), r.stdout + r.stderr
    return r.stdout


@pytest.mark.parametrize("topo", ["x86-2s", "gs1280-8"])
@pytest.mark.parametrize("scenario", ["dep-add", "indep-add", "mul", "div32", "div-throughput", "chase",
                                      "index-chase", "indep-loads", "random-index", "stream", "stream-op",
                                      "branch-predictable", "branch-random", "forward", "cut", "pops",
                                      "div-behind-miss"])
def test_the_core_prices_each_pattern_by_the_topology_s_figures(harness, tmp_path, topo, scenario):
    run(harness, tmp_path, topo, scenario)


@pytest.mark.parametrize("scenario", ["decode-x86", "decode-alpha"])
def test_known_instruction_bytes_decode_to_the_manual_s_registers(harness, tmp_path, scenario):
    run(harness, tmp_path, "x86-2s", scenario)
