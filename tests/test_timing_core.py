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
from protocol import facts
from tests.cbuild import gcc
from timing.plugin_config import config_text


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    return gcc(tmp_path_factory.mktemp("core") / "core_mlp", Path(__file__).parent / "c" / "core_mlp.c", *T.MODEL_C,
               include=[T.HERE])


def run(harness, tmp_path, topo, scenario, **override):
    text = config_text(topologies.load(topo), "detailed", tmp_path / "o.json")
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
    # the classes of instruction, in the order the config's exec lines take them
    assert core.CLASSES == tuple(name for _, name in facts.xmacro(T.HERE / "model.h", "VM_EXEC_CLASSES", 2))


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
    text = config_text(topologies.load(str(p)), "detailed", tmp_path / "o.json")
    cfg = tmp_path / "x20.conf"
    cfg.write_text(text)
    r = subprocess.run([str(harness), str(cfg), "loaded"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "ok loaded curve of 20 CPUs" in r.stdout, r.stdout + r.stderr
    rows = [tuple(map(float, ln.split())) for ln in r.stdout.splitlines()[1:21]]
    (_, bw1, lat1), (_, bw20, lat20) = rows[0], rows[-1]
    assert lat1 == pytest.approx(81.0, abs=1.0)                       # idle: the topology's latency
    assert lat20 > 2 * lat1                                            # saturated: queues, as MLC's curve climbs
    assert bw20 == pytest.approx(105.0, rel=0.05) and bw20 < 20 * bw1   # capped at the node's bandwidth


# --- the pipeline's figures: width, execution classes, branch prediction (topologies/core.py) ---
def _with(tmp_path, topo, set_core=None, exec_table=None, name="t.toml"):
    """topo's file with [core] fields replaced (or added) and, if given, its
    [core.exec] table's lines replaced by exec_table's."""
    import re
    src = (topologies.HERE / f"{topo}.toml").read_text()
    for field, v in (set_core or {}).items():
        src, n = re.subn(rf"^{field} = .*$", f"{field} = {v}", src, count=1, flags=re.M)
        if not n:
            src = src.replace("[core]\n", f"[core]\n{field} = {v}\n", 1)
    if exec_table is not None:
        src = re.sub(r"^\[core\.exec\]\n(?:(?!\[).*\n)*", "[core.exec]\n" + "".join(f"{ln}\n" for ln in exec_table)
                     + "\n", src, count=1, flags=re.M)
    p = tmp_path / name
    p.write_text(src)
    return p


@pytest.mark.parametrize("set_core,exec_table,field,expected", [
    ({"width": "0"}, None, "core.width", "a whole number from 1 to 16, got 0"),
    ({"width": "-1"}, None, "core.width", "a whole number from 1 to 16, got -1"),
    ({"width": "1.5"}, None, "core.width", "a whole number from 1 to 16, got 1.5"),
    ({"width": "true"}, None, "core.width", "a whole number from 1 to 16, got True"),
    ({}, ['alu = ["nan", 4, 1]'], "core.exec.alu", "latency_cycles a whole number from 1 to 1000, got 'nan'"),
    ({}, ["alu = [1, 4.0, 1]"], "core.exec.alu", "units a whole number from 1 to 16, got 4.0"),
    ({}, ["div64 = [35, 1, 0]"], "core.exec.div64", "busy_cycles a whole number from 1 to 1000, got 0"),
    ({}, ["mul = [3, 1]"], "core.exec.mul", "a list of three whole numbers"),
    ({}, ["mul = inf"], "core.exec.mul", "a list of three whole numbers"),
    ({"mispredict_cycles": "1e9"}, None, "core.mispredict_cycles", "a whole number from 1 to 100"),
    ({"mispredict_cycles": "101"}, None, "core.mispredict_cycles", "a whole number from 1 to 100"),
    ({"load_index_extra_cycles": "-1"}, None, "core.load_index_extra_cycles", "a whole number from 0 to 10"),
    ({"predictor_entries": "1000"}, None, "core.predictor_entries", "a power of two from 16 to 1048576, got 1000"),
    ({"predictor_entries": "8"}, None, "core.predictor_entries", "a power of two from 16 to 1048576"),
    ({"history_bits": "31"}, None, "core.history_bits", "a whole number from 0 to 30"),
    ({"btb_entries": "3000"}, None, "core.btb_entries", "a power of two from 1 to 65536"),
    ({"return_stack": "0"}, None, "core.return_stack", "a whole number from 1 to 64"),
    ({"predictor": '"perceptron"'}, None, "core.predictor", "'gshare' or 'tournament', got 'perceptron'"),
    ({}, ["teleport = [1, 1, 1]"], "core.exec.teleport",
     "alu, mul, div32, div64, fpadd, fpmul, fpdiv, vec, load, store, branch, serial; got an unknown class 'teleport'"),
])
def test_bad_pipeline_figures_get_one_line_naming_file_and_field(tmp_path, set_core, exec_table, field, expected):
    p = _with(tmp_path, "x86-2s", set_core, exec_table, name="bad.toml")
    with pytest.raises(topologies.TopologyError) as e:
        topologies.load(str(p))
    msg = str(e.value)
    assert msg.startswith(f"{p}: field '{field}': ") and expected in msg and "\n" not in msg, msg


def test_a_bad_pipeline_figure_exits_2_with_one_line(tmp_path):
    from tests.e2e import ENV, vmlab
    p = _with(tmp_path, "x86-2s", exec_table=["teleport = [1, 1, 1]"], name="bad.toml")
    r = vmlab(ENV, tmp_path, "--topology", str(p), runs_dir=False, cwd=tmp_path)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {p}: field 'core.exec.teleport': one of the known "
                                                   f"classes alu, mul,"), r.stderr
    assert not (tmp_path / "r.db").exists()


@pytest.mark.parametrize("topo", ["x86-2s", "gs1280-8"])
def test_config_has_every_class_and_the_engine_s_time_per_instruction(tmp_path, topo):
    from topologies import core
    t = topologies.load(topo)
    c = t.core
    assert c == core.NATIVE[t.native_isa]  # the shipped shapes state their native core's figures
    lines = config_text(t, "detailed", tmp_path / "o.json").splitlines()
    execs = [ln.split() for ln in lines if ln.startswith("exec ")]
    assert [e[1] for e in execs] == list(core.CLASSES)
    assert all(len(e) == 5 and all(x.isdigit() for x in e[2:]) for e in execs)
    assert execs == [["exec", k, str(x.latency), str(x.units), str(x.busy)] for k, x in c.exec_table]
    want = c.config_lines(t.cycle_ps)
    i = lines.index("core ooo")
    assert lines[i:i + len(want)] == want
    tail = want[want.index("width 4"):]
    assert tail == ["width 4", *(" ".join(e) for e in execs), f"mispredict {c.mispredict_cycles}",
                    f"load_index_extra {c.load_index_extra_cycles}",
                    f"predictor {c.predictor} {c.predictor_entries} {c.history_bits}", f"btb {c.btb_entries}",
                    f"ras {c.return_stack}", f"insn_ps {t.cycle_ps // c.width}"]
    assert c.insn_ps(t.cycle_ps) == t.cycle_ps // c.width == {"x86-2s": 100, "gs1280-8": 217}[topo]


@pytest.mark.parametrize("topo", sorted(p.stem for p in (Path(topologies.__file__).parent).glob("*.toml")
                                         if p.stem != "disks"))
def test_each_shipped_machine_states_its_native_core_s_figures(topo):
    """The topology files repeat their native core's pipeline figures with
    sources in comments: they must be the ones topologies/core.py cites (the
    memory side's may differ: an ES40's 21264 has a smaller miss queue than
    the EV7's)."""
    from topologies import core
    t = topologies.load(topo)
    native = core.NATIVE[t.native_isa]
    for name in ("width", "mispredict_cycles", "load_index_extra_cycles", "predictor", "predictor_entries",
                 "history_bits", "btb_entries", "return_stack", "exec_table"):
        assert getattr(t.core, name) == getattr(native, name), (topo, name)
    assert t.core.mispredict_cycles and "mispredict" in native.source and native.predictor in t.core.describe()


@pytest.mark.parametrize("topo", ["x86-2s", "gs1280-8"])
def test_a_topology_overriding_one_class_keeps_the_others_native(tmp_path, topo):
    from topologies import core
    t = topologies.load(str(_with(tmp_path, topo, {"width": "2"}, ["div64 = [40, 1, 30]"])))
    native = core.NATIVE[t.native_isa]
    got = dict(t.core.exec_table)
    assert got["div64"] == (40, 1, 30)
    assert {k: v for k, v in got.items() if k != "div64"} == {k: v for k, v in native.exec_table if k != "div64"}
    assert t.core.width == 2 and t.core.insn_ps(t.cycle_ps) == t.cycle_ps // 2
    assert t.core.mispredict_cycles == native.mispredict_cycles and t.core.predictor == native.predictor
    assert "exec div64 40 1 30" in t.core.config_lines(t.cycle_ps)


def test_a_core_table_without_pipeline_figures_gets_the_native_ones(tmp_path):
    from topologies import core
    p = tmp_path / "mlp-only.toml"
    # a [core] of miss-parallelism figures only, as before the pipeline's
    p.write_text((topologies.HERE.parent / "tests" / "data" / "torus3x3-custom.toml").read_text())
    t = topologies.load(str(p))
    native = core.NATIVE[t.native_isa]
    assert t.core.exec_table == native.exec_table and t.core.width == native.width
    assert t.core.btb_entries == native.btb_entries and t.core.fill_buffers != native.fill_buffers


def test_insn_ps_is_at_least_one_ps():
    from topologies import core
    assert core.Core(width=16).insn_ps(10) == 1 and core.Core(width=3).insn_ps(400) == 133


def test_pipeline_limits_are_the_model_s():
    from topologies import core
    hdr = T.HERE / "model_core.h"
    assert core.PIPELINE_LIMITS["width"][1] == facts.integer(hdr, "MAX_WIDTH")
    assert core.EXEC_LIMITS["units"][1] == facts.integer(hdr, "MAX_UNITS")
    assert core.PIPELINE_LIMITS["return_stack"][1] == facts.integer(hdr, "MAX_RAS")
