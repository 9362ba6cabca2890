"""`./run.py browse`: the results database in Datasette, read-only, with
what each table means and canned queries (analysis/datasette_metadata.py).

Read-only without freezing the file: runs and studies may be writing the
database while it is browsed, so it is not served `--immutable` (that
promises SQLite the file never changes, and readers would see torn pages).
Datasette opens a mutable database's read connections with mode=ro and
writes only when a plugin or a writable canned query asks; vmlab installs
no plugins and defines none (tests/test_browse.py checks the file is
unchanged after serving).
"""
from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from analysis import datasette_metadata


def command(db: Path, port: int, host: str, metadata: Path) -> list[str]:
    exe = Path(sys.executable).parent / "datasette"
    return [str(exe), "serve", str(db), "--host", host, "--port", str(port), "--metadata", str(metadata),
            # our views join a few tables; the default 1 s can cut a large study short
            "--setting", "sql_time_limit_ms", "20000", "--setting", "max_returned_rows", "5000"]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="./run.py browse", description=(
        "Serve the results database with Datasette, read-only, with table descriptions and canned queries "
        "(latest runs, swap and kswapd, memeater ms by hops, latency by hops, lock contention, comparisons, "
        "study progress)."))
    from analysis import db
    db.add_option(p)
    p.add_argument("--port", type=int, default=8001, help="port to listen on (default 8001)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: this machine only)")
    p.add_argument("--metadata-out", metavar="FILE", help="write the Datasette metadata here and exit")
    return p


def main(argv: list[str]) -> int:
    a = parser().parse_args(argv)
    db = Path(a.db).resolve()
    meta = datasette_metadata.metadata(db.stem)
    if a.metadata_out:
        Path(a.metadata_out).write_text(json.dumps(meta, indent=2))
        print(a.metadata_out)
        return 0
    if not db.is_file():
        print(f"error: {a.db}: no results database yet (run an experiment first)", file=sys.stderr)
        return 2
    if not 1 <= a.port <= 65535:
        print(f"error: --port: expected 1 to 65535, got {a.port}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="vmlab-browse-") as d:
        mpath = Path(d) / "metadata.json"
        mpath.write_text(json.dumps(meta))
        print(f"browse: http://{a.host}:{a.port}/{db.stem} (read-only; Ctrl-C stops)", flush=True)
        server = subprocess.Popen(command(db, a.port, a.host, mpath))
        # stopped by a signal (a test, a service manager), take Datasette down too: left running it
        # keeps the port and reads a database nobody is browsing
        signal.signal(signal.SIGTERM, lambda *_: server.terminate())
        try:
            return server.wait()
        except KeyboardInterrupt:  # Datasette got the same Ctrl-C and stops
            server.wait()
            return 0
