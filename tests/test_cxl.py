"""CPU-less memory nodes (CXL memory expanders): the topology's derived
figures (hops, routes, latency, SLIT, HMAT bandwidth), what QEMU is given
(a memory-only NUMA node, its HMAT initiator), the timing model's config and
pricing, and bad input: one line naming the file and field. Machines without
memory nodes must derive and emit exactly what they did before."""
import ctypes
import json
from pathlib import Path

import pytest

import timing
import topologies as T
from engine import qemu
from tests.cbuild import SHARED, gcc
from timing.plugin_config import config_text

SPR = "spr-2s-cxl"
GENOA = "genoa-2s-cxl"
SWITCH = str(Path(__file__).parent / "data" / "spr-2s-switch-cxl.toml")


def opts(cmd, flag):
    return [cmd[i + 1] for i, c in enumerate(cmd) if c == flag]


def machine(t, **kw):
    return qemu.Machine(t, Path("k"), Path("i"), **kw)


# --- the topology ---------------------------------------------------------------------
def test_spr_nodes_hops_latencies_and_slit():
    t = T.load(SPR)
    assert (t.nodes, t.cpu_nodes, t.cpus, t.total_memory_mib) == (4, 2, 8, 2 * 256 + 2 * 128)
    assert [t.node_cpus(n) for n in range(4)] == [[0, 1, 2, 3], [4, 5, 6, 7], [], []]
    assert [t.node_memory_mib(n) for n in range(4)] == [256, 256, 128, 128]
    assert t.shape() == "2 sockets, 1 links, 2 CPU-less memory nodes"
    # the CXL link counts as a hop; a memory node is reached through its socket
    assert t.hops == [[0, 1, 1, 2], [1, 0, 2, 1], [1, 2, 0, 3], [2, 1, 3, 0]]
    # MLC: 96 local, 187.5 remote; CXL-A: 1.35 x 187.5 = 253 from its socket, + a UPI hop from the other
    assert [t.latency_ns(0, n) for n in range(4)] == [96.0, 187.5, 253.0, 344.5]
    assert [t.latency_ns(1, n) for n in range(4)] == [187.5, 96.0, 344.5, 253.0]
    assert t.slit() == [[10, 20, 26, 36], [20, 10, 36, 26], [26, 36, 10, 52], [36, 26, 52, 10]]
    # the device (17.7 GB/s) is below its link (29.6) and the UPI link (32)
    assert [t.bandwidth_gbps(0, n) for n in range(4)] == [215.0, 32.0, 17.7, 17.7]
    assert [t.initiator(n) for n in range(4)] == [0, 1, 0, 1]
    assert t.scale == pytest.approx(1 / 1024)
    assert any("CPU-less memory node" in s for s in t.limitations())


def test_genoa_one_expander_link_bound():
    t = T.load(GENOA)
    assert (t.nodes, t.cpu_nodes, t.cpus) == (3, 2, 8)
    assert [t.latency_ns(0, n) for n in range(3)] == [110.0, 205.0, 190.0]  # Pond: +80 ns
    assert t.latency_ns(1, 2) == 285.0
    assert t.slit() == [[10, 19, 17], [19, 10, 26], [17, 26, 10]]
    assert t.bandwidth_gbps(0, 2) == 29.6  # the x8 link caps the 36 GB/s device


def test_a_switch_shared_by_sockets():
    """Both sockets reach the pool over their own port; the device's link and
    memory are shared; a switch carries no socket-to-socket traffic."""
    t = T.load(SWITCH)
    assert t.shape() == "2 sockets, 1 links, 2 CPU-less memory nodes, 1 switch"
    sw = t.nodes  # the switch's vertex: numbered after the nodes
    assert t.vertex_path(0, 2) == [(0, sw), (sw, 2)] and t.vertex_path(1, 2) == [(1, sw), (sw, 2)]
    assert t.vertex_path(2, 3) == [(2, sw), (sw, 3)]  # two devices behind one switch
    assert t.vertex_path(0, 1) == [(0, 1)]             # UPI, never the switch
    assert t.latency_ns(0, 2) == t.latency_ns(1, 2) == 96.0 + 70.0 + 157.0
    assert t.bandwidth_gbps(1, 3) == 17.7 and t.initiator(2) == 0
    links, routes = T.links_and_routes(t)
    assert all(len(routes[(a, b)]) == t.hops[a][b] for a in range(4) for b in range(4))
    assert (0, sw) in links and (1, sw) in links and (sw, 2) in links


def test_machines_without_memory_nodes_derive_what_they_did():
    """The closed forms of before: local + hops x hop, min(memory, link)."""
    for name in T.available():
        t = T.load(name)
        if t.memory_nodes:
            continue
        assert t.cpu_nodes == t.nodes and t.total_memory_mib == t.nodes * t.memory_mib
        assert timing.memory_lines(t) == []
        for a in range(t.nodes):
            for b in range(t.nodes):
                assert t.latency_ns(a, b) == t.local_latency_ns + t.hops[a][b] * t.hop_latency_ns
                assert timing.memory_ns(t, a, b) == t.local_latency_ns + t.hops[a][b] * t.hop_latency_ns
        assert "memory_nodes" not in t.summary()


# --- what QEMU is given ------------------------------------------------------------------
def test_qemu_gets_memory_only_nodes_with_their_initiator_and_hmat():
    t = T.load(SPR)
    cmd = qemu.command_line(machine(t), binary=Path("q"))
    numa = opts(cmd, "-numa")
    assert opts(cmd, "-smp") == ["8,sockets=2,cores=4,threads=1"]
    assert opts(cmd, "-m") == ["768M"]
    assert [o for o in numa if o.startswith("node,")] == [
        "node,nodeid=0,cpus=0-3,memdev=mem0,initiator=0", "node,nodeid=1,cpus=4-7,memdev=mem1,initiator=1",
        "node,nodeid=2,memdev=mem2,initiator=0", "node,nodeid=3,memdev=mem3,initiator=1"]
    assert "memory-backend-ram,id=mem2,size=128M" in opts(cmd, "-object")
    assert "dist,src=0,dst=2,val=26" in numa and "dist,src=2,dst=3,val=52" in numa
    hmat = [o for o in numa if o.startswith("hmat-lb,")]
    assert len(hmat) == 2 * 2 * 4  # initiators: the nodes with CPUs; targets: every node
    assert "hmat-lb,initiator=0,target=2,hierarchy=memory,data-type=access-latency,latency=253" in hmat
    assert "hmat-lb,initiator=1,target=2,hierarchy=memory,data-type=access-bandwidth,bandwidth=17700M" in hmat
    assert not any(o.startswith("hmat-lb,initiator=2") for o in hmat)
    nohmat = opts(qemu.command_line(machine(t, hmat=False), binary=Path("q")), "-numa")
    assert "node,nodeid=2,memdev=mem2" in nohmat


def test_the_address_map_follows_each_node_s_memory():
    t = T.load(SPR)
    assert timing.address_map(t) == [(0, 256 << 20, 0, 0), (256 << 20, 512 << 20, 1, 256 << 20),
                                     (512 << 20, 640 << 20, 2, 512 << 20), (640 << 20, 768 << 20, 3, 640 << 20)]


# --- the timing model ---------------------------------------------------------------------
def test_plugin_config_lines():
    t = T.load(SPR)
    text = config_text(t, "detailed", Path("o.json"))
    lines = text.splitlines()
    assert "nodes 4" in lines and "cpus 8" in lines
    assert sorted(ln for ln in lines if ln.startswith("cpu_node ")) == sorted(
        f"cpu_node {c} {c // 4}" for c in range(8))  # CPUs only: the memory nodes have none
    assert "hops 2 1 2 0 3" in lines
    mem = timing.memory_lines(t)
    assert mem[:2] == ["node_bw 2 17.7", "node_bw 3 17.7"]
    links, _ = T.links_and_routes(t)
    assert sorted(int(ln.split()[1]) for ln in mem if ln.startswith("link_fig")) == sorted(
        i for i, (a, b) in enumerate(links) if max(a, b) >= 2)
    assert all(ln.endswith(" 157.0 29.6") for ln in mem if ln.startswith("link_fig"))


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    out = gcc(tmp_path_factory.mktemp("model") / "libvmlab_model.so", *timing.MODEL_C, flags=SHARED)
    lib = ctypes.CDLL(str(out))
    lib.vm_model_new.restype = ctypes.c_void_p
    lib.vm_model_new.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.vm_access.restype = ctypes.c_uint64
    lib.vm_access.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint,
                              ctypes.c_uint32, ctypes.c_void_p]
    lib.vm_write_results.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.vm_model_free.argtypes = [ctypes.c_void_p]
    return lib


def model(lib, tmp, t, extra=True):
    """The model on t's config (a blocking core: an access returns its whole
    latency); extra=False: without the memory nodes' node_bw lines plugin_config writes."""
    text = config_text(t, "detailed", tmp / "o.json").replace("core ooo\n", "core blocking\n")
    if not extra:
        text = "".join(f"{ln}\n" for ln in text.splitlines() if not ln.startswith("node_bw "))
    (tmp / "c.conf").write_text(text)
    err = ctypes.create_string_buffer(1024)
    return lib.vm_model_new(str(tmp / "c.conf").encode(), err, 1024), err.value.decode()


@pytest.mark.parametrize("name", [SPR, GENOA, SWITCH])
def test_the_model_prices_a_miss_at_the_topology_s_latency(lib, tmp_path, name):
    t = T.load(name)
    m, err = model(lib, tmp_path, t)
    assert m, err
    try:
        for node in range(t.cpu_nodes):
            cpu = t.node_cpus(node)[0]
            for k, (start, _, home, _) in enumerate(timing.address_map(t)):
                pa = start + (cpu << 16) + (k << 12)
                got = lib.vm_access(m, cpu, pa, pa, 8, 1, None) / 1000.0
                assert got == pytest.approx(t.latency_ns(node, home), abs=0.01), (cpu, home)
                assert got == pytest.approx(timing.memory_ns(t, node, home), abs=0.001)
        assert lib.vm_write_results(m, None) == 0
        res = json.loads((tmp_path / "o.json").read_text())
        homes = {(x["cpu_node"], x["home_node"]) for x in res["matrix"] if x["misses"]}
        assert {h for _, h in homes} == set(range(t.nodes))
    finally:
        lib.vm_model_free(m)


def test_the_model_refuses_a_cpu_less_node_without_its_figures(lib, tmp_path):
    m, err = model(lib, tmp_path, T.load(SPR), extra=False)
    assert not m and "node 2 has memory and no CPUs but no node_bw line" in err


def test_a_cxl_node_s_bandwidth_caps_what_its_socket_streams(lib, tmp_path):
    """Every CPU of socket 0 streaming node 2 (the device, 17.7 GB/s) gets at
    most its bandwidth, and most of it: the calendar caps the device."""
    t = T.load(SPR)
    text = config_text(t, "detailed", tmp_path / "o.json")
    assert "node_bw" in text  # plugin_config writes the memory nodes' lines
    (tmp_path / "c.conf").write_text(text)
    err = ctypes.create_string_buffer(1024)
    m = lib.vm_model_new(str(tmp_path / "c.conf").encode(), err, 1024)
    assert m, err.value
    lib.vm_cpu_time_ps.restype = ctypes.c_uint64
    lib.vm_cpu_time_ps.argtypes = [ctypes.c_void_p, ctypes.c_int]
    base, per, cpus = 512 << 20, 8 << 20, t.node_cpus(0)
    t0 = [lib.vm_cpu_time_ps(m, c) for c in cpus]
    for off in range(0, per, 64 * 16):  # turns of 16 lines each, as vCPUs take turns
        for i, c in enumerate(cpus):
            for k in range(16):
                pa = base + i * per + off + k * 64
                lib.vm_access(m, c, pa, pa, 8 | 16, 1, None)
    span = max(lib.vm_cpu_time_ps(m, c) for c in cpus) - min(t0)
    gbps = len(cpus) * per / (span / 1000.0)
    lib.vm_model_free(m)
    assert 0.8 * 17.7 <= gbps <= 1.02 * 17.7, gbps


# --- bad input -----------------------------------------------------------------------------------
BASE = (T.HERE / "spr-2s-cxl.toml").read_text()


def bad(tmp_path, old, new, count=1):
    assert old in BASE, old
    p = tmp_path / "bad.toml"
    p.write_text(BASE.replace(old, new, count))
    with pytest.raises(T.TopologyError) as e:
        T.parse(p.read_text(), p)
    assert "\n" not in str(e.value)
    return e.value


@pytest.mark.parametrize("old,new,field,expect", [
    ("[[memory_nodes]]\nattach = 0\n", "[[memory_nodes]]\n", "memory_nodes[0].attach", "missing"),
    ("attach = 1\n", "attach = 5\n", "memory_nodes[1].attach", "a CPU node number in 0..1"),
    ("attach = 1\n", 'attach = "pool"\n', "memory_nodes[1].attach", "got 'pool'"),
    ("link_latency_ns = 157.0", "link_latency_ns = 0", "memory_nodes[0].link_latency_ns", "1 to 1000 ns"),
    ("link_latency_ns = 157.0", "link_latency_ns = 1e9", "memory_nodes[0].link_latency_ns", "1 to 1000 ns"),
    ("link_bandwidth_gbps = 29.6", "link_bandwidth_gbps = 0.0", "memory_nodes[0].link_bandwidth_gbps", "0.5 to 256"),
    ("link_bandwidth_gbps = 29.6", "link_bandwidth_gbps = 1e6", "memory_nodes[0].link_bandwidth_gbps", "0.5 to 256"),
    ("bandwidth_gbps = 17.7", "bandwidth_gbps = -3", "memory_nodes[0].bandwidth_gbps", "0.5 to 1024"),
    ("link_latency_ns = 157.0", 'link_latency_ns = "fast"', "memory_nodes[0].link_latency_ns", "got 'fast'"),
    ("memory_mib = 128\n", "memory_mib = 100\n", "memory_nodes[0].memory_mib", "the machine's scale"),
    ("memory_mib = 128\n", "memory_mib = 8\n", "memory_nodes[0].memory_mib", "an integer >= 16"),
])
def test_bad_memory_node(tmp_path, old, new, field, expect):
    e = bad(tmp_path, old, new)
    assert e.field_name == field and expect in str(e), str(e)


def test_a_memory_node_farther_than_slit_allows_names_its_link(tmp_path):
    """40 ns local, 1000 ns over the CXL link: 26 x local from its own socket,
    a SLIT distance of 260 (QEMU takes at most 254)."""
    p = tmp_path / "far.toml"
    p.write_text(BASE.replace("local_latency_ns = 96.0", "local_latency_ns = 40.0")
                 .replace("link_latency_ns = 157.0", "link_latency_ns = 1000.0"))
    with pytest.raises(T.TopologyError) as e:
        T.parse(p.read_text(), p)
    assert e.value.field_name == "memory_nodes[0].link_latency_ns" and "NUMA_DISTANCE_MAX" in str(e.value)


def test_memory_nodes_on_an_alpha_guest_are_refused():
    src = (T.HERE / "es-clipper-4.toml").read_text() + (
        "\n[[memory_nodes]]\nattach = 0\nmemory_mib = 64\nreal_memory_gib = 2\nlink_latency_ns = 80.0\n"
        "link_bandwidth_gbps = 20.0\nbandwidth_gbps = 20.0\n")
    with pytest.raises(T.TopologyError) as e:
        T.parse(src, Path("alpha-cxl.toml"))
    assert e.value.field_name == "memory_nodes" and "Linux removed Alpha NUMA in 5.14" in str(e.value)


def test_bad_switches(tmp_path):
    sw = (Path(SWITCH)).read_text()

    def parse(text):
        with pytest.raises(T.TopologyError) as e:
            T.parse(text, tmp_path / "sw.toml")
        return e.value
    e = parse(sw.replace("attach = [0, 1]", "attach = [0, 7]"))
    assert e.field_name == "switches[0].attach" and "distinct CPU node numbers in 0..1" in str(e)
    e = parse(sw.replace('attach = "pool"', 'attach = "pond"'))
    assert e.field_name == "memory_nodes[0].attach" and "or a switch (pool)" in str(e)
    e = parse(sw.replace('attach = "pool"', "attach = 0"))
    assert e.field_name == "switches[0]" and "a memory node attached to switch 'pool'" in str(e)
    e = parse(sw.replace("link_latency_ns = 70.0", "link_latency_ns = 0.0"))
    assert e.field_name == "switches[0].link_latency_ns"


def test_too_many_nodes_in_all(tmp_path):
    node = ("\n[[memory_nodes]]\nattach = 0\nmemory_mib = 128\nreal_memory_gib = 128\nlink_latency_ns = 157.0\n"
            "link_bandwidth_gbps = 29.6\nbandwidth_gbps = 17.7\n")
    with pytest.raises(T.TopologyError) as e:
        T.parse(BASE + node * 62, tmp_path / "many.toml")
    assert e.value.field_name == "memory_nodes" and "at most 62 memory nodes beside 2 CPU nodes" in str(e.value)


def test_hmat_bandwidths_qemu_cannot_encode_name_the_memory_node(tmp_path):
    # 215000 MB/s beside 1001 MB/s (odd: a base of 1 MB/s): past QEMU's 16-bit range of one base
    e = bad(tmp_path, "bandwidth_gbps = 17.7", "bandwidth_gbps = 1.001")
    assert e.field_name == "memory_nodes[0].bandwidth_gbps" and "QEMU's HMAT can encode" in str(e)


@pytest.mark.parametrize("name", [SPR, GENOA, SWITCH])
def test_the_checks_read_the_values_numa_args_gives_qemu(name):
    """check_memory_nodes refuses on the topology's own matrices: the values
    numa_args puts on QEMU's command line."""
    import re
    t = T.load(name)
    args = " ".join(qemu.numa_args(t))
    dists = [int(v) for v in re.findall(r"dist,src=\d+,dst=\d+,val=(\d+)", args)]
    assert max(dists) == max(max(row) for row in t.slit())
    lats = {int(v) for v in re.findall(r"latency=(\d+)", args)}
    assert lats == {round(t.latency_ns(i, j)) for i in range(t.cpu_nodes) for j in range(t.nodes)}
    bws = {int(v) for v in re.findall(r"bandwidth=(\d+)M", args)}
    assert bws == {round(t.bandwidth_gbps(i, j) * 1000) for i in range(t.cpu_nodes) for j in range(t.nodes)}


def test_a_memory_node_the_model_cannot_map_names_its_field(tmp_path):
    """The timing model maps memory in 2 MiB granules: an odd memory node size is its field's error."""
    p = tmp_path / "odd.toml"
    p.write_text(BASE.replace("memory_mib = 128\nreal_memory_gib = 128", "memory_mib = 129\nreal_memory_gib = 129", 1))
    t = T.parse(p.read_text(), p)
    with pytest.raises(timing.TimingError, match=r"field 'memory_nodes\[0\]\.memory_mib': expected a multiple"):
        timing.check_address_map(t)
