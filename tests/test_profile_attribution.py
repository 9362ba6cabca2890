"""The profile's attribution (timing/plugin_prof.c) outside QEMU: the file
is compiled with the model (for the kernel's symbols) and a harness standing
in for the engine (tests/c/prof_harness.c: a clock the test sets, a guest
memory it writes), driven block by block with ctypes, and its JSON read
back: the columns add up to the engine's clock, a halt's gap is idle, what
the columns miss is drift, blocks of two symbols stay apart, user text is
named by the programs' table, and a stack walk over a known frame chain
keeps the frames whose call instruction calls the frame below."""
import ctypes
import json
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

import timing
import topologies
from tests.cbuild import SHARED, gcc
from timing.plugin_config import config_text

REPO = Path(__file__).resolve().parent.parent
KBASE = 0xFFFF800000000000
TEXT = 0xFFFFFFFF81000000
# a System.map: three kernel functions 0x100 apart
FUNCS = {"shrink_active_list": TEXT, "page_referenced": TEXT + 0x100, "_raw_spin_lock": TEXT + 0x200,
         "memcpy_erms": TEXT + 0x300}
STACK = 0xFFFFC90000004000   # a kernel stack page (vmalloc'd stacks)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("prof")
    (d / "inc").mkdir()
    (d / "inc" / "qemu-plugin.h").write_text("#include <stdbool.h>\n#include <stdint.h>\n#include <glib.h>\n"
                                             "uint64_t qemu_plugin_vcpu_clock_ps(void);\n"
                                             "bool qemu_plugin_read_memory_vaddr(uint64_t, GByteArray *, size_t);\n")
    cflags, libs = (subprocess.run(["pkg-config", opt, "glib-2.0"], capture_output=True, text=True)
                    for opt in ("--cflags", "--libs"))
    return gcc(d / "prof.so", REPO / "timing" / "plugin_prof.c", REPO / "tests" / "c" / "prof_harness.c",
               *timing.MODEL_C, flags=(*SHARED, *cflags.stdout.split()), include=[d / "inc", REPO / "timing"],
               libs=[*libs.stdout.split(), "-lm"])


class Prof:
    def __init__(self, built, tmp_path, user_syms="", sample_ps=0, pause_extra_ps=0):
        so = tmp_path / "prof.so"
        shutil.copy(built, so)
        self.lib = lib = ctypes.CDLL(str(so))
        u64, u32 = ctypes.c_uint64, ctypes.c_uint32
        lib.vm_model_new.restype = ctypes.c_void_p
        lib.vm_model_new.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
        lib.prof_init.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, u64, u64, u64, ctypes.c_char_p,
                                  ctypes.c_size_t]
        lib.prof_symbol.argtypes = [u64, ctypes.c_int]
        lib.prof_symbol.restype = u32
        lib.prof_block.argtypes = [ctypes.c_uint, u32, u32, u32, ctypes.c_int, u64]
        lib.prof_charge.argtypes = [ctypes.c_uint, ctypes.c_int, u64]
        lib.prof_observe.argtypes = [ctypes.c_uint, u64]
        lib.prof_phase.argtypes = [ctypes.c_uint, ctypes.c_int, u64, u64]
        lib.prof_stack.argtypes = [ctypes.c_uint, u64]
        lib.h_clock.argtypes = [u64]
        lib.h_mem_base.argtypes = [u64]
        lib.h_poke.argtypes = [u64, ctypes.c_char_p, ctypes.c_size_t]
        smap = tmp_path / "System.map"
        smap.write_text("".join(f"{a:016x} T {n}\n" for n, a in FUNCS.items()))
        conf = tmp_path / "t.conf"
        conf.write_text(config_text(topologies.load("x86-2s"), "detailed", tmp_path / "o.json", symbols=smap))
        err = ctypes.create_string_buffer(512)
        self.m = lib.vm_model_new(str(conf).encode(), err, 512)
        assert self.m, err.value
        us = tmp_path / "user.syms"
        us.write_text(user_syms)
        self.out = tmp_path / "profile.json"
        assert lib.prof_init(self.m, str(self.out).encode(), str(us).encode(), pause_extra_ps, sample_ps, KBASE,
                             err, 512) == 0, err.value
        self.clock = 0

    def sym(self, pc, user=False):
        return self.lib.prof_symbol(pc, int(user))

    def block(self, cpu, pc, n, insn_ps=250, npause=0, halt=False, user=False, extra_ps=0):
        """The engine starts the block: its instructions (and PAUSEs, and what else it adds) on the clock."""
        self.clock += n * insn_ps + extra_ps
        self.lib.h_clock(self.clock)
        self.lib.prof_block(cpu, self.sym(pc, user), n, npause, int(halt), insn_ps)

    def charge(self, cpu, what, ps):
        self.clock += ps
        self.lib.prof_charge(cpu, what, ps)

    def result(self):
        assert self.lib.prof_write() == 0
        return json.loads(self.out.read_text())


CORE, CORE_PREV, MEM, FETCH = range(4)


def by_symbol(res, cpu=0):
    return {(s["symbol"], s["phase"]): s for s in res["symbols"] if s["cpu"] == cpu}


def time_of(s):
    return s["insn_ps"] + s["core_ps"] + s["mem_ps"] + s["fetch_ps"] + s["pause_ps"]


def test_columns_add_up_to_the_clock_and_two_symbols_stay_apart(built, tmp_path):
    p = Prof(built, tmp_path, pause_extra_ps=1000)
    p.block(0, FUNCS["page_referenced"] + 8, 10)
    p.charge(0, MEM, 5000)                       # a miss in page_referenced
    p.block(0, FUNCS["_raw_spin_lock"], 4, npause=1, extra_ps=1000)
    p.charge(0, CORE_PREV, 700)                  # the core's rest of the previous block: page_referenced's
    p.charge(0, MEM, 300)
    p.lib.prof_observe(0, p.clock)               # the engine's clock agrees: no drift
    res = p.result()
    s = by_symbol(res)
    pr, lk = s[("page_referenced", 0)], s[("_raw_spin_lock", 0)]
    assert (pr["insns"], pr["insn_ps"], pr["mem_ps"], pr["core_ps"]) == (10, 2500, 5000, 700)
    assert (lk["insns"], lk["pauses"], lk["pause_ps"], lk["mem_ps"]) == (4, 1, 1000, 300)
    cpu = res["cpus"][0]
    assert cpu["drift_ps"] == 0 and cpu["idle_ps"] == 0
    assert time_of(pr) + time_of(lk) == cpu["accounted_ps"] == p.clock - cpu["start_ps"]


def test_a_halt_s_gap_is_idle_and_a_missed_charge_is_drift(built, tmp_path):
    p = Prof(built, tmp_path)
    p.block(0, FUNCS["shrink_active_list"], 5, halt=True)
    p.clock += 1_000_000                         # halted: the machine's time goes on
    p.block(0, FUNCS["shrink_active_list"], 5)
    p.clock += 40                                # a stall the plugin did not report
    p.lib.prof_observe(0, p.clock)
    cpu = p.result()["cpus"][0]
    assert cpu["idle_ps"] == 1_000_000 and cpu["drift_ps"] == 40
    assert cpu["accounted_ps"] == p.clock - cpu["start_ps"]


def test_user_text_is_named_by_the_programs_table_and_phases_split_it(built, tmp_path):
    p = Prof(built, tmp_path, user_syms="# start end symbol program\n10000000 10000100 sort_items qsbench\n"
                                        "10000100 10000180 main qsbench\n")
    assert p.sym(0x10000150, user=True) != p.sym(0x10000010, user=True)
    p.block(0, 0x10000010, 30, user=True)
    p.lib.prof_phase(0, 1, 7, 1)                 # VM_PHASE_BEGIN (model.h) of phase id 7
    p.block(0, 0x10000150, 20, user=True)
    p.block(0, 0x20000000, 3, user=True)         # no program's text: [user]
    res = p.result()
    s = by_symbol(res)
    assert s[("sort_items", 0)]["insns"] == 30 and s[("main", 1)]["insns"] == 20
    assert {x["dso"] for x in res["symbols"]} == {"qsbench", "[user]"}
    assert res["phases"] == [{"index": 1, "id": 7, "instance": 1}]


def _call(ret, target):
    """The 5 bytes of `call rel32` ending at ret."""
    return b"\xe8" + struct.pack("<i", target - ret)


def test_a_stack_walk_over_a_known_frame_chain(built, tmp_path):
    p = Prof(built, tmp_path, sample_ps=1000)
    lib = p.lib
    lib.h_mem_base(TEXT)                         # text and the stack in one window: the stack just past the text
    r1, r2 = FUNCS["page_referenced"] + 0x40, FUNCS["shrink_active_list"] + 0x30
    lib.h_poke(r1 - 5, _call(r1, FUNCS["_raw_spin_lock"]), 5)
    lib.h_poke(r2 - 5, _call(r2, FUNCS["page_referenced"]), 5)
    decoy = FUNCS["memcpy_erms"] + 0x20
    lib.h_poke(decoy - 5, _call(decoy, FUNCS["memcpy_erms"]), 5)
    rsp = TEXT + 0x8000                          # 16 KiB-aligned stack top at TEXT + 0xc000
    words = [0x1234, decoy, r1, 0xdead, r2, KBASE + 5]
    lib.h_poke(rsp, struct.pack(f"<{len(words)}Q", *words), 8 * len(words))
    p.block(0, FUNCS["_raw_spin_lock"] + 4, 8)
    lib.prof_stack(0, rsp)
    res = p.result()
    assert [(s["stack"], s["samples"]) for s in res["stacks"]] == \
        [("shrink_active_list;page_referenced;_raw_spin_lock", 1)]
    assert res["stacks"][0]["ps"] == 2000 and res["cpus"][0]["samples"] == 1


def test_a_leaf_that_pushes_nothing_is_the_sample_s_leaf_under_the_walk(built, tmp_path):
    """The time came due in a leaf without a push or call (clear_page_rep's
    rep stos): it stays the leaf, under the frames walked from the caller's
    next call."""
    p = Prof(built, tmp_path, sample_ps=1000)
    lib = p.lib
    lib.h_mem_base(TEXT)
    r1, r2 = FUNCS["page_referenced"] + 0x40, FUNCS["shrink_active_list"] + 0x30
    lib.h_poke(r1 - 5, _call(r1, FUNCS["_raw_spin_lock"]), 5)
    lib.h_poke(r2 - 5, _call(r2, FUNCS["page_referenced"]), 5)
    rsp = TEXT + 0x8000
    lib.h_poke(rsp, struct.pack("<2Q", r1, r2), 16)
    p.block(0, FUNCS["memcpy_erms"] + 4, 8)      # due here
    p.block(0, FUNCS["_raw_spin_lock"] + 4, 2)   # back in the caller, which calls next
    lib.prof_stack(0, rsp)
    assert [s["stack"] for s in p.result()["stacks"]] == \
        ["shrink_active_list;page_referenced;_raw_spin_lock;memcpy_erms"]
