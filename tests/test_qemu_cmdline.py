from pathlib import Path

import pytest

import topologies as T
from engine import qemu
from timing.plugin_config import config_text


def opts(cmd, flag):
    return [cmd[i + 1] for i, c in enumerate(cmd) if c == flag]


def test_gs1280_32_command_line_gives_the_guest_the_torus():
    t = T.load("gs1280-32")
    cmd = qemu.command_line(qemu.Machine(t, Path("k"), Path("i"), swap=Path("s.img")), binary=Path("q"))
    numa = opts(cmd, "-numa")
    nodes = [o for o in numa if o.startswith("node,")]
    dist = [o for o in numa if o.startswith("dist,")]
    hmat = [o for o in numa if o.startswith("hmat-lb,")]
    assert len(nodes) == 32 and len(dist) == 32 * 31 and len(hmat) == 2 * 32 * 32
    assert "node,nodeid=5,cpus=5-5,memdev=mem5,initiator=5" in nodes
    # (0,0) -> (2,4) on the 4x8 torus: 6 hops -> SLIT 28
    assert "dist,src=0,dst=20,val=28" in dist
    assert "dist,src=0,dst=7,val=13" in dist  # wrap-around neighbour
    assert opts(cmd, "-smp") == ["32,sockets=32,cores=1,threads=1"]
    assert opts(cmd, "-m") == ["2048M"]
    # per-vCPU clocks at the EV7's 1.15 GHz: 870 ps per instruction; no spin-wait hint
    assert opts(cmd, "-icount") == ["shift=0,sleep=off,vcpu-clock=on,cycle-ps=870,pause-cycles=1,quantum-ns=1000"]
    assert opts(cmd, "-rtc")[0].endswith("clock=vm")
    assert "hmat-lb,initiator=0,target=20,hierarchy=memory,data-type=access-latency,latency=202" in hmat
    assert any("virtio-blk-pci" in o for o in opts(cmd, "-device"))
    assert sum(1 for o in opts(cmd, "-object") if o.startswith("memory-backend-ram")) == 32


@pytest.mark.parametrize("topo", ["x86-2s", "gs1280-8", "es-clipper-4", "tests/data/core2w-custom.toml"])
def test_the_core_s_best_case_is_the_model_s_and_the_command_line_keeps_the_cycle(topo):
    """A run whose core charges its stalls: the plugin sets the engine's time
    per instruction to the core's best case when it starts charging (series
    0008), the figure the model's config holds (insn_ps); the command line
    keeps a cycle an instruction, so a functional warm-up and the boot run
    at the profile's pace."""
    t = T.load(topo)
    per = t.core.insn_ps(t.cycle_ps)
    assert per * t.core.width <= t.cycle_ps < (per + 1) * t.core.width
    assert f"insn_ps {per}" in config_text(t, "detailed", Path("o.json")).splitlines()
    icount = opts(qemu.command_line(qemu.Machine(t, Path("k"), Path("i")), binary=Path("q")), "-icount")[0]
    assert f"cycle-ps={t.cycle_ps}," in icount and f"pause-cycles={t.pause_cycles}," in icount
    assert f"{per} ps per instruction at best ({t.core.width} a cycle" in qemu.clock_model(t, "icount", 1000, True)
    assert "1 IPC" in qemu.clock_model(t, "icount", 1000, False)  # stalls not charged: a cycle an instruction


def test_sockets_topology_and_mttcg():
    t = T.load("x86-2s")
    cmd = qemu.command_line(qemu.Machine(t, Path("k"), Path("i"), qemu_mode="mttcg", hmat=False), binary=Path("q"))
    assert opts(cmd, "-smp") == ["8,sockets=2,cores=4,threads=1"]
    assert "node,nodeid=1,cpus=4-7,memdev=mem1" in opts(cmd, "-numa")
    assert opts(cmd, "-accel") == ["tcg,thread=multi"]
    assert "-icount" not in cmd and not any(o.startswith("hmat") for o in opts(cmd, "-numa"))
    with pytest.raises(qemu.EngineError, match="--qemu-mode"):
        qemu.command_line(qemu.Machine(t, Path("k"), Path("i"), qemu_mode="kvm"), binary=Path("q"))


def test_quantum_and_cycle_follow_the_run_and_the_topology():
    t = T.load("x86-2s")  # 2.5 GHz: 400 ps per instruction; Cascade Lake's PAUSE: 140 cycles
    cmd = qemu.command_line(qemu.Machine(t, Path("k"), Path("i"), quantum_ns=250), binary=Path("q"))
    assert opts(cmd, "-icount") == ["shift=0,sleep=off,vcpu-clock=on,cycle-ps=400,pause-cycles=140,quantum-ns=250"]
    assert "quantum 250 ns" in qemu.clock_model(t, "icount", 250, True)
    assert "PAUSE 140 cycles" in qemu.clock_model(t, "icount", 250, True)
    for bad in (0, -5, 1.5, float("nan"), float("inf"), 10**9, True):
        with pytest.raises(qemu.EngineError, match="--quantum-ns"):
            qemu.command_line(qemu.Machine(t, Path("k"), Path("i"), quantum_ns=bad), binary=Path("q"))


def test_vcpu_clocks_are_read_from_qemus_exit_report(tmp_path):
    log = tmp_path / "qemu.log"
    log.write_text("noise\nvmlab-clock: global_ps 5 cycle_ps 400 quantum_ps 1000000\n"
                   "vmlab-clock: cpu 0 insns 10 stall_ps 7 clock_ps 4007\n"
                   "vmlab-clock: cpu 1 insns 3 stall_ps 0 clock_ps 1200\n")
    assert qemu.vcpu_clocks(log) == [(0, 10, 7, 4007), (1, 3, 0, 1200)]
    assert qemu.vcpu_clocks(tmp_path / "missing.log") == []


def test_alpha_clipper_command_line():
    t = T.load("es-clipper-4")
    cmd = qemu.command_line(qemu.Machine(t, Path("vmlinux"), Path("i"), swap=Path("s.img")),
                                         binary=Path("/e/qemu-system-alpha"))
    assert cmd[0] == "/e/qemu-system-alpha"
    assert opts(cmd, "-machine") == ["clipper"] and opts(cmd, "-smp") == ["4"] and opts(cmd, "-m") == ["256M"]
    # the 21264 at 833 MHz: 1200 ps per instruction
    assert opts(cmd, "-kernel") == ["vmlinux"]
    assert opts(cmd, "-icount")[0].startswith("shift=0,sleep=off,vcpu-clock=on,cycle-ps=1200,")
    assert "-numa" not in cmd and "-object" not in cmd  # Linux on Alpha has no NUMA
    assert opts(cmd, "-append")[0].startswith("console=ttyS0")
    # Alpha cannot chain scatterlists: the disk must not offer more than 128
    # segments per request (the swap stall), x86 keeps QEMU's default
    blk = [o for o in opts(cmd, "-device") if o.startswith("virtio-blk-pci")]
    assert blk and all("seg-max-adjust=off" in o for o in blk)
    x86 = qemu.command_line(qemu.Machine(T.load("x86-2s"), Path("k"), Path("i"), swap=Path("s.img")), binary=Path("q"))
    assert not any("seg-max-adjust" in o for o in opts(x86, "-device"))


def test_seed_and_repeat_perturb_the_guest_kernel_and_nothing_else(monkeypatch):
    """(0, 0) is the unperturbed machine; every other (seed, repeat) mixes its
    own word into the guest kernel's entropy through the command line, beside
    the user's own --kernel-append, so repeats are not copies of one run."""
    from types import SimpleNamespace

    import engine
    from pipeline.spec import RunSpec
    eng = engine.get("vmlab")
    monkeypatch.setattr(eng, "label", lambda built, topo: "test")
    t = T.load("x86-2s")
    built = SimpleNamespace(kernel_dir=Path("/k"), qemu_dir=Path("/q"))

    def append(**kw):
        spec = RunSpec(topology="x86-2s", **kw)
        m = qemu.Machine(t, Path("k"), Path("i"), append=spec.kernel_append)
        inv = eng.invocation(spec, t, built, m, False)
        return opts(inv.cmd, "-append")[0].split()

    base = append()
    assert not any(w.startswith("vmlab.perturb") for w in base)
    assert append(repeat=2) == base + ["vmlab.perturb=0.2"]
    assert append(seed=7) == base + ["vmlab.perturb=7.0"]
    assert append(seed=7, repeat=1, kernel_append="zswap.enabled=1") == \
        base + ["zswap.enabled=1", "vmlab.perturb=7.1"]
    words = {qemu.perturbation(s, r) for s in range(3) for r in range(3)}
    assert len(words) == 9 and "" in words


def test_the_kick_storm_hook_reaches_the_icount_option_only(monkeypatch):
    from engine import qemu
    cmd = ["qemu", "-icount", "shift=0,sleep=off,vcpu-clock=on,cycle-ps=400", "-m", "1G"]
    assert qemu.with_test_hooks(cmd) == cmd
    monkeypatch.setenv(qemu.KICK_STORM_ENV, "20")
    assert qemu.with_test_hooks(cmd)[2].endswith(",x-kick-storm-us=20") and qemu.with_test_hooks(cmd)[3:] == cmd[3:]
    upstream = ["qemu", "-icount", "shift=0,sleep=off"]
    assert qemu.with_test_hooks(upstream) == upstream   # Debian's QEMU has no such option
