"""The shared L3 per socket of the x86 shapes (timing/model_memsys.c),
outside QEMU: tests/c/l3_socket.c on a blocking core, where each access's
stall is its latency. A line pushed out of an L2 comes back from the socket's
L3 at its latency; a line another CPU of the socket holds comes at the
socket's transfer cost, not through memory; a modified line in the other
socket costs two hops more when homed at the writer and a memory-directory
read more when homed at the reader (as Cascade Lake's MLC figures differ);
a line written elsewhere leaves every L3."""
import subprocess
from pathlib import Path

import pytest

import timing as T
import topologies
from tests.cbuild import gcc
from timing.plugin_config import config_text


@pytest.fixture(scope="module")
def figures(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("l3")
    exe = gcc(tmp / "l3_socket", Path(__file__).parent / "c" / "l3_socket.c", *T.MODEL_C, include=[T.HERE])
    topo = topologies.load("x86-2s")
    text = config_text(topo, "detailed", tmp / "o.json").replace("core ooo", "core blocking")
    (tmp / "t.conf").write_text(text)
    r = subprocess.run([str(exe), str(tmp / "t.conf")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.rstrip().endswith("ok"), r.stdout + r.stderr
    return topo, {k: float(v) for k, v in (ln.split() for ln in r.stdout.splitlines()[:-1])}


def test_a_line_pushed_out_of_the_l2_comes_back_from_the_socket_s_l3(figures):
    topo, f = figures
    l3 = next(c for c in topo.caches if c.name == "l3")
    assert f["memory"] == pytest.approx(T.memory_ns(topo, 0, 0), abs=0.5)
    assert f["l3_hit"] == pytest.approx(l3.latency_cycles * T.cycle_ps(topo) / 1000, abs=0.01)
    assert f["l3_hits"] == 1


def test_hand_offs_follow_the_socket_and_the_home(figures):
    topo, f = figures
    assert f["same_socket"] == pytest.approx(topo.socket_c2c_ns, abs=0.01)
    assert f["same_socket"] == pytest.approx(T.c2c_ns(topo, 0, 0, 0), abs=0.01)
    assert f["remote_homed_at_writer"] == pytest.approx(T.c2c_ns(topo, 0, 1, 1), abs=0.5)
    assert f["remote_homed_at_reader"] == pytest.approx(T.c2c_ns(topo, 0, 0, 1), abs=0.5)
    # the home's side matters: the reader's home reads its memory directory first
    assert f["remote_homed_at_reader"] > f["remote_homed_at_writer"] + 40
    assert f["shared_in_socket"] == pytest.approx(topo.socket_c2c_ns, abs=0.01)


def test_a_line_written_in_another_socket_leaves_every_l3(figures):
    topo, f = figures
    assert f["after_remote_write"] == pytest.approx(T.c2c_ns(topo, 0, 0, 1), abs=0.5)


def test_shapes_without_an_l3_keep_the_directory_path():
    t = topologies.load("gs1280-8")
    assert not any(c.name == "l3" for c in t.caches)
    assert T.c2c_ns(t, 1, 0, 0) == pytest.approx((2 * T.l2_ps(t) + t.local_latency_ns * 1000 - T.l2_ps(t)
                                                  + 2 * t.hops[1][0] * t.hop_latency_ns * 500) / 1000, abs=0.01)
