"""Small helpers every results module shares: rows inserted by column name,
key figures into `metrics`, the summary's number formats and a run's hop
distances. Results modules (experiments/<name>/results.py) import these;
this module imports none of vmlab, so nothing here calls them back."""
from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping


def insert(con: sqlite3.Connection, table: str, rows: Mapping | Iterable[Mapping], replace: bool = True) -> int:
    """INSERT one dict or each of a list by its keys (the rows of one call
    share the first row's columns), so a column added to a table never
    shifts a value into the wrong place. Returns the number of rows."""
    rows = [rows] if isinstance(rows, Mapping) else list(rows)
    if not rows:
        return 0
    cols = list(rows[0])
    verb = "INSERT OR REPLACE" if replace else "INSERT"
    con.executemany(f"{verb} INTO {table} ({', '.join(cols)}) VALUES ({', '.join(':' + c for c in cols)})",
                    [{c: r.get(c) for c in cols} for r in rows])
    return len(rows)


def metric(con: sqlite3.Connection, run_id: int, name: str, value=None, unit: str | None = None,
           text: str | None = None) -> None:
    insert(con, "metrics", [{"run_id": run_id, "name": name, "value": value, "text": text, "unit": unit}])


def metrics(con: sqlite3.Connection, run_id: int) -> dict:
    """name -> numeric value of one run's metrics."""
    return {x[0]: x[1] for x in con.execute(
        "SELECT name, value FROM metrics WHERE run_id = ? AND value IS NOT NULL", (run_id,))}


def ratio(a, b):
    return a / b if a is not None and b else None


def f(v, fmt: str = "{:.2f}") -> str:
    return "-" if v is None else fmt.format(v)


def mib(kib) -> str:
    return "" if kib is None else f"{kib / 1024:.1f}"


def hops_from_home(con, run_id, r, params) -> dict:
    """Hops from the node of the CPU the experiment was pinned to (param cpu)."""
    cpu = params.get("cpu", -1)
    if cpu is None or cpu < 0:
        return {}
    home = cpu // (r["cpus"] // r["nodes"])
    return {x["dst"]: x["hops"] for x in con.execute(
        "SELECT dst, hops FROM guest_distances WHERE run_id = ? AND src = ?", (run_id, home))}
