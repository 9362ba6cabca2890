"""The timing plugin's machine-wide slices (timing/plugin_bbv.c) outside
QEMU: the file is compiled with a harness standing in for the engine calls
it makes (tests/c/bbv_harness.c) and driven with ctypes, block by block;
its files are read back with the readers the pipeline uses. Slice
boundaries, a checkpoint's stop (on time and refused while a disk request
is outstanding), a first slice shortened for a late checkpoint, the TLB
resets at checkpoint points, the machine's idle time, and the cache
filter's misses by hop class."""
import ctypes
import shutil
import subprocess
from pathlib import Path

import pytest

from engine import regions
from sampling import simpoint
from tests.cbuild import SHARED, gcc

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("bbv")
    (d / "inc").mkdir()
    # plugin_bbv.c needs only these of QEMU's plugin API (series patch 0008)
    (d / "inc" / "qemu-plugin.h").write_text("#include <stdbool.h>\n#include <stdint.h>\n"
                                             "bool qemu_plugin_machine_stop(void);\n"
                                             "bool qemu_plugin_machine_can_stop(void);\n"
                                             "void qemu_plugin_machine_stop_for_exit(void);\n"
                                             "bool qemu_plugin_tlb_reset(void);\n"
                                             "uint64_t qemu_plugin_vcpu_clock_ps(void);\n")
    cflags, libs = (subprocess.run(["pkg-config", opt, "glib-2.0"], capture_output=True, text=True)
                    for opt in ("--cflags", "--libs"))
    if cflags.returncode or libs.returncode:
        pytest.fail("glib's development files are missing (the QEMU build needs them too): "
                    "apt-get install libglib2.0-dev")
    return gcc(d / "bbv.so", REPO / "timing" / "plugin_bbv.c", REPO / "tests" / "c" / "bbv_harness.c",
               flags=(*SHARED, *cflags.stdout.split()), include=[d / "inc", REPO / "timing"], libs=libs.stdout.split())


class Plugin:
    """A fresh copy of the plugin (its state is static: one library file per test)."""

    def __init__(self, built, tmp_path, interval, ncpus):
        so = tmp_path / "bbv.so"
        shutil.copy(built, so)
        self.lib = lib = ctypes.CDLL(str(so))
        u64 = ctypes.c_uint64
        lib.bbv_init.argtypes = [ctypes.c_char_p, u64, ctypes.c_int, ctypes.c_int]
        lib.bbv_exec.argtypes = [ctypes.c_uint, ctypes.c_uint32, ctypes.c_uint32, u64, ctypes.c_int, ctypes.c_int]
        lib.bbv_block_id.argtypes = [u64, ctypes.c_size_t]
        lib.bbv_block_id.restype = ctypes.c_uint32
        lib.bbv_set_stop.argtypes = [u64, ctypes.c_void_p]
        lib.bbv_set_first_done.argtypes = [u64]
        lib.bbv_set_points.argtypes = [ctypes.c_int]
        lib.bbv_set_stop_for_exit.argtypes = [ctypes.c_int]
        lib.bbv_set_mem.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_void_p]
        lib.bbv_mem.argtypes = [ctypes.c_uint, u64]
        lib.h_clock.argtypes = [u64]
        self.dir = tmp_path
        lib.bbv_init(str(tmp_path).encode(), interval, ncpus, 1)

    def run(self, cpu, n=10, pc=0x1000, spin=0, halt=0):
        self.lib.bbv_exec(cpu, self.lib.bbv_block_id(pc, n), n, pc, spin, halt)

    def close(self):
        self.lib.bbv_close()
        return simpoint.read_slices(self.dir / "bbv.global.slices")


def test_slices_end_at_the_interval_and_count_every_vcpu_spin_left_out(built, tmp_path):
    p = Plugin(built, tmp_path, 100, 2)
    for i in range(25):
        p.run(i % 2, pc=0x1000 + 0x40 * (i % 2))
    p.run(0, spin=1, pc=0x2000)  # a PAUSE block: in cpu 0's count (13 blocks + it), not in the slice
    rows = p.close()
    assert [r["insns"] for r in rows] == [100, 100, 50]
    assert [r["cpu_insns"] for r in rows] == [[50, 50], [100, 100], [140, 120]]
    assert rows[-1]["spin_insns"] == 10
    assert simpoint.read_bb(tmp_path / "bbv.global.bb").n == 3


def test_a_late_checkpoint_s_first_slice_ends_sooner_so_boundaries_stay_the_profile_s(built, tmp_path):
    p = Plugin(built, tmp_path, 100, 2)
    p.lib.bbv_set_first_done(30)
    for i in range(20):
        p.run(i % 2)
    assert [r["insns"] for r in p.close()] == [70, 100, 30]


def stops_after(built, d, refuse):
    """A run that stops at boundary 2 of 100-instruction slices, its disk
    busy for `refuse` tries there: the stop line it logged."""
    d.mkdir()
    p = Plugin(built, d, 100, 2)
    p.lib.bbv_set_stop(2, None)
    p.lib.h_refuse(refuse)
    for i in range(30):
        p.run(i % 2)
    p.close()
    assert p.lib.h_stops() == 1
    return regions._stops(d / "bbv.stops")


def test_the_machine_stops_at_its_boundary_or_at_the_first_block_it_may(built, tmp_path):
    assert stops_after(built, tmp_path / "a", 0) == [{"boundary": 2, "late_insns": 0, "cpu_insns": [100, 100]}]
    # a modelled disk request outstanding for three more tries
    assert stops_after(built, tmp_path / "b", 3) == [{"boundary": 2, "late_insns": 30, "cpu_insns": [120, 110]}]


def test_idle_time_runs_from_the_last_vcpu_s_halt_to_the_first_wake_up(built, tmp_path):
    p = Plugin(built, tmp_path, 100, 2)
    p.lib.h_clock(1_000)
    p.run(0)
    p.run(1)                # both awake: the time before is not known idle (a restored machine's start)
    p.lib.h_clock(2_000)
    p.run(0, halt=1)        # cpu 0 halts; cpu 1 still runs
    p.lib.h_clock(3_000)
    p.run(1, halt=1)        # the machine is idle from here...
    p.lib.h_clock(8_000)
    p.run(0)                # ...to here: 5000 ps
    p.lib.h_clock(9_000)
    for _ in range(6):
        p.run(1)
    rows = p.close()
    assert rows[0]["idle_ps"] == 5_000 and rows[0]["machine_ps"] == 9_000
    assert rows[1]["idle_ps"] == 0


def test_filter_misses_are_counted_per_vcpu_by_hops_to_the_line_s_home(built, tmp_path):
    p = Plugin(built, tmp_path, 100, 4)
    p.lib.bbv_set_mem(2, 64, ctypes.cast(p.lib.h_hop, ctypes.c_void_p))
    for cpu, addr in [(0, 0x1000), (0, 0x1008), (0, 1 << 30), (2, 0x1000), (2, 0x1000), (0, 0x1000)]:
        p.lib.bbv_mem(cpu, addr)  # the same line again is a hit; vCPU 2 has a filter of its own
    p.run(0, n=100)
    rows = p.close()
    assert rows[0]["miss_hops"] == [1, 2]


def test_tlbs_are_reset_at_the_first_block_and_after_each_checkpoint_point(built, tmp_path):
    p = Plugin(built, tmp_path, 100, 2)
    p.lib.bbv_set_points(1)
    resets = []
    for i in range(35):
        if i == 19:
            p.lib.h_refuse(2)  # boundary 2 (crossed by block 19): a disk request outstanding for two blocks
        p.run(i % 2)
        resets.append(p.lib.h_resets())
    p.close()
    # block 0 resets (a run's start); boundary 1 is crossed by block 9, its
    # point is there, the reset at block 10; boundary 2 (block 19) is a
    # point only at block 21, the reset at block 22; boundary 3 at block 29
    changes = [i for i in range(35) if resets[i] != (resets[i - 1] if i else 0)]
    assert changes == [0, 10, 22, 30]
    assert p.lib.h_stops() == 0  # points stop nothing
    # each slice says how far into it its start boundary's point came
    assert [r["point_late"] for r in simpoint.read_slices(tmp_path / "bbv.global.slices")] == [0, 0, 20, 0]


def test_without_points_nothing_is_reset(built, tmp_path):
    p = Plugin(built, tmp_path, 100, 2)
    for i in range(30):
        p.run(i % 2)
    p.close()
    assert p.lib.h_resets() == 0


def test_a_region_s_end_stops_with_a_disk_request_outstanding_a_checkpoint_waits(built, tmp_path):
    (tmp_path / "a").mkdir()
    region = Plugin(built, tmp_path / "a", 100, 2)
    region.lib.bbv_set_points(1)
    region.lib.bbv_set_stop(2, None)
    region.lib.bbv_set_stop_for_exit(1)
    region.lib.h_refuse(1)  # at the warm-up's boundary 1: the point waits a block, as in the profile
    for i in range(25):
        region.run(i % 2)
        if i == 17:
            region.lib.h_refuse(5)  # busy at the end: the region stops all the same
    region.close()
    assert regions._stops(tmp_path / "a" / "bbv.stops")[0]["late_insns"] == 0
    assert [r["point_late"] for r in simpoint.read_slices(tmp_path / "a" / "bbv.global.slices")][:2] == [0, 10]
