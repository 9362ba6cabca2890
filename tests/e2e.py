"""Helpers for end-to-end tests that call ./run.py into a private database."""
import sqlite3
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def vmlab_cmd(tmp, *args) -> list[str]:
    """./run.py ARGS into tmp's private database and runs folder."""
    return [sys.executable, str(REPO / "run.py"), *args, "--db", str(tmp / "r.db"), "--runs-dir", str(tmp / "runs")]


def vmlab(env, tmp, *args):
    return subprocess.run(vmlab_cmd(tmp, *args), env=env, capture_output=True, text=True)


def db(tmp):
    c = sqlite3.connect(tmp / "r.db")
    c.row_factory = sqlite3.Row
    return c
