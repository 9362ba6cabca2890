"""`./run.py query`: read-only SQL on the results database, printed as a
table or CSV, or written to Parquet for pandas. Read-only means no file is
written either: ATTACH, VACUUM INTO and temporary objects are refused."""
from __future__ import annotations

import argparse
import sqlite3
import sys
from pathlib import Path

from analysis import db, summary


def parser(tables: str = "") -> argparse.ArgumentParser:
    """tables: what --help says the database holds (_schema_help)."""
    p = argparse.ArgumentParser(prog="./run.py query",
                                description="Run read-only SQL on the results database. " + tables)
    p.add_argument("sql", nargs="?", default="SELECT * FROM v_runs ORDER BY id DESC LIMIT 20")
    p.add_argument("--csv", action="store_true", help="print CSV instead of a table")
    p.add_argument("--parquet", metavar="FILE", help="write the result to a Parquet file (pyarrow) for pandas")
    db.add_option(p)
    return p


def main(argv: list[str]) -> int:
    tables = ""
    if {"-h", "--help"} & set(argv):  # only --help lists the tables: a query opens the database once
        pre = argparse.ArgumentParser(add_help=False)
        db.add_option(pre)
        tables = _schema_help(pre.parse_known_args(argv)[0].db)
    a = parser(tables).parse_args(argv)
    refused = []
    try:
        con = db.connect(a.db, readonly=True)
        con.set_authorizer(lambda action, *_: _query_authorizer(action, refused))
        cols, rows = db.query(con, a.sql)
    except db.SchemaError as e:  # it names the file
        return _fail(str(e))
    except sqlite3.Error as e:
        return _fail(f"{a.db}: " + (f"the query is read-only: {refused[0]} refused" if refused else str(e)))
    if a.parquet:
        from analysis import export
        try:
            n = export.parquet(cols, rows, a.parquet)
        except export.ExportError as e:
            return _fail(str(e))
        print(f"{a.parquet}: {n} rows, {len(cols)} columns")
        return 0
    print(summary.csv_text(cols, rows) if a.csv else summary.table(cols, rows), end="")
    return 0


def _query_authorizer(action: int, refused: list) -> int:
    """The database is opened read-only, so writing to it fails; but ATTACH
    (VACUUM INTO attaches too) opens, or creates, any file read-write, and
    temporary objects are writes too: refused, their name noted in `refused`."""
    names = {sqlite3.SQLITE_ATTACH: "ATTACH", sqlite3.SQLITE_DETACH: "DETACH",
             **{getattr(sqlite3, f"SQLITE_CREATE_TEMP_{k}"): f"CREATE TEMP {k}"
                for k in ("INDEX", "TABLE", "TRIGGER", "VIEW")}}
    if action in names:
        refused.append(names[action])
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def _schema_help(path: str) -> str:
    """The tables and views, read from the database (or, before the first
    run, from the schema this vmlab would create)."""
    try:
        con = db.connect(path, readonly=True) if Path(path).exists() else db.connect(":memory:")
        kinds = db.tables(con)
    except (db.SchemaError, sqlite3.Error) as e:
        return f"({path}: {e})"
    names = lambda t: ", ".join(n for k, n in kinds if k == t)
    return (f"Tables in {path if Path(path).exists() else 'a new database'}: {names('table')}. "
            f"Views: {names('view')}. Columns: ./run.py query \"PRAGMA table_info(NAME)\".")


def _fail(msg: str) -> int:
    print(f"error: {msg}", file=sys.stderr)
    return 2
