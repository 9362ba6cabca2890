"""What tests share to call ./run.py: the checkout (REPO), the environment a
./run.py subprocess gets (ENV; end-to-end tests take conftest's `vmlab_env`,
which is ENV with CI's cold cache), the command into a private database, and
that database, and what a reproducer's run must hold."""
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from analysis import summary

REPO = Path(__file__).resolve().parent.parent


def environment(cache: str | None = None) -> dict[str, str]:
    """This process's environment for ./run.py, which is told that it already
    runs in the bootstrapped venv (the suite does); VMLAB_CACHE=cache if given."""
    env = dict(os.environ, VMLAB_IN_VENV="1")
    if cache is not None:
        env["VMLAB_CACHE"] = cache
    return env


# For commands that build nothing (bad input, query, show, compare, report, browse).
ENV = environment()


def vmlab_cmd(tmp, *args, runs_dir: bool = True, default_timing: bool = False) -> list[str]:
    """./run.py ARGS into tmp's private database (tmp/r.db) and, with runs_dir,
    its runs folder (tmp/runs); tmp None: ARGS alone (build, bench, study).
    A run (into tmp/runs, its first argument an option, not a subcommand)
    names its --timing mode, unless default_timing says it tests the
    default: the default prices every instruction, and tests that took it
    unawares (seed 000's and 002's) ran CI out of its time twice."""
    if (tmp is not None and runs_dir and args and str(args[0]).startswith("-") and not default_timing
            and "--timing" not in args):
        raise ValueError(f"an end-to-end run names its --timing mode (or default_timing=True): {args}")
    cmd = [sys.executable, str(REPO / "run.py"), *args]
    if tmp is not None:
        cmd += ["--db", str(tmp / "r.db")]
        if runs_dir:
            cmd += ["--runs-dir", str(tmp / "runs")]
    return cmd


def vmlab(env, tmp, *args, runs_dir: bool = True, default_timing: bool = False,
          **kw) -> subprocess.CompletedProcess:
    """vmlab_cmd run to the end with env, its output captured as text; kw to
    subprocess.run (cwd, timeout)."""
    return subprocess.run(vmlab_cmd(tmp, *args, runs_dir=runs_dir, default_timing=default_timing), env=env,
                          capture_output=True, text=True, **kw)


def db(tmp):
    c = sqlite3.connect(tmp / "r.db")
    c.row_factory = sqlite3.Row
    return c


def metrics(c, rid) -> dict:
    """A run's metrics by name: the number, else the text."""
    return {x["name"]: x["value"] if x["value"] is not None else x["text"]
            for x in c.execute("SELECT name, value, text FROM metrics WHERE run_id = ?", (rid,))}


def reproducer_ok(c, rid, exp) -> str:
    """The run is ok, of exp, and its reproducer's sanity checks all passed:
    the metric, and the line the run's summary prints from the checks' rows
    (analysis/summary.py, what `./run.py show RUN` prints). The summary."""
    run = c.execute("SELECT status, experiment FROM runs WHERE id = ?", (rid,)).fetchone()
    assert tuple(run) == ("ok", exp)
    out = summary.render(c, rid)
    sanity = next((line for line in out.splitlines() if line.startswith("sanity:")), None)
    assert sanity and sanity.startswith("sanity:  PASSED"), sanity
    assert metrics(c, rid)[f"{exp}.sanity_ok"] == 1
    return out
