"""The engine seam (engine/base.py): the run pipeline and sampling reach an
engine only through Engine and Snapshots, so a second engine is one new
class; an engine without snapshots is asked, never probed."""
import ast

import pytest

import engine
from engine import base
from pipeline import execute
from pipeline.spec import InputError, RunSpec
from tests.e2e import REPO

# the engine's implementation modules: the pipeline names none of them
IMPLEMENTATION = {"engine.qemu", "engine.qemu_engine", "engine.qemu_build", "engine.snapshot", "engine.regions"}


def _imports(path):
    tree = ast.parse(path.read_text())
    named = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    named |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    named |= {f"{n.module}.{a.name}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
              for a in n.names}
    return named


def test_the_pipeline_imports_no_engine_implementation():
    bad = {p.name: sorted(_imports(p) & IMPLEMENTATION) for p in sorted((REPO / "pipeline").glob("*.py"))}
    assert not {k: v for k, v in bad.items() if v}


def test_the_interface_has_no_unimplemented_methods():
    text = (REPO / "engine" / "base.py").read_text()
    assert "NotImplementedError" not in text


def test_an_engine_must_implement_the_interface():
    class Half(base.Engine):
        name, kind = "half", "test"

        def check(self, spec, with_plugin):
            return 1000
    with pytest.raises(TypeError, match="abstract"):
        Half()


class Minimal(base.Engine):
    """A second engine as a user would add one: no snapshots, no disk model."""
    name, kind = "minimal", "test"

    def check(self, spec, with_plugin):
        if with_plugin:
            raise engine.EngineError("--engine minimal: no timing plugin")
        return 1000

    def snapshots(self, spec, topo, swap_mib=0, data_mib=0):
        return None, "this engine has no snapshots after boot"

    def models_disks(self, spec):
        return False

    def loads_plugin(self):
        return False

    def label(self, built, topo):
        return "minimal 1"

    def build_key(self):
        return "minimal 1"

    def timeouts(self, spec, topo, run_s, slowdown, boot_slowdown):
        return 60.0 * boot_slowdown, run_s * slowdown

    def perturbation(self, seed, repeat):
        return ""

    def cycle_ps(self, topo):
        return 1000

    def limitations(self, spec, topo, **kw):
        return ["minimal: not repeatable"]

    def invocation(self, spec, topo, built, m, stalls):
        return base.Invocation(["true"], "host", None, "minimal 1")

    def run(self, *a, **kw):
        return base.Outcome("ok", "", 0.0, 0.0, 0)

    def vcpu_clocks(self, log):
        return []

    def sched_counts(self, log):
        return {}


def test_a_second_engine_is_one_class(monkeypatch):
    monkeypatch.setitem(engine.ENGINES, "minimal", Minimal)
    prep = execute.prepare(RunSpec(topology="gs1280-8", engine="minimal"))
    assert (prep.start, prep.boot_reason, prep.snaps) == ("booted", "this engine has no snapshots after boot", None)
    assert prep.disk_model is None                              # it models no disk: its disks are host-timed
    lim = execute.limitations(prep)
    assert "minimal: not repeatable" in lim and "deterministic" not in lim
    with pytest.raises(InputError, match="--engine minimal: no timing plugin"):
        execute.prepare(RunSpec(topology="gs1280-8", engine="minimal", timing="fast"))
    with pytest.raises(InputError, match="--timing sampled: its regions start from snapshots"):
        execute.prepare(RunSpec(topology="gs1280-8", timing="sampled", boot=True))


def test_every_listed_engine_is_an_engine():
    for name in engine.ENGINES:
        e = engine.get(name)
        assert isinstance(e, base.Engine) and e.name == name
    with pytest.raises(engine.EngineError, match="--engine: expected one of"):
        engine.get("gem6")
