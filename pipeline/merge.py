"""Merge a worker's SQLite file into the study's database: every run gets a
new id in the destination, and every row of every table that hangs off a
run (a `run_id` column) follows it, in one transaction. A run merged twice
(same key, host, pid and start time) is found, not copied again.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path

# Tables with a run_id that belong to the coordinator, never a worker's.
COORDINATOR_ONLY = {"study_runs", "compare_runs"}


class MergeError(RuntimeError):
    pass


def _columns(con, schema: str, table: str) -> list[str]:
    return [r[1] for r in con.execute(f"PRAGMA {schema}.table_info('{table}')")]


def _versions(con, schema: str) -> tuple:
    v = con.execute(f"PRAGMA {schema}.user_version").fetchone()[0]
    have = con.execute(f"SELECT 1 FROM {schema}.sqlite_master WHERE name = 'schema_parts'").fetchone()
    parts = tuple(sorted(tuple(r) for r in con.execute(f"SELECT part, version FROM {schema}.schema_parts"))) \
        if have else ()
    return v, parts


def hanging_tables(con, schema: str) -> list[str]:
    """The tables whose rows belong to one run (a run_id column), the
    coordinator's own left out: what moves with a run between databases."""
    tables = [r[0] for r in con.execute(f"SELECT name FROM {schema}.sqlite_master WHERE type = 'table' "
                                        "AND name NOT LIKE 'sqlite_%'")]
    return [t for t in tables if t != "runs" and t not in COORDINATOR_ONLY and "run_id" in _columns(con, schema, t)]


def merge(con: sqlite3.Connection, src: Path, log_paths: dict[int, str] | None = None) -> dict[int, int]:
    """Copy every run of `src` into `con`'s database; {worker run id: new id}.
    log_paths: where each worker run's console now lives (worker id -> path)."""
    con.execute("ATTACH DATABASE ? AS w", (str(src),))
    try:
        if _versions(con, "main") != _versions(con, "w"):
            raise MergeError(f"{src}: schema {_versions(con, 'w')} differs from the study database's "
                             f"{_versions(con, 'main')}: the worker runs another vmlab version")
        hanging = hanging_tables(con, "w")
        run_cols = [c for c in _columns(con, "w", "runs") if c != "id"]
        mapping: dict[int, int] = {}
        with con:
            cur = con.cursor()
            cur.row_factory = sqlite3.Row
            for r in cur.execute("SELECT * FROM w.runs ORDER BY id").fetchall():
                same = con.execute("SELECT id FROM main.runs WHERE run_key IS ? AND host = ? AND pid IS ? "
                                   "AND started_at = ?",
                                   (r["run_key"], r["host"], r["pid"], r["started_at"])).fetchone()
                if same:
                    mapping[r["id"]] = same[0]
                    continue
                vals = {c: r[c] for c in run_cols}
                if log_paths and r["id"] in log_paths:
                    vals["log_path"] = log_paths[r["id"]]
                mapping[r["id"]] = con.execute(f"INSERT INTO main.runs ({', '.join(run_cols)}) VALUES "
                                               f"({', '.join(':' + c for c in run_cols)})", vals).lastrowid
                for t in hanging:
                    cols = _columns(con, "w", t)
                    sel = ", ".join("?" if c == "run_id" else f'"{c}"' for c in cols)
                    names = ", ".join(f'"{c}"' for c in cols)
                    con.execute(f"INSERT INTO main.{t} ({names}) SELECT {sel} FROM w.{t} WHERE run_id = ?",
                                (mapping[r["id"]], r["id"]))
        return mapping
    finally:
        con.execute("DETACH DATABASE w")
