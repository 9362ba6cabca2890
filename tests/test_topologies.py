import math

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
