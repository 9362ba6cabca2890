"""The timing stage's host side: the guest-physical address map QEMU builds,
link routes, the plugin config and its bad-input errors."""
import pytest

import timing as T
import topologies
from engine import qemu
from tests.test_topologies import GOOD, write
from timing import plugin_config
from timing.plugin_config import config_text

L2 = """
[caches.l2]
size_kib = 1024
ways = 16
line_bytes = 64
latency_cycles = 14
"""


def mini(tmp_path, **repl):
    text = GOOD + L2
    for k, v in repl.items():
        text = text.replace(k, v)
    return topologies.load(str(write(tmp_path, text)))


def test_small_machine_maps_every_node_below_4g_in_order():
    t = topologies.load("gs1280-32")
    m = T.address_map(t)
    assert [(s, e, n) for s, e, n, _ in m] == [(n << 26, (n + 1) << 26, n) for n in range(32)]


def test_large_machine_moves_memory_above_the_pci_hole(tmp_path):
    # 4 nodes x 1 GiB: q35 keeps 2 GiB below 4 GiB, the rest goes to 4 GiB and up
    t = mini(tmp_path, **{"memory_mib = 64": "memory_mib = 1024"})
    m = T.address_map(t)
    assert m == [(0, 1 << 30, 0, 0), (1 << 30, 2 << 30, 1, 1 << 30),
                 (4 << 30, 5 << 30, 2, 2 << 30), (5 << 30, 6 << 30, 3, 3 << 30)]
    # 3 x 1 GiB = 3 GiB >= 2.75 GiB: node 1 straddles the hole
    t = mini(tmp_path, **{"memory_mib = 64": "memory_mib = 1536", "count = 4": "count = 2", "dims = [2, 2]":
                          "dims = [2]"})
    assert T.address_map(t) == [(0, 1536 << 20, 0, 0), (1536 << 20, 2 << 30, 1, 1536 << 20),
                                (4 << 30, 5 << 30, 1, 2 << 30)]


CONSOLE = """ACPI: SRAT: Node 0 PXM 0 [mem 0x00000000-0x0009ffff]
ACPI: SRAT: Node 0 PXM 0 [mem 0x00100000-0x03ffffff]
ACPI: SRAT: Node 1 PXM 1 [mem 0x04000000-0x07ffffff]
ACPI: SRAT: Node 2 PXM 2 [mem 0x08000000-0x0bffffff]
ACPI: SRAT: Node 3 PXM 3 [mem 0x0c000000-0x0fffffff]
"""


def test_address_map_is_checked_against_the_guests_srat(tmp_path):
    t = mini(tmp_path)
    ok, line = T.map_matches_srat(t, CONSOLE)
    assert ok, line
    ok, line = T.map_matches_srat(t, CONSOLE.replace("Node 3 PXM 3 [mem 0x0c000000", "Node 3 PXM 3 [mem 0x0d000000"))
    assert not ok and line.startswith("node 3:")
    assert T.map_matches_srat(t, "no tables here")[0] is False


@pytest.mark.parametrize("name", topologies.available())
def test_routes_follow_the_hop_matrix_over_real_links(name):
    t = topologies.load(name)
    links, routes = topologies.links_and_routes(t)
    for (a, b), path in routes.items():
        assert len(path) == t.hops[a][b]
        hop = a
        for lid in path:  # a connected walk from a to b
            src, dst = links[lid]
            assert src == hop and t.hops[src][dst] == 1
            hop = dst
        assert hop == b
    if t.kind == "torus":
        assert len(links) == t.nodes * 2 * len([d for d in t.dims if d > 1]) - \
            t.nodes * sum(1 for d in t.dims if d == 2)  # a ring of 2 has one link each way


def test_config_names_every_cpu_range_and_route(tmp_path):
    t = topologies.load("x86-2s")
    text = config_text(t, "detailed", tmp_path / "o.json")
    assert sum(ln.startswith("cpu_node ") for ln in text.splitlines()) == 8
    assert "cpu_node 5 1" in text and "range 0x0 0x10000000 0 0x0" in text
    assert "route 0 1 0" in text and "route 1 0 1" in text


def test_odd_node_memory_is_refused_with_one_line(tmp_path):
    t = mini(tmp_path, **{"memory_mib = 64": "memory_mib = 63"})
    with pytest.raises(T.TimingError) as e:
        config_text(t, "detailed", tmp_path / "o.json")
    assert "memory_mib" in str(e.value) and "2 MiB" in str(e.value) and "\n" not in str(e.value)


def test_too_many_cpus_for_the_directory(tmp_path):
    t = mini(tmp_path, **{"cpus_per_node = 2": "cpus_per_node = 16"})
    with pytest.raises(T.TimingError, match="at most 62"):
        config_text(t, "fast", tmp_path / "o.json")


def test_plugin_goes_on_the_command_line(tmp_path):
    t = topologies.load("gs1280-8")
    cmd = qemu.command_line(qemu.Machine(t, tmp_path / "k", tmp_path / "i", plugin=(tmp_path / "p.so",
                                         tmp_path / "c")), binary=tmp_path / "q")
    assert cmd[cmd.index("-plugin") + 1] == f"{tmp_path / 'p.so'},config={tmp_path / 'c'}"
    assert "-plugin" not in qemu.command_line(qemu.Machine(t, tmp_path / "k", tmp_path / "i"), binary=tmp_path / "q")
    # Alpha SMP guests get the plugin too: the series tells their vCPUs apart
    a = topologies.load("es-clipper-4")
    cmd = qemu.command_line(qemu.Machine(a, tmp_path / "k", tmp_path / "i", plugin=(tmp_path / "p.so",
                                         tmp_path / "c")), binary=tmp_path / "q")
    assert cmd[cmd.index("-plugin") + 1] == f"{tmp_path / 'p.so'},config={tmp_path / 'c'}"
    plugin_config.check(a, "fast")


def test_torus_routes_take_the_first_dimension_first_and_ties_the_positive_way():
    t = topologies.load("gs1280-8")  # 2 x 4 torus, node = 4 * row + column
    links, routes = topologies.links_and_routes(t)
    walk = lambda a, b: [links[k][1] for k in routes[(a, b)]]
    assert walk(0, 5) == [4, 5]            # row first (dimension 0), then column
    assert walk(0, 2) == [1, 2]            # column distance 2 of 4: a tie, taken the positive way
    assert walk(0, 3) == [3]               # wrap-around is shorter
    assert walk(5, 0) == [1, 0]


def test_a_booted_detailed_run_prices_from_the_experiment_s_marker(tmp_path, monkeypatch):
    """--boot --timing detailed: the boot only counts instructions, the model
    prices from the guest's marker (plugin.price_from_marker); a restored run
    is priced from the restore, so its plugin is told nothing."""
    from pipeline import execute
    from pipeline.spec import RunSpec
    t = topologies.load("x86-2s")
    assert "plugin.price_from_marker on" in config_text(t, "detailed", tmp_path / "o.json", price_from_marker=True)
    assert "price_from_marker" not in config_text(t, "detailed", tmp_path / "o.json")
    seen = []

    def spy(conf, topo):
        seen.append(conf.price_from_marker)
        raise RuntimeError("stop: the config was asked for")
    from timing import plugin_config
    monkeypatch.setattr(plugin_config.PluginConfig, "text", spy)

    from images import initramfs
    archive = initramfs.cpio({"bin/x": (0o755, b"x")})

    class FakeBuilt:
        userland, boot_userland, plugin, snapshot_error, user_symbols = archive, archive, None, None, ""
        snapshot = ("k" * 64, tmp_path)
        kernel_dir = tmp_path

    import json
    (tmp_path / "meta.json").write_text(json.dumps({"release": "r", "source_package": "s", "config_sha256": "c",
                                                    "kernel_sha256": "k"}))
    from analysis import db
    for boot in (True, False):
        prep = execute.prepare(RunSpec(topology="x86-2s", experiment="bwprobe", timing="detailed", boot=boot))
        if prep.snaps:
            monkeypatch.setattr(type(prep.snaps), "problem", lambda *a: None)
        with pytest.raises(RuntimeError, match="stop"):
            execute.execute(prep, FakeBuilt(), db.connect(tmp_path / f"r{boot}.db"), tmp_path / f"r{boot}.db",
                            runs_dir=tmp_path / "runs", userland=archive)
    assert seen == [True, False]


def test_a_warm_up_reaches_the_plugin_and_the_run_key_only_when_asked(tmp_path):
    from pipeline.execute import prepare
    from pipeline.spec import InputError, RunSpec
    t = topologies.load("x86-2s")
    assert "plugin.warmup_insns 5000000" in config_text(t, "detailed", tmp_path / "o.json", warmup_insns=5_000_000)
    assert "warmup" not in config_text(t, "detailed", tmp_path / "o.json")
    cold = prepare(RunSpec(topology="x86-2s", experiment="bwprobe", timing="detailed"))
    warm = prepare(RunSpec(topology="x86-2s", experiment="bwprobe", timing="detailed", warmup_insns=10**7))
    assert warm.key != cold.key   # other figures: its own key; a run without one keeps its old key
    for bad in (dict(timing="fast", warmup_insns=10), dict(timing="detailed", warmup_insns=-1)):
        with pytest.raises(InputError, match="--warmup-insns: expected a positive instruction count"):
            prepare(RunSpec(topology="x86-2s", experiment="bwprobe", **bad))
    with pytest.raises(InputError, match="--warmup-insns: a restored run's"):
        prepare(RunSpec(topology="x86-2s", experiment="bwprobe", timing="detailed", warmup_insns=10, boot=True))
