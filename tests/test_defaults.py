"""Facts written once: a run's defaults are RunSpec's (pipeline/spec.py),
which the parsers read; --db is added by one helper (analysis/db.py); the
longest run is experiments/limits.py's; `./run.py list` shows the
parameters every experiment takes once, then each experiment's own."""
import argparse
import ast
import dataclasses

import pytest

import experiments
from analysis import db
from pipeline import reference
from pipeline.spec import RunSpec
from tests.e2e import REPO

# option dest -> RunSpec field, where the names differ
FIELD = {"exp": "experiment"}
# sample-check's own defaults: a smaller machine and SimPoint's classic slice
SAMPLE_CHECK_OWN = {"topology", "slice_insns"}


def _defaults(p: argparse.ArgumentParser) -> dict:
    return {FIELD.get(a.dest, a.dest): a.default for a in p._actions}


def test_the_default_run_is_runspecs_default():
    run = reference.front_door()
    for parser in (run.run_parser(), run.build_parser()):
        args = parser.parse_args([])
        assert run.spec_from_args(args, args.kernel) == RunSpec()


@pytest.mark.parametrize("verb", ["run", "build", "sample-check"])
def test_every_run_option_defaults_to_runspecs_field(verb):
    d = _defaults(reference.front_door().parser(verb))
    fields = {f.name: f.default for f in dataclasses.fields(RunSpec)} if verb != "sample-check" else {
        f.name: f.default for f in dataclasses.fields(RunSpec) if f.name not in SAMPLE_CHECK_OWN}
    shared = set(d) & set(fields)
    assert len(shared) >= (20 if verb != "sample-check" else 8)  # every option a RunSpec field has
    assert {k: d[k] for k in shared} == {k: fields[k] for k in shared}


def test_db_is_one_option_everywhere():
    run = reference.front_door()
    with_db = []
    for verb in run.COMMANDS:
        p = run.parser(verb)
        for a in p._actions if p else ():
            if "--db" in a.option_strings:
                with_db.append(verb)
                assert (a.default, a.help) == (db.DEFAULT_PATH,
                                               f"SQLite results database (default ./{db.DEFAULT_PATH})")
    assert {"run", "show", "compare", "query", "report", "browse", "study", "seeds", "simpoint",
            "sample-check"} <= set(with_db)
    # and written once: no module adds it by hand
    for path in [REPO / "run.py", *sorted(REPO.glob("*/**/*.py"))]:
        if path.is_relative_to(REPO / "tests") or path.is_relative_to(REPO / "runs"):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument" and node.args
                    and isinstance(node.args[0], ast.Constant) and node.args[0].value == "--db"):
                assert path == REPO / "analysis" / "db.py", f"{path.relative_to(REPO)}:{node.lineno} adds --db"


def test_the_longest_run_is_defined_once():
    defined = [p.relative_to(REPO).as_posix() for p in [REPO / "run.py", *REPO.glob("*/**/*.py")]
               if not p.is_relative_to(REPO / "tests") and "\nMAX_TIMEOUT_S = " in p.read_text()]
    assert defined == ["experiments/limits.py"]


def test_list_shows_the_common_parameters_once_then_each_experiments_own(capsys):
    assert reference.front_door().cmd_list([]) == 0
    out = capsys.readouterr().out
    common = experiments.common_params()
    head, _, per_exp = out.partition("\nexperiments (")
    assert "parameters every experiment takes (experiments/common.toml):" in head
    for name, p in common.items():
        assert head.count(f"--param {name}={p.default} ") == 1, name
    for name in experiments.available():
        e = experiments.load(name)
        assert f"  {name}: " in per_exp
        own = e.own_params()
        for pname, p in e.params.items():
            # a common parameter shows under an experiment only when its manifest declares it again
            assert (f"--param {pname}={p.default} " in per_exp) == (pname in own or pname not in common), (name, pname)
    # e.g. forkstorm sizes its swap itself; memeater takes common.toml's
    assert "swap_frac" in experiments.load("forkstorm").own_params()
    assert "swap_frac" not in experiments.load("memeater").own_params()
    assert out.count("--param zone_reclaim_mode=") == 1
