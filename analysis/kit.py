"""Results stage: the kit an experiment's results.py is written with
(experiments/<name>/results.py; analysis/experiment_results.py loads it).

- Its tables, declared once: `Table(name, doc, columns, key, indexes)` of
  `Column(name, type, doc, ...)`, and `View(name, doc, sql)`. A declaration
  gives the DDL (`ddl`; `schema(*declarations)` makes the results.py's
  versioned SCHEMA steps of them), the columns and what they mean
  (`descriptions()`, which `./run.py browse` shows: analysis/
  datasette_metadata.py reads every experiment's TABLES), and its rows
  (`from_body()`: a record's body by column name; `insert()`, which refuses
  a key that is not a column).
- What the probes read back: a run's records of one type (`bodies`) and the
  topology it ran on (`run_topology`).
- `text_table`: a summary's fixed-width table.

SCHEMA steps are versioned (analysis/db.py counts each experiment's in
schema_parts): a table or view declared later takes the next `step`, and so
does a column added to a table created before (its step is then an ALTER
TABLE ... ADD COLUMN, at the table's end), so a declaration only ever grows.

This module imports no analysis module that loads results.py, so nothing
here calls an experiment back (tests/test_import_direction.py).
"""
from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import topologies
from analysis import rows as rows_module

TYPES = ("INTEGER", "REAL", "TEXT", "BLOB")


class DeclarationError(ValueError):
    """A table declared or used against its own columns (one line naming the table)."""


def _literal(v) -> str:
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise DeclarationError(f"default {v!r}: expected a number or a string")
    return repr(v)


@dataclass(frozen=True)
class Column:
    """One column: its SQL type and what it means (doc, shown by `./run.py
    browse`; "" when the name says it). `field`: the record's key it is read
    from by Table.from_body, when not the column's own name. `step`: the
    SCHEMA step that added it to a table created earlier (None: the table's)."""
    name: str
    type: str
    doc: str = ""
    not_null: bool = False
    default: int | float | str | None = None
    references: str | None = None   # e.g. "runs(id) ON DELETE CASCADE"
    field: str | None = None
    step: int | None = None

    def __post_init__(self):
        if not self.name.isidentifier() or self.type not in TYPES:
            raise DeclarationError(f"column {self.name!r} {self.type!r}: expected a name and one of {', '.join(TYPES)}")
        if self.default is not None:
            _literal(self.default)

    @property
    def ddl(self) -> str:
        return " ".join([self.name, self.type, *(["NOT NULL"] if self.not_null else []),
                         *([f"DEFAULT {_literal(self.default)}"] if self.default is not None else []),
                         *([f"REFERENCES {self.references}"] if self.references else [])])


# The column every experiment's table starts with: the run its rows belong to.
RUN_ID = Column("run_id", "INTEGER", not_null=True, references="runs(id) ON DELETE CASCADE")


@dataclass(frozen=True)
class Table:
    """A table of an experiment's own: its columns in order, its primary key,
    its indexes (each a tuple of columns), and the SCHEMA step creating it."""
    name: str
    doc: str
    columns: tuple[Column, ...]
    key: tuple[str, ...] = ()
    indexes: tuple[tuple[str, ...], ...] = ()
    step: int = 1

    def __post_init__(self):
        names = [c.name for c in self.columns]
        where = f"table {self.name}"
        if not self.name.isidentifier() or not self.columns or not self.doc:
            raise DeclarationError(f"{where}: expected a name, a description and columns")
        if len(set(names)) != len(names):
            raise DeclarationError(f"{where}: a column declared twice in {names}")
        for cols in ((self.key,) if self.key else ()) + self.indexes:
            if not cols or set(cols) - set(names):
                raise DeclarationError(f"{where}: key or index {cols!r}: expected columns of {', '.join(names)}")
        steps = [self.step if c.step is None else c.step for c in self.columns]
        if steps != sorted(steps) or steps[0] != self.step:
            raise DeclarationError(f"{where}: a column added by a later step must come after the others "
                                   f"(ALTER TABLE adds it at the end), none before the table's step {self.step}")
        for c in self.later_columns():
            if c.name in self.key or c.name in {x for i in self.indexes for x in i} or c.not_null and c.default is None:
                raise DeclarationError(f"{where}: column {c.name}, added by step {c.step}: ALTER TABLE cannot add it "
                                       f"to the key or an index, nor NOT NULL without a default")

    def later_columns(self) -> list[Column]:
        return [c for c in self.columns if c.step not in (None, self.step)]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def ddl(self) -> str:
        """CREATE TABLE (and its indexes), as of the step creating it."""
        cols = [c.ddl for c in self.columns if c not in self.later_columns()]
        if self.key:
            cols.append(f"PRIMARY KEY ({', '.join(self.key)})")
        out = [f"CREATE TABLE IF NOT EXISTS {self.name} (\n    " + ",\n    ".join(cols) + "\n);"]
        out += [f"CREATE INDEX IF NOT EXISTS {self.name}_{'_'.join(i)} ON {self.name} ({', '.join(i)});"
                for i in self.indexes]
        return "\n".join(out) + "\n"

    def descriptions(self) -> dict[str, str]:
        """column -> what it means, for the columns that have a doc."""
        return {c.name: c.doc for c in self.columns if c.doc}

    def check(self, row: Mapping) -> Mapping:
        extra = [k for k in row if k not in self.names]
        if extra:
            raise DeclarationError(f"table {self.name}: no column {extra[0]!r} (its columns: {', '.join(self.names)})")
        return row

    def from_body(self, body: Mapping, **values) -> dict:
        """A row of every column: `values` where given, else the record body's
        key of that name (Column.field if set), else the column's default."""
        self.check(values)
        return {c.name: values[c.name] if c.name in values else body.get(c.field or c.name, c.default)
                for c in self.columns}

    def insert(self, con: sqlite3.Connection, rows: Mapping | Iterable[Mapping]) -> int:
        """analysis/rows.py's insert into this table, after checking that every
        key of every row is one of its columns."""
        rows = [rows] if isinstance(rows, Mapping) else list(rows)
        for r in rows:
            self.check(r)
        return rows_module.insert(con, self.name, rows)


@dataclass(frozen=True)
class View:
    """A view over an experiment's tables (and the core's)."""
    name: str
    doc: str
    sql: str   # its SELECT
    step: int = 1

    @property
    def ddl(self) -> str:
        return f"CREATE VIEW IF NOT EXISTS {self.name} AS\n    {self.sql.strip().rstrip(';')};\n"

    def descriptions(self) -> dict[str, str]:
        return {}


def schema(*declared: Table | View) -> list[str]:
    """The SCHEMA steps of these declarations: step n creates the tables and
    views of step n (in the order given) and adds the columns of step n to
    tables created before. Steps are versioned: declare a new table, view or
    column with the next step, never change an old one's."""
    last = max(max([d.step, *(c.step or 0 for c in getattr(d, "columns", ()))]) for d in declared)
    out = []
    for n in range(1, last + 1):
        parts = [d.ddl for d in declared if d.step == n]
        parts += [f"ALTER TABLE {d.name} ADD COLUMN {c.ddl};\n" for d in declared if isinstance(d, Table)
                  for c in d.later_columns() if c.step == n]
        if not parts:
            raise DeclarationError(f"schema step {n}: nothing declared for it (steps count from 1, one after another)")
        out.append("".join(parts))
    return out


# --- what the probes read back ---------------------------------------------------------------------
def bodies(con: sqlite3.Connection, run_id: int, type: str) -> list[dict]:
    """The run's records of one type, as their JSON bodies, in console order."""
    return [json.loads(r[0]) for r in con.execute(
        "SELECT body FROM records WHERE run_id = ? AND type = ? ORDER BY lineno", (run_id, type))]


def run_topology(con: sqlite3.Connection, run_id: int) -> topologies.Topology:
    """The topology the run ran on, parsed from its row (the file's text as
    it was, not today's file of that name)."""
    r = con.execute("SELECT topology, topology_toml FROM runs WHERE id = ?", (run_id,)).fetchone()
    if r is None:
        raise LookupError(f"no run {run_id}")
    return topologies.parse(r[1], Path(f"{r[0]}.toml"))


# --- a summary's table -----------------------------------------------------------------------------
def text_table(head: list[str], rows: list[list], left: Collection[int] = ()) -> list[str]:
    """Lines of a fixed-width table: the head, a rule, the rows; each column
    as wide as its widest cell, two spaces apart, right-aligned but the
    columns in `left`. A cell None shows as "-"."""
    cells = [["-" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(head)]
    fmt = lambda row: "  ".join(c.ljust(w) if i in left else c.rjust(w)
                                for i, (c, w) in enumerate(zip(row, widths))).rstrip()
    return [fmt(head), fmt(["-" * w for w in widths]), *map(fmt, cells)]
