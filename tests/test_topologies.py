import math
from pathlib import Path

import pytest

import topologies as T


def write(tmp_path, text, name="t.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


GOOD = """
name = "mini"
native_isa = "x86_64"
guest_isa = "x86_64"
sources = ["test"]
[nodes]
count = 4
cpus_per_node = 2
memory_mib = 64
real_memory_gib = 4
[interconnect]
kind = "torus"
dims = [2, 2]
hop_latency_ns = 20.0
link_bandwidth_gbps = 6.4
[memory]
local_latency_ns = 80.0
bandwidth_gbps = 12.0
[cpu]
clock_ghz = 1.0
[caches.l1d]
size_kib = 64
ways = 2
line_bytes = 64
latency_cycles = 3
"""


def test_torus_4x8_farthest_node_is_six_hops_with_wraparound():
    hops = T.torus_hops((4, 8))
    assert max(max(r) for r in hops) == 6
    # node 0 = (0,0); node 7 = (0,7) is one hop away through the wrap-around link
    assert hops[0][7] == 1
    # (0,0) -> (2,4): 2 + 4
    assert hops[0][2 * 8 + 4] == 6
    # symmetric, zero diagonal
    assert all(hops[i][j] == hops[j][i] for i in range(32) for j in range(32))
    assert all(hops[i][i] == 0 for i in range(32))


def test_torus_hop_histogram_4x4():
    hops = T.torus_hops((4, 4))
    row = sorted(hops[5])
    # per dimension distances {0,1,1,2}: 1 node at 0, 4 at 1, 6 at 2, 4 at 3, 1 at 4
    assert [row.count(h) for h in range(5)] == [1, 4, 6, 4, 1]


def test_socket_shortest_paths_twisted_ring():
    t = T.load("x86-8s")
    assert t.hops[0][1] == 1 and t.hops[0][4] == 1 and t.hops[0][7] == 1
    assert t.hops[0][2] == 2 and t.hops[0][5] == 2
    assert t.max_hops() == 2


def test_socket_path_through_chain(tmp_path):
    text = GOOD.replace('kind = "torus"\ndims = [2, 2]', 'kind = "sockets"\nlinks = [[0, 1], [1, 2], [2, 3]]')
    t = T.parse(text, tmp_path / "chain.toml")
    assert t.hops[0][3] == 3 and t.hops[3][0] == 3 and t.hops[1][3] == 2


@pytest.mark.parametrize("name", T.available())
def test_shipped_topologies_slit_is_symmetric_with_diagonal_10(name):
    t = T.load(name)
    s = t.slit()
    n = t.nodes
    assert all(s[i][i] == 10 for i in range(n))
    assert all(s[i][j] == s[j][i] for i in range(n) for j in range(n))
    assert all(10 < s[i][j] <= 254 for i in range(n) for j in range(n) if i != j)
    # farther is never closer
    assert all(s[i][j] <= s[i][k] for i in range(n) for j in range(n) for k in range(n)
               if t.hops[i][j] < t.hops[i][k])
    assert t.sources


def test_gs1280_slit_follows_latency_ratio():
    t = T.load("gs1280-32")
    # 72 ns local, 21.6 ns per hop: 6 hops = 201.6 ns = 2.8x local -> 28
    assert t.slit()[0][2 * 8 + 4] == 28
    assert t.latency_ns(0, 1) == pytest.approx(93.6)
    assert t.nodes == 32 and t.cpus == 32 and t.dims == (4, 8)
    assert t.scale == pytest.approx(1 / 64)


def test_hmat_bandwidth_capped_by_link():
    t = T.load("gs1280-8")
    assert t.bandwidth_gbps(0, 0) == 12.0
    assert t.bandwidth_gbps(0, 1) == 6.4


def test_required_shipped_set():
    assert {"gs1280-32", "gs1280-16", "gs1280-8", "x86-2s", "x86-4s", "x86-8s"} <= set(T.available())
    assert T.load("gs1280-16").dims == (4, 4) and T.load("gs1280-8").dims == (2, 4)
    t4 = T.load("x86-4s")
    assert all(t4.hops[i][j] == 1 for i in range(4) for j in range(4) if i != j)


@pytest.mark.parametrize("old,new,field,expect", [
    ("dims = [2, 2]", "dims = [2, 3]", "interconnect.dims", "product equals nodes.count = 4"),
    ("count = 4", "count = 0", "nodes.count", "positive integer"),
    ("local_latency_ns = 80.0", "local_latency_ns = -5.0", "memory.local_latency_ns", "positive"),
    ("hop_latency_ns = 20.0", "hop_latency_ns = -1", "interconnect.hop_latency_ns", "non-negative"),
    ("memory_mib = 64", 'memory_mib = "64"', "nodes.memory_mib", "integer"),
    ("clock_ghz = 1.0\n", "", "cpu.clock_ghz", "missing"),
    ('kind = "torus"', 'kind = "mesh"', "interconnect.kind", "'torus' or 'sockets'"),
    ("ways = 2", "ways = 3", "caches.l1d.size_kib", "divides"),
    ('guest_isa = "x86_64"', 'guest_isa = "alpha"', "nodes.count", "removed Alpha NUMA in 5.14"),
])
def test_validation_names_file_field_and_expectation(tmp_path, old, new, field, expect):
    p = write(tmp_path, GOOD.replace(old, new))
    with pytest.raises(T.TopologyError) as e:
        T.parse(p.read_text(), p)
    msg = str(e.value)
    assert msg.startswith(str(p)) and f"'{field}'" in msg and expect in msg
    assert "\n" not in msg


def test_disconnected_sockets_rejected(tmp_path):
    text = GOOD.replace('kind = "torus"\ndims = [2, 2]', 'kind = "sockets"\nlinks = [[0, 1], [2, 3]]')
    with pytest.raises(T.TopologyError, match="cannot reach"):
        T.parse(text, tmp_path / "x.toml")


def test_bad_toml_syntax(tmp_path):
    with pytest.raises(T.TopologyError, match="valid TOML"):
        T.parse("name = ", tmp_path / "x.toml")


def test_user_path_and_unknown_name(tmp_path):
    p = write(tmp_path, GOOD)
    assert T.load(str(p)).nodes == 4
    with pytest.raises(T.TopologyError, match="one of .*gs1280-32"):
        T.load("no-such-machine")


def test_content_hash_changes_with_content(tmp_path):
    a = T.parse(GOOD, tmp_path / "a.toml")
    b = T.parse(GOOD.replace("hop_latency_ns = 20.0", "hop_latency_ns = 21.0"), tmp_path / "b.toml")
    assert a.sha256 != b.sha256 and len(a.sha256) == 64
    assert math.isclose(b.latency_ns(0, 3), 80 + 2 * 21)


def test_alpha_clipper_topology():
    t = T.load("es-clipper-4")
    assert (t.guest_isa, t.native_isa, t.nodes, t.cpus) == ("alpha", "alpha", 1, 4)
    assert t.slit() == [[10]] and t.max_hops() == 0 and t.shape() == "1 node, no links"
    l1d = next(c for c in t.caches if c.name == "l1d")
    assert (l1d.size_kib, l1d.ways) == (64, 2)  # the 21264's L1D


def test_alpha_guest_limit_names_the_limit(tmp_path):
    text = T.load("es-clipper-4").text.replace("cpus_per_node = 4", "cpus_per_node = 5")
    with pytest.raises(T.TopologyError) as e:
        T.parse(text, tmp_path / "big.toml")
    assert "'nodes.cpus_per_node'" in str(e.value) and "at most 4 CPUs" in str(e.value) and "got 5" in str(e.value)


# --- size limits (issue 10): one line before any work that grows with them -----
def refused(tmp_path, text, field, expect, load=T.parse):
    p = write(tmp_path, text)
    with pytest.raises(T.TopologyError) as e:
        load(p.read_text(), p) if load is T.parse else load(str(p))
    msg = str(e.value)
    assert msg.startswith(f"{p}: field '{field}': ") and expect in msg, msg
    assert "\n" not in msg and len(msg) < 400
    return msg


def torus(count, dims, cpn=1):
    return GOOD.replace("count = 4", f"count = {count}").replace("dims = [2, 2]", f"dims = {dims}") \
        .replace("cpus_per_node = 2", f"cpus_per_node = {cpn}")


def sockets(count, links, cpn=1):
    return torus(count, [count], cpn).replace('kind = "torus"', 'kind = "sockets"') \
        .replace(f"dims = [{count}]", f"links = {links}")


def test_the_limits_come_from_the_guest_kernel_config_and_qemu():
    cfg = (T.HERE.parent / "images" / "kernel" / "x86_64.config").read_text().splitlines()
    assert f"CONFIG_NR_CPUS={T.X86_NR_CPUS}" in cfg and f"CONFIG_NODES_SHIFT={T.X86_NODES_SHIFT}" in cfg
    assert (T.X86_MAX_CPUS, T.X86_MAX_NODES, T.MAX_TORUS_DIMS) == (64, 64, 6)
    assert T.X86_MAX_CPUS <= T.QEMU_Q35_MAX_CPUS and T.X86_MAX_NODES <= T.QEMU_MAX_NODES
    # every topology the CPU limit admits gets APIC IDs below 255 (QEMU aborts on 255 without x2APIC)
    assert all(T.max_apic_id(n, c) < T.QEMU_APIC_ID_LIMIT
               for n in range(1, T.X86_MAX_NODES + 1) for c in range(1, T.X86_MAX_CPUS // n + 1))


@pytest.mark.parametrize("text", [torus(64, [8, 8]), torus(64, [2, 2, 2, 2, 2, 2]), torus(2, [2], cpn=32),
                                  torus(64, [64]), sockets(64, [[i, i + 1] for i in range(63)]),
                                  torus(1, [1], cpn=64)])
def test_at_the_node_and_cpu_limits_it_loads(tmp_path, text):
    t = T.load(str(write(tmp_path, text)))
    assert t.nodes <= 64 and t.cpus <= 64 and len(t.hops) == t.nodes


@pytest.mark.parametrize("text, field, expect", [
    (torus(65, [65]), "nodes.count", "at most 64 nodes for an x86_64 guest (the guest kernel's MAX_NUMNODES"),
    (sockets(65, []), "nodes.count", "at most 64 nodes"),
    (torus(4, [2, 2], cpn=17), "nodes.cpus_per_node", "at most 64 CPUs in all"),
    (torus(1, [1], cpn=65), "nodes.cpus_per_node", "CONFIG_NR_CPUS = 64"),
    (torus(4, [1, 1, 1, 1, 1, 2, 2]), "interconnect.dims", "a list of 1 to 6 positive integers"),
    (torus(4, [8, 1]), "interconnect.dims", "each at most nodes.count = 4"),
    (sockets(4, [[0, 1], [1, 2], [2, 3], [0, 2], [0, 3], [1, 3], [1, 0]]), "interconnect.links", "at most 6 links"),
    (GOOD.replace('guest_isa = "x86_64"', 'guest_isa = "alpha"').replace("count = 4", "count = 1")
     .replace("dims = [2, 2]", "dims = [1]").replace("cpus_per_node = 2", "cpus_per_node = 5"),
     "nodes.cpus_per_node", "at most 4 CPUs for an alpha guest"),
])
def test_over_the_node_cpu_and_shape_limits_is_one_line(tmp_path, text, field, expect):
    refused(tmp_path, text, field, expect)


def test_apic_ids_past_254_are_refused_even_if_the_kernel_took_more_cpus(tmp_path, monkeypatch):
    """QEMU 10.0.2 aborts on APIC ID 255 without x2APIC (-cpu qemu64); one
    socket per node puts the socket above ceil(log2(cores)) bits."""
    monkeypatch.setattr(T.limits, "X86_MAX_CPUS", 4096)  # check_counts reads it there
    assert T.max_apic_id(64, 3) == 254 and T.max_apic_id(64, 4) == 255 and T.max_apic_id(43, 5) == 42 * 8 + 4
    assert T.parse(torus(64, [8, 8], cpn=3), tmp_path / "ok.toml").cpus == 192
    refused(tmp_path, torus(64, [8, 8], cpn=4), "nodes.cpus_per_node", "APIC IDs below 255")


def test_slit_distance_beyond_254_is_refused_not_clamped(tmp_path):
    # 2 hops on a 2x2 torus; 80 ns local: 80 + 2 x 976 = 25.4 x local -> SLIT 254, the most QEMU takes
    t = T.parse(GOOD.replace("hop_latency_ns = 20.0", "hop_latency_ns = 976.0"), tmp_path / "ok.toml")
    assert max(max(r) for r in t.slit()) == 254
    refused(tmp_path, GOOD.replace("hop_latency_ns = 20.0", "hop_latency_ns = 980.0"),
            "interconnect.hop_latency_ns", "SLIT distance, 10 x the ratio, must be <= 254")


def test_hmat_latency_and_bandwidth_qemu_cannot_encode(tmp_path):
    # latency: a whole number of ns below 65535 (the base can be 1 ns)
    assert T.parse(GOOD.replace("local_latency_ns = 80.0", "local_latency_ns = 65534.0")
                   .replace("hop_latency_ns = 20.0", "hop_latency_ns = 0.0"), tmp_path / "a.toml")
    refused(tmp_path, GOOD.replace("local_latency_ns = 80.0", "local_latency_ns = 60000.0")
            .replace("hop_latency_ns = 20.0", "hop_latency_ns = 3000.0"), "memory.local_latency_ns", "65534 ns")
    # bandwidth: MB/s, 16-bit multiples of one power of two (QEMU 10.0.2 refuses 65535M and 100000M beside 1M)
    one = torus(1, [1]).replace("bandwidth_gbps = 12.0", "bandwidth_gbps = {}")
    assert T.parse(one.format(65.534), tmp_path / "b.toml")
    refused(tmp_path, one.format(65.535), "memory.bandwidth_gbps", "got 65535 MB/s")
    refused(tmp_path, GOOD.replace("bandwidth_gbps = 12.0", "bandwidth_gbps = 100.0")
            .replace("link_bandwidth_gbps = 6.4", "link_bandwidth_gbps = 0.001"),
            "interconnect.link_bandwidth_gbps", "got 1 and 100000 MB/s")
    refused(tmp_path, one.format(1e300), "memory.bandwidth_gbps", "HMAT can encode")


@pytest.mark.parametrize("name", [n for n in T.available()
                                  if T.load(n).guest_isa == "x86_64" and not T.load(n).memory_nodes])
def test_the_slit_and_hmat_checks_read_the_values_numa_args_gives_qemu(name):
    """check_distances refuses what numa_extremes derives from the file's
    figures: those must be the values numa_args puts on QEMU's command line.
    (A machine with CPU-less memory nodes: check_memory_nodes reads the
    topology's own matrices, tests/test_cxl.py.)"""
    from engine import qemu
    t = T.load(name)
    args = " ".join(qemu.numa_args(t))
    import re
    dists = [int(v) for v in re.findall(r"dist,src=\d+,dst=\d+,val=(\d+)", args)]
    bws = {int(v) for v in re.findall(r"bandwidth=(\d+)M", args)}
    lats = {int(v) for v in re.findall(r"latency=(\d+)", args)}
    slit, far, mbps = T.numa_extremes(t.nodes, t.max_hops(), t.local_latency_ns, t.hop_latency_ns,
                                      t.memory_bandwidth_gbps, t.link_bandwidth_gbps)
    assert (t.nodes == 1) == (not dists)
    assert max(dists, default=10) == round(slit)
    assert max(lats) == round(far)
    assert bws == mbps


@pytest.mark.parametrize("old, new, field, expect", [
    ("clock_ghz = 1.0", "clock_ghz = 0.0009", "cpu.clock_ghz", "0.001 to 1000 GHz"),
    ("clock_ghz = 1.0", "clock_ghz = 1001.0", "cpu.clock_ghz", "1 to 1000000 ps per instruction"),
    ("local_latency_ns = 80.0", "local_latency_ns = inf", "memory.local_latency_ns", "a finite number, got inf"),
    ("bandwidth_gbps = 12.0", "bandwidth_gbps = nan", "memory.bandwidth_gbps", "a finite number"),
])
def test_clock_and_non_finite_figures(tmp_path, old, new, field, expect):
    refused(tmp_path, GOOD.replace(old, new), field, expect)
    for ok in ("clock_ghz = 0.001", "clock_ghz = 1000.0"):
        assert T.parse(GOOD.replace("clock_ghz = 1.0", ok), tmp_path / "ok.toml")


def test_guest_memory_must_fit_the_host_but_a_stored_topology_still_reads_back(tmp_path):
    host = T.host_memory_mib()
    at = GOOD.replace("memory_mib = 64", f"memory_mib = {host // 4}")
    assert T.load(str(write(tmp_path, at, "at.toml"))).total_memory_mib <= host  # nothing is allocated
    over = GOOD.replace("memory_mib = 64", f"memory_mib = {host // 4 + 1}")
    msg = refused(tmp_path, over, "nodes.memory_mib", f"host's physical memory, {host} MiB", load=T.load)
    assert f"at most {host // 4} MiB per node" in msg
    assert T.parse(over, tmp_path / "t.toml").memory_mib == host // 4 + 1  # a run stored on a bigger host


def _no_hop_matrix(monkeypatch):
    """Refusing bad counts or lists must not build the hop matrix first (the
    measured case: 10**7 nodes made the loader spin over it): building one
    fails the test. Structural, so a loaded host cannot make it flaky."""
    from topologies import parser

    def spin(*_a, **_k):
        raise AssertionError("the hop matrix was built before the input was refused")
    monkeypatch.setattr(parser, "torus_hops", spin)
    monkeypatch.setattr(parser, "socket_hops", spin)


def test_an_absurd_node_count_is_refused_at_once(monkeypatch):
    _no_hop_matrix(monkeypatch)
    path = T.HERE.parent / "tests" / "data" / "bad-nodes-10m.toml"
    with pytest.raises(T.TopologyError) as e:
        T.load(str(path))
    assert str(e.value) == (f"{path}: field 'nodes.count': at most 64 nodes for an x86_64 guest (the guest kernel's "
                            f"MAX_NUMNODES = 1 << CONFIG_NODES_SHIFT = 64, images/kernel/x86_64.config; QEMU takes "
                            f"128), got 10000000")


def test_huge_lists_are_refused_in_one_short_line(tmp_path, monkeypatch):
    _no_hop_matrix(monkeypatch)
    msg = refused(tmp_path, torus(1, [1] * 100_000), "interconnect.dims", "got list of 100000 entries")
    msg2 = refused(tmp_path, sockets(4, [[0, 1]] * 100_000), "interconnect.links", "at most 6 links for 4 sockets")
    assert "got 100000" in msg2 and len(msg) < 400


@pytest.mark.parametrize("value, expect", [
    ("0", "1 to 100000"), ("100001", "1 to 100000"), ("1.5", "whole number of cycles"), ('"140"', "whole number"),
])
def test_pause_cycles_is_checked_and_defaults_to_an_ordinary_instruction(tmp_path, value, expect):
    refused(tmp_path, GOOD.replace("clock_ghz = 1.0", f"clock_ghz = 1.0\npause_cycles = {value}"),
            "cpu.pause_cycles", expect)
    assert T.parse(GOOD, tmp_path / "ok.toml").pause_cycles == 1
    assert T.parse(GOOD.replace("clock_ghz = 1.0", "clock_ghz = 1.0\npause_cycles = 140"),
                   tmp_path / "ok.toml").pause_cycles == 140
    # Cascade Lake-SP's PAUSE on every shipped x86 machine; the EV7 has no spin-wait hint
    assert all(T.load(n).pause_cycles == 140 for n in T.available() if n.startswith("x86-"))
    assert T.load("gs1280-32").pause_cycles == 1
    alpha = (Path(T.__file__).parent / "es-clipper-4.toml").read_text().replace("[cpu]\n", "[cpu]\npause_cycles = 10\n")
    refused(tmp_path, alpha, "cpu.pause_cycles", "1 on an alpha guest")
