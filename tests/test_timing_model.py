"""The timing model alone (timing/model_*.c as a shared library, driven with
ctypes): known access sequences give known hits, misses, transfers and
latencies, from the formulas the topology implies."""
import ctypes
import json
import subprocess
from pathlib import Path

import pytest

import timing as T
import topologies
from tests.cbuild import SHARED, gcc
from timing.plugin_config import config_text

R, W, A = 0, 1, 2  # read, write (VM_F_WRITE), atomic (VM_F_ATOMIC)
USER = 8


# the model without the QEMU glue (plugin.c)


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    out = gcc(tmp_path_factory.mktemp("model") / "libvmlab_model.so", *T.MODEL_C, flags=SHARED)
    lib = ctypes.CDLL(str(out))
    lib.vm_model_new.restype = ctypes.c_void_p
    lib.vm_model_new.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.vm_access.restype = ctypes.c_uint64
    lib.vm_access.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint,
                              ctypes.c_uint32, ctypes.c_void_p]
    lib.vm_insns.restype = ctypes.c_uint64
    lib.vm_insns.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_int]
    lib.vm_phase.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64]
    lib.vm_write_results.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.vm_symbol.restype = ctypes.c_uint32
    lib.vm_symbol.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
    lib.vm_cpu_time_ps.restype = ctypes.c_uint64
    lib.vm_cpu_time_ps.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.vm_model_free.argtypes = [ctypes.c_void_p]
    return lib


def blocking(text: str) -> str:
    """The config with a blocking core: each access returns its whole latency,
    which is what the pricing formulas below are checked on (the out-of-order
    core's overlap is tests/c/core_mlp.c's)."""
    return text.replace("core ooo\n", "core blocking\n")


class Model:
    def __init__(self, lib, tmp, topo, symbols=None, text=None):
        self.lib, self.topo, self.out = lib, topo, tmp / "out.json"
        cfg = tmp / "timing.conf"
        cfg.write_text(text if text is not None else blocking(config_text(topo, "detailed", self.out,
                                                                            symbols=symbols)))
        err = ctypes.create_string_buffer(1024)
        self.m = lib.vm_model_new(str(cfg).encode(), err, 1024)
        self.err = err.value.decode()

    def access(self, cpu, pa, flags=R, sym=1):
        return self.lib.vm_access(self.m, cpu, pa, pa, flags | USER, sym, None) / 1000.0  # ns

    def results(self):
        assert self.lib.vm_write_results(self.m, None) == 0
        return json.loads(self.out.read_text())

    def close(self):
        if self.m:
            self.lib.vm_model_free(self.m)


@pytest.fixture
def gs8(lib, tmp_path):
    m = Model(lib, tmp_path, topologies.load("gs1280-8"))
    assert m.m, m.err
    yield m
    m.close()


def node_addr(topo, node, offset=0):
    start, _, n, _ = next(r for r in T.address_map(topo) if r[2] == node)
    return start + offset


def test_local_miss_then_l1_hit_then_l2_hit(gs8):
    t = gs8.topo
    a = node_addr(t, 0, 1 << 20)
    assert gs8.access(0, a) == pytest.approx(t.local_latency_ns, abs=0.01)   # cold miss: load-to-use latency
    assert gs8.access(0, a + 8) == 0                                           # same line: L1 hit
    # push the line out of the 2-way L1 (same L1 set, 32 KiB apart) but not out of the 7-way L2
    l1 = next(c for c in t.caches if c.name == "l1d")
    stride = l1.size_kib * 1024 // l1.ways
    for k in (1, 2):
        gs8.access(0, a + k * stride)
    assert gs8.access(0, a) == pytest.approx(T.l2_ps(t) / 1000.0)
    r = gs8.results()["cpus"][0]
    assert (r["misses"], r["l1_hits"], r["l2_hits"]) == (3, 1, 1)


@pytest.mark.parametrize("home", range(8))
def test_remote_miss_costs_the_topology_latency_for_its_hops(lib, tmp_path, home):
    t = topologies.load("gs1280-8")
    m = Model(lib, tmp_path, t)
    try:
        got = m.access(0, node_addr(t, home, 4096))
        assert got == pytest.approx(t.latency_ns(0, home), abs=0.01)
        hops = m.results()["hops"]
        assert [(h["hops"], h["misses"]) for h in hops] == [(t.hops[0][home], 1)]
    finally:
        m.close()


def test_line_written_by_one_cpu_and_read_by_another_costs_the_transfer_formula(gs8):
    t = gs8.topo
    a = node_addr(t, 2, 8192)            # home: node 2
    gs8.access(0, a, W)                   # CPU 0 (node 0) owns it modified
    got = gs8.access(6, a)                # CPU 6 (node 6) reads: requester -> home -> owner -> requester
    assert got == pytest.approx(T.c2c_ns(t, 6, 2, 0), abs=0.01)
    legs = t.hops[6][2] + t.hops[2][0] + t.hops[0][6]
    assert got == pytest.approx(t.local_latency_ns + T.l2_ps(t) / 1000 + legs * t.hop_latency_ns / 2, abs=0.01)
    assert gs8.access(0, a) == 0          # the owner kept a shared copy
    res = gs8.results()
    c0 = res["cpus"][0]
    assert res["cpus"][6]["c2c"] == 1 and c0["writebacks"] == 1  # dirty data went home as it was shared


def test_write_to_a_shared_line_invalidates_the_other_sharers(gs8):
    t = gs8.topo
    a = node_addr(t, 0, 1 << 16)
    for c in (0, 1, 3):
        gs8.access(c, a)                  # three sharers
    gs8.access(0, a, W)                   # upgrade: the others are invalidated
    c0 = gs8.results()["cpus"][0]
    assert (c0["upgrades"], c0["invals"]) == (1, 2)
    assert gs8.access(1, a) == pytest.approx(T.c2c_ns(t, 1, 0, 0), abs=0.01)  # CPU 1 must fetch it again


def test_lock_transfers_are_counted_by_distance(gs8):
    t = gs8.topo
    a = node_addr(t, 0, 1 << 18)
    gs8.access(0, a, A)
    for _ in range(5):                    # ping-pong between node 0 and node 6 (3 hops)
        gs8.access(6, a, A)
        gs8.access(0, a, A)
    gs8.access(0, a, A)                   # already owned: no transfer
    res = gs8.results()
    locks = {h["hops"]: h["lock_xfers"] for h in res["hops"] if h["lock_xfers"]}
    assert locks == {0: 1, 3: 10}
    assert res["cpus"][0]["lock_xfers"] == 6 and res["cpus"][6]["lock_xfers"] == 5
    per = {h["hops"]: h["lock_ps"] / h["lock_xfers"] / 1000 for h in res["hops"] if h["lock_xfers"]}
    assert per[3] == pytest.approx(T.c2c_ns(t, 6, 0, 0), abs=0.5)


def test_phases_report_modeled_time_and_misses_per_cpu(gs8):
    t = gs8.topo
    lib, m = gs8.lib, gs8.m
    lib.vm_phase(m, 0, 1, 7, 3)
    lib.vm_insns(m, 0, 100, 2)
    for k in range(10):
        gs8.access(0, node_addr(t, 1, k * 4096))
    lib.vm_phase(m, 0, 2, 7, 3)
    ph = gs8.results()["phases"]
    assert len(ph) == 1 and (ph[0]["id"], ph[0]["instance"], ph[0]["misses"], ph[0]["insns"]) == (7, 3, 10, 100)
    want_ps = 100 * T.cycle_ps(t) + 10 * int(round(t.latency_ns(0, 1) * 1000))
    assert ph[0]["end_ps"] - ph[0]["begin_ps"] == pytest.approx(want_ps, rel=0.01)


def test_cyclic_walk_larger_than_l2_always_misses(gs8):
    t = gs8.topo
    l2 = next(c for c in t.caches if c.name == "l2")
    lines = 4 * l2.size_kib * 1024 // 64
    base = node_addr(t, 3)
    for _lap in range(2):
        for i in range(lines):
            gs8.access(0, base + ((i * 7919) % lines) * 64)
    c0 = gs8.results()["cpus"][0]
    assert c0["misses"] == 2 * lines and c0["l2_hits"] == 0


def test_kernel_symbols_attribute_misses(lib, tmp_path):
    smap = tmp_path / "System.map"
    smap.write_text("ffffffff81000000 T _stext\nffffffff81000100 T alpha_fn\nffffffff81000200 t beta_fn\n"
                    "ffffffff81800000 D some_data\n")
    t = topologies.load("gs1280-8")
    m = Model(lib, tmp_path, t, symbols=smap)
    try:
        assert m.lib.vm_symbol(m.m, 0xFFFFFFFF81000150) == m.lib.vm_symbol(m.m, 0xFFFFFFFF81000100) != \
            m.lib.vm_symbol(m.m, 0xFFFFFFFF81000200)
        sym = m.lib.vm_symbol(m.m, 0xFFFFFFFF81000210)
        m.lib.vm_access(m.m, 0, node_addr(t, 5), node_addr(t, 5), 4, sym, None)
        syms = m.results()["symbols"]
        assert syms == [{"symbol": "beta_fn", "accesses": 1, "misses": 1, "remote": 1,
                         "stall_ps": syms[0]["stall_ps"], "lock_xfers": 0}] and syms[0]["stall_ps"] > 0
    finally:
        m.close()


def test_bad_configs_fail_with_one_line(lib, tmp_path):
    t = topologies.load("gs1280-8")
    good = config_text(t, "detailed", tmp_path / "o.json")
    no_node = "\n".join(ln for ln in good.splitlines() if ln != "cpu_node 3 3") + "\n"
    m = Model(lib, tmp_path, t, text=no_node)
    assert not m.m and "CPU 3 has no node" in m.err and "\n" not in m.err
    bad_range = good.replace("range 0x0 0x4000000 0 0x0", "range 0x0 0x4000001 0 0x0")
    m = Model(lib, tmp_path, t, text=bad_range)
    assert not m.m and "range 0" in m.err
    m = Model(lib, tmp_path, t, text=good.replace("mode detailed", "mode turbo"))
    assert not m.m and "mode" in m.err


@pytest.mark.parametrize("name", ["gs1280-8", "x86-2s"])
def test_coherence_invariants_hold_under_random_traffic(tmp_path, name):
    """2M random reads, writes and atomics by every CPU over 300 lines, with
    caches shrunk to force evictions: L1 stays inside L2 with the same state,
    the directory's sharers are exactly the caches holding the line, and a
    line in E/M is in no other cache (tests/c/timing_invariants.c)."""
    src = Path(__file__).parent / "c" / "timing_invariants.c"
    # the harness's main() ignores its argc
    exe = gcc(tmp_path / "inv", src, *T.MODEL_C, flags=["-fsanitize=address,undefined", "-Wno-unused-parameter"],
              include=[T.HERE])
    text = config_text(topologies.load(name), "detailed", tmp_path / "o.json")
    lines = [("l1d 512 2 3" if ln.startswith("l1d ") else "l2 2048 4 12" if ln.startswith("l2 ") else ln)
             for ln in text.splitlines()]
    cfg = tmp_path / "small.conf"
    cfg.write_text("\n".join(lines) + "\n")
    r = subprocess.run([str(exe), str(cfg)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


# --- the results JSON, named fields, stored by analysis/timing.py --------------------
def test_results_name_their_fields_and_land_in_the_tables_unchanged(lib, tmp_path):
    """Format 2: every object names its fields as the timing_* tables name
    their columns, and ingest stores them as they are."""
    from analysis import db, timing as timing_db
    t = topologies.load("gs1280-8")
    m = Model(lib, tmp_path, t)
    try:
        lib.vm_phase(m.m, 0, 1, 2, 5)
        m.access(0, node_addr(t, 6, 4096))      # a 3-hop miss
        m.access(0, node_addr(t, 0, 8192), A)
        m.access(6, node_addr(t, 0, 8192), A)   # a lock transfer
        lib.vm_phase(m.m, 0, 2, 2, 5)
        res = m.results()
    finally:
        m.close()
    assert res["format"] == T.RESULTS_FORMAT == 2
    assert {tuple(x) for x in res["matrix"]} == {("cpu_node", "home_node", "misses", "lat_ps")}
    assert {(x["cpu_node"], x["home_node"], x["misses"]) for x in res["matrix"]} == \
        {(0, 6, 1), (0, 0, 1), (6, 0, 1)}
    hist = {h["hops"]: h["hist"] for h in res["hops"]}
    assert {tuple(b) for bins in hist.values() for b in bins} == {("bin_ns", "count")}
    assert hist[3][0] == {"bin_ns": int(t.latency_ns(0, 6)) // 8 * 8, "count": 1}
    mem = [r for r in res["resources"] if r["kind"] == "mem"]
    assert [(r["src"], r["dst"]) for r in mem] == [(n, n) for n in range(t.nodes)]
    assert {tuple(r) for r in res["resources"]} == {("kind", "src", "dst", "busy_ps")}
    assert [s["symbol"] for s in res["symbols"]] == ["[user]"]
    assert (res["symbols"][0]["accesses"], res["symbols"][0]["lock_xfers"]) == (3, 2)  # the first take counts too

    con = db.connect(":memory:")
    con.execute("INSERT INTO runs (id, status, started_at, host, topology, topology_sha256, topology_toml, "
                "topology_shape, nodes, cpus, memory_mib_per_node, scale, native_isa, guest_isa, experiment, "
                "params_json, kernel_arch, patch_set, kernel_flavor, engine, engine_version, qemu_mode, timing_mode, "
                "seed, command_line, limitations) VALUES (1, 'ok', 'x', 'h', 't', 's', '', '', 8, 8, 64, 1, 'a', "
                "'x86_64', 'latprobe', '{}', 'x86_64', 'vanilla', 'default', 'qemu', '10', 'icount', 'detailed', 0, "
                "'', '')")
    timing_db.ingest(con, 1, res, "map")
    rows = lambda sql: [tuple(r) for r in con.execute(sql)]
    assert rows("SELECT cpu_node, home_node, misses, lat_ps FROM timing_matrix ORDER BY home_node, cpu_node") == \
        [tuple(x.values()) for x in sorted(res["matrix"], key=lambda x: (x["home_node"], x["cpu_node"]))]
    assert rows("SELECT bin_ns, count FROM timing_latency_hist WHERE hops = 3 ORDER BY bin_ns") == \
        [(b["bin_ns"], b["count"]) for b in hist[3]]
    assert len(rows("SELECT * FROM timing_resources")) == len(res["resources"])
    assert rows("SELECT symbol, accesses, misses, remote, stall_ps, lock_xfers FROM timing_symbols") == \
        [tuple(res["symbols"][0].values())]
    ph = con.execute("SELECT * FROM timing_phases").fetchone()
    assert (ph["cpu"], ph["phase_id"], ph["phase"], ph["instance"], ph["misses"]) == (0, 2, "latprobe.chase", 5, 2)
    assert rows("SELECT mode, cycle_ps, address_map FROM timing_run") == [("detailed", res["cycle_ps"], "map")]
    cpu0 = con.execute("SELECT * FROM timing_cpu WHERE cpu = 0").fetchone()
    assert {k: cpu0[k] for k in T.COUNTERS} == {k: res["cpus"][0][k] for k in T.COUNTERS}


def test_engine_and_model_use_one_cycle_even_at_a_rounding_tie(lib, tmp_path):
    """3.2 GHz is 312.5 ps: QEMU's clock rounds half to even (312); the model
    used to round half up (313) and drift from the engine by 0.3 %."""
    from engine import qemu
    src = (topologies.HERE / "x86-2s.toml").read_text().replace("clock_ghz = 2.5", "clock_ghz = 3.2")
    p = tmp_path / "t32.toml"
    p.write_text(src)
    t = topologies.load(str(p))
    m = Model(lib, tmp_path, t)
    try:
        res = m.results()
        assert res["cycle_ps"] == qemu.cycle_ps(t) == T.cycle_ps(t) == 312
        assert f"cycle-ps={res['cycle_ps']}," in " ".join(qemu.clock_args(t, "icount"))
    finally:
        m.close()


def test_a_warm_up_keeps_the_caches_warm_and_drops_what_it_counted(gs8):
    """vm_warmup_done (plugin.warmup_insns): lines touched in the warm-up stay
    cached, so the measured accesses hit; the counters, the hop histogram and
    the resources' busy time start from the end of the warm-up."""
    t = gs8.topo
    lib, m = gs8.lib, gs8.m
    lib.vm_warmup_done.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
    lines = [node_addr(t, 1, k * 64) for k in range(8)]
    lib.vm_insns(m, 0, 500, 2)
    for a in lines:
        assert gs8.access(0, a) > 0                       # cold: remote misses
    lib.vm_warmup_done(m, 500)
    lib.vm_insns(m, 0, 100, 2)
    assert all(gs8.access(0, a) == 0 for a in lines)     # warm: L1 hits, no miss left to count
    gs8.access(0, node_addr(t, 2, 1 << 20))              # one miss after the warm-up
    res = gs8.results()
    cpu = res["cpus"][0]
    assert (cpu["insns"], cpu["misses"], cpu["l1_hits"]) == (100, 1, 8)
    assert sum(h["misses"] for h in res["hops"]) == 1
    assert res["warmup_insns"] == 500 and res["warmup_end_ps"] > 0
    # the model's clock itself runs on: the measured time is only what came after
    assert 0 < cpu["time_ps"] < res["warmup_end_ps"]
