"""A study file's blocks (studies/*.toml; the format: pipeline/study.py): the
one reader of its structure, so the stage that runs a study and the one that
reads its runs back see the same blocks.

Each [[matrix]] block comes back with the top level's axes, run, params and
experiment tables under its own, and the top level's repeats where it has
none (a file without [[matrix]] is one block). pipeline/study.py expands the
blocks into runs; seeds/runs.py reads which blocks asked for a seed's
runs, from studies/seeds.toml and from the study text a database keeps. It
lives here, below both: analysis must not import pipeline.

`error` is the exception class bad structure raises (pipeline: its
InputError); every message is one line naming the file and the field.
"""
from __future__ import annotations

TOP_KEYS = {"name", "description", "repeats", "axes", "run", "params", "experiment", "matrix"}
GROUP_KEYS = {"name", "axes", "run", "params", "experiment", "repeats"}


def err(path, field, expected, got=None, error=ValueError) -> Exception:
    tail = "" if got is None else f", got {got!r}"
    return error(f"{path}: field '{field}': expected {expected}{tail}")


def table(path, data, field, allowed=None, error=ValueError) -> dict:
    v = data.get(field, {})
    if not isinstance(v, dict):
        raise err(path, field, "a table", v, error)
    if allowed is not None:
        for k in v:
            if k not in allowed:
                raise err(path, f"{field}.{k}", f"one of {', '.join(sorted(allowed))}", error=error)
    return v


def groups(path, data: dict, error=ValueError) -> list[dict]:
    """The blocks of a parsed study file, each a dict of axes, run, params,
    experiment (tables), repeats, name (None if unnamed) and where (the
    block's prefix in messages: "matrix[i]." or "")."""
    for k in data:
        if k not in TOP_KEYS:
            raise err(path, k, f"one of {', '.join(sorted(TOP_KEYS))}", error=error)
    top = {k: data[k] for k in GROUP_KEYS & data.keys()}
    matrix = data.get("matrix", [{}])
    if not isinstance(matrix, list) or not matrix or not all(isinstance(g, dict) for g in matrix):
        raise err(path, "matrix", "an array of tables ([[matrix]])", matrix, error)
    out = []
    for i, g in enumerate(matrix):
        for k in g:
            if k not in GROUP_KEYS:
                raise err(path, f"matrix[{i}].{k}", f"one of {', '.join(sorted(GROUP_KEYS))}", error=error)
        merged = {}
        for part in ("axes", "run", "params"):
            merged[part] = {**table(path, top, part, error=error), **table(path, g, part, error=error)}
        merged["experiment"] = {**table(path, top, "experiment", error=error),
                                **table(path, g, "experiment", error=error)}
        merged["repeats"] = g.get("repeats", top.get("repeats", 1))
        merged["where"] = f"matrix[{i}]." if "matrix" in data else ""
        merged["name"] = g.get("name")
        out.append(merged)
    return out
