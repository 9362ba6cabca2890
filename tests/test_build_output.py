"""A build's output is progress lines (build/wrapper.py): SCons's own lines,
each action it runs (`gcc ...`, `build_kernel([...], [...])`) and its
`scons: ...` messages, go to the build log only; a failed build's error ends
with the log's tail. Real SCons on a small SConstruct set up as
build/SConstruct is (checked below), so it takes a second."""
import ast
import sys

import pytest

from build import wrapper
from tests.e2e import REPO

SCONSTRUCT = """
import sys
from SCons.Script import ARGUMENTS, Default, Environment, SConsignFile
sys.path.insert(0, ARGUMENTS["repo"])
from build import wrapper
out = ARGUMENTS["out"]
SConsignFile(out + "/sconsign")
env = Environment(PRINT_CMD_LINE_FUNC=wrapper.print_action)


def recipe(target, source, env):
    print("  thing: 1/2 steps", flush=True)  # a recipe's progress line, as images/kernel.py prints them
    open(str(target[0]), "w").write("b")
    return 0


Default(env.Command(out + "/a", [], "echo built-a > $TARGET"), env.Command(out + "/b", [], recipe),
        env.Command(out + "/c", [], ARGUMENTS.get("last", "echo built-c > $TARGET")))
"""


def scons(tmp_path, *extra):
    (tmp_path / "SConstruct").write_text(SCONSTRUCT)
    return [sys.executable, "-m", "SCons", "-Q", "-f", str(tmp_path / "SConstruct"), f"repo={REPO}",
            f"out={tmp_path}", *extra]


def test_a_build_prints_progress_lines_and_logs_what_scons_runs(tmp_path, capsys):
    log = tmp_path / "build.log"
    assert wrapper._scons(scons(tmp_path), log=log) is True
    assert capsys.readouterr().out == "  thing: 1/2 steps\n"
    text = log.read_text()
    assert f"echo built-a > {tmp_path}/a" in text and f"echo built-c > {tmp_path}/c" in text
    assert f'recipe(["{tmp_path}/b"], [])' in text and "  thing: 1/2 steps" in text
    assert wrapper.ACTION not in text  # the log reads as SCons prints it
    # nothing to do: nothing printed, and the log says so
    assert wrapper._scons(scons(tmp_path), log=log) is False
    assert capsys.readouterr().out == ""
    assert "is up to date" in log.read_text()


def test_a_failed_build_ends_its_error_with_the_log(tmp_path, capsys):
    log = tmp_path / "build.log"
    with pytest.raises(wrapper.BuildFailed) as e:
        wrapper._scons(scons(tmp_path, "last=echo the compiler says no; exit 3"), log=log)
    msg = str(e.value)
    assert msg.startswith(f"build failed (scons exit status 2); the end of {log}:\n")
    # the failing action, what it said and SCons's verdict, all in the error
    assert "echo the compiler says no; exit 3" in msg and "\nthe compiler says no\n" in msg
    assert "scons: *** [" in msg and "Error 3" in msg
    out = capsys.readouterr().out
    assert "the compiler says no" in out and "scons:" not in out and "echo " not in out


def test_the_real_sconstruct_prints_actions_through_the_wrapper():
    """build/SConstruct's one Environment has SCons print its actions as
    the tests above do, and every target is built in it."""
    tree = ast.parse((REPO / "build" / "SConstruct").read_text())
    envs = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "Environment"]
    assert len(envs) == 1
    kw = {k.arg: ast.unparse(k.value) for k in envs[0].keywords}
    assert kw.get("PRINT_CMD_LINE_FUNC") == "wrapper.print_action"
    commands = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and n.func.attr == "Command"]
    assert commands and all(ast.unparse(n.func.value) == "env" for n in commands)
