"""The engine seam (pipeline/engines.py): the run pipeline reaches an engine
only through the Engine interface, so a second engine is one new class."""
import ast

import pytest

from pipeline import engines
from tests.e2e import REPO


def test_execute_imports_no_engine_module_directly():
    tree = ast.parse((REPO / "pipeline" / "execute.py").read_text())
    named = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    named |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not {m for m in named if m == "engine" or m.startswith("engine.")}, named


def test_an_engine_must_implement_the_interface():
    class Half(engines.Engine):
        name, kind = "half", "test"

        def check(self, spec):
            return 1000
    with pytest.raises(TypeError, match="abstract"):
        Half()


def test_an_engine_without_snapshots_boots_every_run():
    class Minimal(engines.Engine):
        name, kind = "minimal", "test"

        def check(self, spec):
            return 1000

        def label(self, built, topo):
            return "minimal 1"

        def timeouts(self, spec, topo, run_s):
            return 60.0, run_s

        def invocation(self, *a, **kw):
            return engines.Invocation(["true"], "host", None, "minimal 1")

        def run(self, *a, **kw):
            return engines.Outcome("ok", "", 0.0, 0.0, 0)

        def vcpu_clocks(self, log):
            return []
    e = Minimal()
    assert e.boots_only_why(None, None) == "this engine has no snapshots after boot"
    assert e.sched_counts(None) == {}
    with pytest.raises(NotImplementedError):
        e.snapshot_disks(None)


def test_every_listed_engine_is_an_engine():
    for name in engines.ENGINES:
        e = engines.get(name)
        assert isinstance(e, engines.Engine) and e.name == name
    with pytest.raises(engines.EngineError, match="--engine: expected one of"):
        engines.get("gem6")
