"""The out-of-order core of the timing model (timing/model_core.h) on
synthetic access streams, outside QEMU: tests/c/core_mlp.c drives the model's
C API and checks each figure against the config's own numbers (a dependent
chase pays the full latency, independent misses overlap up to the fill
buffers, a stream reaches the L2 queue's Little's-law bandwidth, stores drain
through the store buffer, a full reorder window stalls, a lock operation is a
barrier, a node's CPUs together stop at its memory bandwidth)."""
import subprocess
from pathlib import Path

import pytest

import timing as T
import topologies
from experiments import facts
from tests.cbuild import gcc

MODEL_C = [str(s) for s in T.SOURCES if s.name.startswith("model") and s.suffix == ".c"]


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    return gcc(tmp_path_factory.mktemp("core") / "core_mlp", Path(__file__).parent / "c" / "core_mlp.c", *MODEL_C,
               include=[T.HERE])


def run(harness, tmp_path, topo, scenario, **override):
    text = T.config_text(topologies.load(topo), "detailed", tmp_path / "o.json")
    lines = [f"{ln.split()[0]} {override[ln.split()[0]]}" if ln.split()[0] in override else ln
             for ln in text.splitlines()]
    cfg = tmp_path / "t.conf"
    cfg.write_text("\n".join(lines) + "\n")
    r = subprocess.run([str(harness), str(cfg), scenario], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.startswith("ok"), r.stdout + r.stderr
    return r.stdout


@pytest.mark.parametrize("topo", ["x86-2s", "gs1280-8"])
@pytest.mark.parametrize("scenario", ["chase", "random", "stream", "stores", "atomic", "prefetch-random",
                                      "node-stream", "copy"])
def test_core_rules_on_each_native_core(harness, tmp_path, topo, scenario):
    run(harness, tmp_path, topo, scenario)


def test_a_full_reorder_window_stalls(harness, tmp_path):
    # fill buffers plentiful, so the window (32 instructions = 4 misses at 8 per miss) is the bound
    run(harness, tmp_path, "x86-2s", "rob", fill_buffers=64, l2_queue=128, rob=32)


def test_a_one_entry_store_buffer_serialises_store_misses(harness, tmp_path):
    run(harness, tmp_path, "x86-2s", "stores", store_buffer=1)


def test_many_cpus_streaming_stop_at_the_node_s_memory_bandwidth(harness, tmp_path):
    # 4 CPUs could pull about 50 GB/s; a node of 30 GB/s gives them 30
    out = run(harness, tmp_path, "x86-2s", "node-stream", mem_bw_gbps=30)
    assert "memory_GBps 30.00" in out


def test_a_woken_cpu_joins_the_others_in_time_and_shares_the_bandwidth(harness, tmp_path):
    # the model's clocks follow the engine's (vm_sync_time): a vCPU back from halt streams beside
    # the running one, not in the model's past; two cores could pull ~25 GB/s from a 15 GB/s node:
    # together they get 15; without the sync they got more than the node has (only the M/D/1
    # window saw them together)
    run(harness, tmp_path, "x86-2s", "woken", mem_bw_gbps=15)
    run(harness, tmp_path, "x86-2s", "unsynced", mem_bw_gbps=15)


def test_a_cpu_moved_back_after_a_functional_warm_up_shares_the_bandwidth_again(harness, tmp_path):
    # timing/plugin.c, plugin.functional_slices: a CPU's model clock runs ahead of its vCPU's by what it
    # did not charge; at the switch it moves back (vm_shift_time) with its misses in flight, and streams
    # beside the others in one time (left 1 ms ahead, it got more than the node has: 'unsynced' above)
    run(harness, tmp_path, "x86-2s", "shifted", mem_bw_gbps=15)


def test_without_the_streamer_a_stream_is_bound_by_the_fill_buffers(harness, tmp_path):
    run(harness, tmp_path, "x86-2s", "stream", prefetch_streams=0, prefetch_distance=0)


def test_the_blocking_core_prices_every_miss_in_full(harness, tmp_path):
    # the model before memory-level parallelism: independent loads cost as much as a chase
    with pytest.raises(AssertionError, match="ns per independent load"):
        run(harness, tmp_path, "x86-2s", "random", core="blocking")


def test_core_limits_are_the_model_s_arrays():
    from topologies import core
    hdr = T.HERE / "model_core.h"
    for field, name in [("fill_buffers", "MAX_FB"), ("l2_queue", "MAX_SQ"), ("reorder_window", "MAX_ROB"),
                        ("store_buffer", "MAX_SB"), ("prefetch_streams", "MAX_STREAMS"),
                        ("prefetch_distance", "MAX_PF_DIST")]:
        assert core.LIMITS[field][1] == facts.integer(hdr, name), field


@pytest.mark.parametrize("field,value,expected", [
    ("fill_buffers", 0, "from 1 to 64"), ("fill_buffers", -3, "from 1 to 64"), ("reorder_window", 1e9, "whole number"),
    ("store_buffer", "nan", "whole number"), ("l2_queue", 100000, "from 1 to 128"),
    ("prefetch_distance", 64, "from 0 to 63"), ("model", "'speculative'", "'out-of-order' or 'blocking'"),
    ("fill_buffers", True, "whole number")])
def test_bad_core_figures_get_one_line_naming_file_and_field(tmp_path, field, value, expected):
    src = (topologies.HERE / "x86-2s.toml").read_text()
    v = "true" if value is True else value
    if "[core]" in src:
        import re
        src = re.sub(rf"^{field} = .*$", f"{field} = {v}", src, count=1, flags=re.M) if re.search(
            rf"^{field} = ", src, re.M) else src.replace("[core]\n", f"[core]\n{field} = {v}\n")
    else:
        src += f"\n[core]\n{field} = {v}\n"
    p = tmp_path / "bad.toml"
    p.write_text(src)
    with pytest.raises(topologies.TopologyError) as e:
        topologies.load(str(p))
    msg = str(e.value)
    assert msg.startswith(f"{p}: field 'core.{field}'") and expected in msg and "\n" not in msg


def test_a_queue_smaller_than_the_fill_buffers_is_refused(tmp_path):
    src = (topologies.HERE / "x86-2s.toml").read_text()
    import re
    src = re.sub(r"^l2_queue = .*$", "l2_queue = 4", src, flags=re.M)
    p = tmp_path / "q.toml"
    p.write_text(src)
    with pytest.raises(topologies.TopologyError, match=r"core.l2_queue': at least core.fill_buffers"):
        topologies.load(str(p))


def test_loaded_latency_rises_toward_saturation_and_bandwidth_stops_at_the_node_s(harness, tmp_path):
    """MLC's --loaded_latency shape: flat while the controller has room, then
    rising as the node's CPUs ask for more than its bandwidth, which they
    never get past (a socket's 20 cores, scaled: x86-2s with 20 CPUs a node)."""
    src = (topologies.HERE / "x86-2s.toml").read_text().replace("cpus_per_node = 4", "cpus_per_node = 20")
    p = tmp_path / "x20.toml"
    p.write_text(src)
    text = T.config_text(topologies.load(str(p)), "detailed", tmp_path / "o.json")
    cfg = tmp_path / "x20.conf"
    cfg.write_text(text)
    r = subprocess.run([str(harness), str(cfg), "loaded"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "ok loaded curve of 20 CPUs" in r.stdout, r.stdout + r.stderr
    rows = [tuple(map(float, ln.split())) for ln in r.stdout.splitlines()[1:21]]
    (_, bw1, lat1), (_, bw20, lat20) = rows[0], rows[-1]
    assert lat1 == pytest.approx(81.0, abs=1.0)                       # idle: the topology's latency
    assert lat20 > 2 * lat1                                            # saturated: queues, as MLC's curve climbs
    assert bw20 == pytest.approx(105.0, rel=0.05) and bw20 < 20 * bw1   # capped at the node's bandwidth
