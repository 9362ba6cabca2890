"""Data flows one way (issue 23): a stage imports only the stages before it.

Every module of the stage folders (their .py files, and build/
SConstruct, which is Python too) is read with `ast`, each import anywhere in
it (top level or inside a function) is mapped to the module it names, and
both ends are mapped to a stage by STAGES below. The tests fail on an import
of a later stage, on a cycle between modules, and on a stage before
pipeline/ that runs ./run.py, naming the file, the line and the import.

Each stage is a top-level folder (docs/architecture.md draws them); where
the folders are not the whole story:
- experiments/<name>/results.py and plots.py are results-stage code kept in
  the experiment's folder (an experiment is one folder). They may import
  analysis helpers (analysis/kit.py, analysis/rows.py), but none that calls
  them back: analysis/experiment_results.py loads them by name, which the
  cycle check counts as an import of each, so such a module importing an
  analysis module that goes through that loader (analysis.summary,
  analysis.db, analysis.plots, ...) is a cycle. Only the loader imports by
  name (an import the check cannot read would hide a cycle).
- run.py is the front door over every stage and may import anything; it
  is not read. Nor is tests/.
"""
from __future__ import annotations

import ast
import fnmatch
import functools

import pytest

from tests.e2e import REPO

# The order, lowest first: each stage may import its own and earlier ones.
# It is the design's stage table (../shared/DESIGN.md: machine, software,
# build, engine, workload, results; the timing model in its own folder;
# pipeline/ and run.py over them) as the code imports it. Where it differs:
# - protocol first: the facts and records every stage speaks (docstring).
# - build (build/) after the stages whose recipes it runs: the
#   kernel and initramfs of images/, engine/qemu_build.py's QEMU, the guest
#   programs of experiments/, timing/'s plugin. The engine gets the
#   artifacts from pipeline/, not by importing the build.
# - timing after workload: the model reads protocol/facts.py, and
#   analysis reads the model's counters.
# - bootstrap/ (host setup, standard library only) imports nothing of vmlab
#   and only the front calls it (pipeline/, run.py): installing things is
#   not a stage's business.
# An entry is a top-level folder, or file patterns that take files out of
# their folder's stage (a file pattern wins over its folder).
STAGES = (
    ("protocol", ("protocol",)),
    ("machine", ("topologies",)),
    ("software", ("images",)),
    ("engine", ("engine",)),
    ("workload", ("experiments",)),
    ("timing", ("timing",)),
    ("build", ("build",)),
    ("results", ("analysis", "experiments/*/results.py", "experiments/*/plots.py")),
    ("seeds", ("seeds",)),
    ("sampling", ("sampling",)),
    ("bootstrap", ("bootstrap",)),
    ("pipeline", ("pipeline",)),
)
RANK = {name: i for i, (name, _) in enumerate(STAGES)}
FOLDERS = {p: name for name, parts in STAGES for p in parts if "/" not in p}
FILES = [(p, name) for name, parts in STAGES for p in parts if "/" in p]
EXTRA_SOURCES = ("build/SConstruct",)
# The loader of the experiments' results-stage modules (see the docstring),
# the function that loads each such file, and what importing by name is.
LOADER = "analysis.experiment_results"
LOADED_BY = {"results": "results_module", "plots": "plots_module"}
BY_NAME = {"import_module", "__import__"}


@functools.cache
def parse(rel: str, text: str) -> ast.AST:
    return ast.parse(text, rel)


def stage_of(rel: str) -> str | None:
    for pattern, name in FILES:
        if fnmatch.fnmatch(rel, pattern):
            return name
    return FOLDERS.get(rel.split("/")[0])


def module_name(rel: str) -> str:
    parts = rel.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sources() -> dict[str, str]:
    """repo-relative path -> text, every module of the stage folders."""
    out = {}
    for folder in FOLDERS:
        for p in sorted((REPO / folder).rglob("*.py")):
            out[p.relative_to(REPO).as_posix()] = p.read_text()
    for rel in EXTRA_SOURCES:
        out[rel] = (REPO / rel).read_text()
    return out


def imports(rel: str, text: str, known: set[str]) -> list[tuple[int, str, str]]:
    """(line, the import as written, the vmlab module it reaches) for each
    import of a vmlab module; standard library and third-party are skipped."""
    pkg = module_name(rel).split(".") if rel.endswith("__init__.py") else module_name(rel).split(".")[:-1]

    def reach(name: str) -> str | None:  # the longest vmlab module the dotted name starts with
        parts = name.split(".")
        for n in range(len(parts), 0, -1):
            if ".".join(parts[:n]) in known:
                return ".".join(parts[:n])
        return None

    out = []
    for node in ast.walk(parse(rel, text)):
        if isinstance(node, ast.Import):
            for a in node.names:
                if (m := reach(a.name)) is not None:
                    out.append((node.lineno, f"import {a.name}", m))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = pkg[:len(pkg) - (node.level - 1)]
                base = ".".join([*up, *([base] if base else [])])
            for a in node.names:
                m = reach(f"{base}.{a.name}")  # a submodule, else the module it is taken from
                if m is not None:
                    out.append((node.lineno, f"from {'.' * node.level}{node.module or ''} import {a.name}", m))
    return out


def graph(srcs: dict[str, str]):
    """module -> its file, and the import edges (module, line, as written, module)."""
    files = {module_name(rel): rel for rel in srcs}
    known = set(files)
    edges = [(module_name(rel), line, text, dst) for rel, src in srcs.items()
             for line, text, dst in imports(rel, src, known)]
    return files, edges


def backward(srcs: dict[str, str]) -> list[str]:
    files, edges = graph(srcs)
    stage = {m: stage_of(rel) for m, rel in files.items()}
    return [f"{files[src]}:{line}: `{text}` imports {dst} ({stage[dst]}), a later stage than {stage[src]}"
            for src, line, text, dst in edges if RANK[stage[dst]] > RANK[stage[src]]]


def cycles(srcs: dict[str, str]) -> list[str]:
    files, edges = graph(srcs)
    out_edges: dict[str, list[tuple[str, str]]] = {m: [] for m in files}
    for src, line, text, dst in edges:
        if dst != src:
            out_edges[src].append((dst, f"{files[src]}:{line}: `{text}`"))
    for m, rel in files.items():  # the loader imports every experiment's results-stage module by name
        if stage_of(rel) == "results" and m.startswith("experiments."):
            out_edges[LOADER].append((m, f"{files[LOADER]}: {LOADED_BY[m.rsplit('.', 1)[1]]}() loads {m}"))
    found, state, path = [], {}, []

    def visit(m):
        state[m] = "open"
        for dst, why in out_edges[m]:
            path.append(why)
            if state.get(dst) == "open":
                start = next(i for i, w in enumerate(path) if w.startswith(files[dst] + ":"))
                found.append(" -> ".join(path[start:]))
            elif dst not in state:
                visit(dst)
            path.pop()
        state[m] = "done"

    for m in sorted(files):
        if m not in state:
            visit(m)
    return found


def loader_calls(srcs: dict[str, str]) -> list[str]:
    """Only the loader imports a module by name: the cycle check reads its
    loads as edges (cycles()), and would miss any other. (Calling the loader
    from a stage before results is an import of analysis: backward().)"""
    out = []
    for rel, text in srcs.items():
        if module_name(rel) == LOADER:
            continue
        for node in ast.walk(parse(rel, text)):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
                if name in BY_NAME:
                    out.append(f"{rel}:{node.lineno}: {name}() imports by name outside the loader ({LOADER})")
    return out


def runs_front_door(srcs: dict[str, str]) -> list[str]:
    """A stage is a library: running ./run.py is for pipeline/ (and run.py)."""
    return [f"{rel}:{node.lineno}: names {node.value!r} ({stage_of(rel)} runs the front door)"
            for rel, text in srcs.items() if RANK[stage_of(rel)] < RANK["pipeline"]
            for node in ast.walk(parse(rel, text))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and node.value.strip().removeprefix("./") == "run.py"]


@pytest.fixture(scope="module")
def srcs():
    return sources()


def test_every_folder_of_python_code_has_a_stage(srcs):
    """A new top-level folder of modules must be placed in STAGES."""
    folders = {d.name for d in REPO.iterdir() if d.is_dir() and d.name != "tests" and not d.name.startswith(".")
               and next(d.glob("*.py"), None) is not None}
    assert folders <= set(FOLDERS), f"folders without a stage in STAGES: {sorted(folders - set(FOLDERS))}"
    assert len(srcs) > 50 and all(stage_of(rel) for rel in srcs)


def test_no_stage_imports_a_later_stage(srcs):
    bad = backward(srcs)
    assert not bad, "imports against the flow (STAGES, lowest first: " + \
        " < ".join(n for n, _ in STAGES) + "):\n" + "\n".join(bad)


def test_no_import_cycles(srcs):
    bad = cycles(srcs)
    assert not bad, "import cycles:\n" + "\n".join(bad)


def test_only_the_loader_imports_by_name(srcs):
    bad = loader_calls(srcs)
    assert not bad, "\n".join(bad)


def test_no_stage_before_pipeline_runs_run_py(srcs):
    bad = runs_front_door(srcs)
    assert not bad, "\n".join(bad)


def test_the_checks_see_what_they_look_for(srcs):
    """Each check finds the mistake it exists for, planted in a copy of the sources."""
    planted = dict(srcs)
    planted["engine/qemu.py"] += "\nfrom analysis import records as rec\n"
    assert any(x.startswith("engine/qemu.py:") and "analysis (results)" in x and "than engine" in x
               for x in backward(planted))
    planted = dict(srcs)
    planted["experiments/memeater/results.py"] += "\nfrom analysis.summary import render\n"
    assert any("analysis/summary.py" in x and "experiments/memeater/results.py" in x for x in cycles(planted))
    planted = dict(srcs)  # the kit every results.py imports must not call them back either
    planted["analysis/kit.py"] += "\nfrom analysis import db\n"
    assert any("analysis/kit.py:" in x and "`from analysis import db`" in x for x in cycles(planted))
    planted = dict(srcs)
    planted["experiments/kvio/plots.py"] += "\nfrom analysis.plots import build\n"
    assert any("analysis/plots.py" in x and "plots_module() loads experiments.kvio.plots" in x
               for x in cycles(planted))
    planted = dict(srcs)
    planted["topologies/routes.py"] += "\nfrom topologies import torus_coords\n"
    assert any("topologies/routes.py" in x and "topologies/__init__.py" in x for x in cycles(planted))
    planted = dict(srcs)
    planted["timing/bench.py"] = "import subprocess, sys\nsubprocess.run([sys.executable, 'run.py'])\n"
    assert runs_front_door(planted) == ["timing/bench.py:2: names 'run.py' (timing runs the front door)"]
    planted["engine/x.py"] = "from analysis.experiment_results import plots_module\nplots_module('kvio')\n"
    assert backward(planted) == ["engine/x.py:1: `from analysis.experiment_results import plots_module` imports "
                                 "analysis.experiment_results (results), a later stage than engine"]
    del planted["engine/x.py"]
    planted["analysis/x.py"] = "import importlib\nimportlib.import_module('experiments.memeater.results')\n"
    assert loader_calls(planted) == ["analysis/x.py:2: import_module() imports by name outside the loader "
                                     "(analysis.experiment_results)"]
    assert stage_of("protocol/facts.py") == "protocol" and stage_of("experiments/kvio/results.py") == "results"
    assert stage_of("experiments/kvio/plots.py") == "results" and stage_of("experiments/__init__.py") == "workload"
