"""The timing modes as parts (timing/modes.py): each mode's behaviour in one
table, no mode name compared as a string anywhere else, one writer of the
plugin's configuration and a plugin that knows every key it is given."""
import ast
import re

import pytest

import topologies
from pipeline import execute
from pipeline.spec import InputError, RunSpec
from tests.e2e import REPO
from timing import modes, plugin_config

# mode: (plugin mode, prices accesses, stalls reach the guest by default, a SimPoint profile, slowdown)
BEHAVIOUR = {
    "off": (None, False, False, False, 1.0),
    "fast": ("fast", False, False, False, 1.5),
    "detailed": ("detailed", True, True, False, 8.0),
    "sampled": ("fast", False, False, True, 1.5),
}


@pytest.mark.parametrize("name", list(BEHAVIOUR))
def test_each_mode_behaves_as_its_row_says(name):
    m = modes.get(name)
    spec = RunSpec(topology="gs1280-8", timing=name)
    assert (m.plugin, m.prices_accesses, m.stalls_reach_guest(spec), m.simpoint_profile, m.slowdown) == BEHAVIOUR[name]
    assert m.key(spec)["timing"] == name and m.key(spec)["stalls"] == (name == "detailed")
    conf = m.plugin_config(spec, topologies.load("gs1280-8"), REPO / "x", None, restored=True)
    assert (conf is None) == (m.plugin is None)
    if conf:
        text = conf.text(topologies.load("gs1280-8"))
        assert f"mode {m.plugin}\n" in text and ("plugin.mem_hops on" in text) == m.simpoint_profile
        assert ("plugin.stalls on" in text) == m.stalls_reach_guest(spec)


def test_stalls_stay_off_the_guest_when_asked_or_without_per_vcpu_clocks():
    d = modes.get("detailed")
    assert not d.stalls_reach_guest(RunSpec(timing="detailed", no_stalls=True))
    assert not d.stalls_reach_guest(RunSpec(timing="detailed", qemu_mode="mttcg"))
    x86 = topologies.load("x86-2s")
    assert d.core_charges(RunSpec(timing="detailed"), x86)
    assert not d.core_charges(RunSpec(timing="detailed", no_stalls=True), x86)


@pytest.mark.parametrize("kw,msg", [
    (dict(timing="fast", no_stalls=True), "--no-stalls: only with --timing detailed"),
    (dict(timing="off", warmup_insns=1000), "--warmup-insns: expected a positive instruction count"),
    (dict(timing="detailed", warmup_insns=1000, boot=True), "--warmup-insns: a restored run's"),
    (dict(timing="detailed", qemu_mode="mttcg"), "needs --qemu-mode icount"),
    (dict(timing="sampled", boot=True), "--timing sampled: its regions start from snapshots"),
    (dict(timing="exact"), "--timing: expected one of auto, off, fast, detailed, sampled"),
    (dict(timing="fast", slice_insns=10), "--slice-insns: expected 10,000"),
])
def test_each_mode_refuses_what_it_cannot_honour(kw, msg):
    with pytest.raises(InputError, match=msg):
        execute.prepare(RunSpec(topology="gs1280-8", **kw))


# a mode name compared as a string: == "off", != 'sampled', in ("fast", "detailed"), ...
MODE_WORDS = set(BEHAVIOUR)
ALLOWED = {"timing/modes.py", "timing/plugin_config.py"}  # the modes, and the plugin's own two


def _compared_mode_names(rel: str, text: str) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                consts = [side] if isinstance(side, ast.Constant) else \
                    list(side.elts) if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else []
                if any(isinstance(c, ast.Constant) and c.value in MODE_WORDS for c in consts):
                    out.append(f"{rel}:{node.lineno}")
    return out


def test_no_mode_name_is_compared_outside_the_modes():
    found = []
    for p in sorted(REPO.glob("*/**/*.py")) + [REPO / "run.py"]:
        rel = p.relative_to(REPO).as_posix()
        if rel.split("/")[0] in ("tests", "runs") or rel in ALLOWED:
            continue
        found += _compared_mode_names(rel, p.read_text())
    assert not found, "mode names compared outside timing/modes.py: " + ", ".join(found)


def test_the_check_finds_a_planted_comparison():
    assert _compared_mode_names("x.py", 'if spec.timing != "off":\n    pass\n') == ["x.py:1"]
    assert _compared_mode_names("x.py", 'ok = t in ("fast", "detailed")\n') == ["x.py:1"]


def test_the_plugin_reads_exactly_the_keys_the_host_writes():
    """timing/plugin.c read_plugin_keys knows every plugin.* key of
    PLUGIN_KEYS and no other, and refuses an unknown one."""
    src = (REPO / "timing" / "plugin.c").read_text()
    body = src[src.index("static int read_plugin_keys("):]
    body = body[:body.index("\n}\n")]
    read = set(re.findall(r'strcmp\(key, "(plugin\.[a-z_]+)"\)', body))
    assert read == set(plugin_config.PLUGIN_KEYS)
    assert 'strncmp(key, "plugin.", 7)' in body and "unknown key" in body and "return -1" in body
    # and every key the host writes is one of them: a region's full set
    conf = plugin_config.PluginConfig("detailed", REPO / "o.json", bbv_dir=REPO, restored=True, mem_hops=True,
                                      checkpoint_points=True, price_from_marker=True, warmup_insns=5,
                                      stop_after_slices=3, region_warmup_slices=2, functional_slices=1,
                                      first_slice_done=7, stop_for_exit=True, profile=REPO / "p.json",
                                      user_symbols=REPO / "u.syms", pause_extra_ps=5)
    written = {ln.split()[0] for ln in conf.text(topologies.load("x86-2s")).splitlines() if ln.startswith("plugin.")}
    assert written == set(plugin_config.PLUGIN_KEYS)


@pytest.mark.engine  # builds (cached) our QEMU and the plugin, boots nothing
def test_the_plugin_refuses_an_unknown_key(tmp_path):
    """A configuration the plugin does not fully understand stops QEMU
    before the guest runs, naming the key (a run priced otherwise than asked
    must not start)."""
    import subprocess

    from engine import qemu_build
    topo = topologies.load("gs1280-8")
    prep = execute.prepare(RunSpec(topology="gs1280-8", timing="fast", boot=True))
    built = execute.build(prep)
    good = plugin_config.PluginConfig("fast", tmp_path / "o.json").text(topo)
    for name, text in (("good", good), ("bad", good + "plugin.price_everything on\n")):
        (tmp_path / f"{name}.conf").write_text(text)
    qemu = built.qemu_dir / "bin" / qemu_build.TARGETS[topo.guest_isa]

    def cmd(name):
        return [str(qemu), "-machine", "q35", "-smp", str(topo.cpus), "-m", f"{topo.total_memory_mib}M",
                "-nodefaults", "-display", "none", "-S", "-plugin", f"{built.plugin},config={tmp_path / name}.conf"]
    r = subprocess.run(cmd("bad"), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode != 0 and "unknown key plugin.price_everything" in r.stderr
    p = subprocess.Popen(cmd("good"), stderr=subprocess.PIPE, text=True)  # loads: QEMU waits, stopped (-S)
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            p.wait(timeout=5)
    finally:
        p.kill()
        err = p.communicate()[1]
    assert "unknown key" not in err


def test_a_functional_mode_says_so_first_and_the_accurate_one_is_the_default():
    assert RunSpec().timing == "auto" and execute.prepare(RunSpec(topology="gs1280-8")).mode.name == "detailed"
    # where the model cannot run, auto is a functional run that says why
    for kw, why in ((dict(qemu_mode="mttcg"), "--qemu-mode mttcg"), (dict(engine="debian"), "cannot load")):
        p = execute.prepare(RunSpec(topology="gs1280-8", **kw))
        assert p.mode.name == "off" and p.spec.timing == "off" and why in execute.limitations(p)
    assert not modes.get("detailed").headline() and not modes.get("sampled").headline()
    for name in ("off", "fast"):
        assert modes.get(name).headline().startswith(f"functional run (timing {name})")
