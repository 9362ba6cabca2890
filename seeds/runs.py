"""Which of our runs a seed's table shows: the runs of the seed's experiment
on the machines and with the parameters of the seed's [[matrix]] blocks
(studies/seeds.toml, or the study a database keeps), the latest ok per
column, or exactly a study's; and the failed ones a column is missing.
seeds/report.py prints the tables over them."""
from __future__ import annotations

import json
import tomllib
from pathlib import Path

from analysis import studyfile
from seeds.kit import column, run_of
from seeds.tables import SEEDS

REPO = Path(__file__).resolve().parent.parent
SEEDS_STUDY = REPO / "studies" / "seeds.toml"


class SeedError(ValueError):
    """Bad input: one line."""


def seed_of(seed: str):
    if seed not in SEEDS:
        raise SeedError(f"unknown seed {seed!r} (the seeds: {' '.join(SEEDS)})")
    return SEEDS[seed]


def blocks(toml_text: str, seed: str) -> list[dict]:
    """The seed's [[matrix]] blocks of a study file: the one named after it and
    any named "<seed>-..." (004's zone_reclaim_mode=5 runs on vanilla only),
    read as the study runner reads them (analysis/studyfile.py: the top
    level's axes, params and repeats under each block's own); [] if none, or
    if the text is no study file the runner would take."""
    try:
        gs = studyfile.groups("study file", tomllib.loads(toml_text))
    except (tomllib.TOMLDecodeError, ValueError):
        return []
    return [g for g in gs if g["name"] is not None
            and (str(g["name"]) == seed or str(g["name"]).startswith(seed + "-"))]


def block_names(toml_text: str, seed: str) -> list[str]:
    return [str(g["name"]) for g in blocks(toml_text, seed)]


def _axis(block: dict, name: str) -> list:
    v = block.get("axes", {}).get(name)
    return [] if v is None else [Path(str(x)).stem if str(x).endswith(".toml") else str(x)
                                 for x in (v if isinstance(v, list) else [v])]


def _params_match(block: dict, r) -> bool:
    """The run has the parameters the seed's block sets (a list there: one of them)."""
    have = json.loads(r["params_json"])
    same = lambda a, b: a == b or (isinstance(a, (int, float)) and isinstance(b, (int, float)) and
                                   float(a) == float(b))
    return all(any(same(have.get(k), x) for x in (v if isinstance(v, list) else [v]))
               for k, v in block.get("params", {}).items())


def _matching(con, seed: str, study_id: int | None, status: str, keys: set | None = None) -> list:
    """Runs of the seed's experiment with this status, on the machines and
    parameters of the seed's blocks: in a study, those its seed blocks asked
    for; else, per run key, the newest (a repeat has its own key). keys: the
    run keys this checkout plans; a run under another key (another kernel
    build, engine series, model or guest program) is left out."""
    rows = _matching_any_key(con, seed, study_id, status)
    return rows if keys is None else [r for r in rows if r["run_key"] in keys]


def stale(con, seed: str, study_id: int | None, keys: set) -> int:
    """How many ok runs of the seed's blocks have a key this checkout does not plan."""
    return sum(1 for r in _matching_any_key(con, seed, study_id, "ok") if r["run_key"] not in keys)


def _matching_any_key(con, seed: str, study_id: int | None, status: str) -> list:
    s = seed_of(seed)
    ours = blocks(SEEDS_STUDY.read_text(), seed) if SEEDS_STUDY.exists() else []
    if study_id is None:
        bs = ours or [{}]
        latest: dict = {}
        for r in con.execute("SELECT * FROM runs WHERE experiment = ? AND status = ? ORDER BY id DESC",
                             (s.experiment, status)):
            if (r["run_key"] or r["id"]) not in latest and any(
                    (not _axis(b, "topology") or r["topology"] in _axis(b, "topology")) and _params_match(b, r)
                    for b in bs):
                latest[r["run_key"] or r["id"]] = r
        return list(latest.values())
    st = con.execute("SELECT toml FROM studies WHERE id = ?", (study_id,)).fetchone()
    if st is None:
        raise SeedError(f"no study {study_id} in the database")
    theirs = blocks(st["toml"], seed)
    by_name = {str(b["name"]): b for b in theirs or ours}  # a study without the seed's blocks: ours
    bs = theirs or ours or [{}]
    out = []
    for r in con.execute("SELECT r.*, s.axes_json FROM study_runs s JOIN runs r ON r.id = s.run_id "
                         "WHERE s.study_id = ? AND r.status = ? AND r.experiment = ? ORDER BY r.id",
                         (study_id, status, s.experiment)):
        axes = json.loads(r["axes_json"])
        if theirs and "block" in axes:  # the block that asked for the run, if it is one of the seed's
            if axes["block"] not in by_name:
                continue
            mine = [by_name[axes["block"]]]
        else:
            mine = bs
        if any(all(not _axis(b, k) or str(axes.get(k, r[col])) in _axis(b, k)
                   for k, col in (("topology", "topology"), ("kernel", "patch_set"))) for b in mine):
            out.append(r)
    return out


def select_runs(con, seed: str, study_id: int | None = None, keys: set | None = None) -> list[int]:
    """The latest ok runs per column among runs of the seed's experiment and
    machines (as many per column as its block repeats), or exactly the ok
    runs of the seed's blocks in a study; of `keys` only, if given."""
    s = seed_of(seed)
    ours = blocks(SEEDS_STUDY.read_text(), seed) if SEEDS_STUDY.exists() else []
    picked = _matching(con, seed, study_id, "ok", keys)
    if study_id is None:
        cols: dict = {}
        for r in picked:
            cols.setdefault(column(s, r), []).append(r)
        reps = max(int(b.get("repeats", 1)) for b in ours or [{}])
        # one start per column, its newest run's: booted and restored runs of the same inputs are
        # other runs of the machine (docs/snapshots.md), not repeats of each other
        picked = [r for c in cols.values() for r in [x for x in c if x["start"] == c[0]["start"]][:reps]]
    if not picked:
        where = f"study {study_id}" if study_id is not None else "the database"
        topos = "/".join(dict.fromkeys(t for b in (ours or [{}]) for t in _axis(b, "topology"))) or "any machine"
        raise SeedError(f"seed {seed}: no ok {s.experiment} runs on {topos} in {where} (run ./run.py seeds {seed})")
    return [r["id"] for r in sorted(picked, key=lambda r: (column(s, r), r["id"]))]


def failed_runs(con, seed: str, study_id: int | None = None, ok_ids: list[int] | None = None,
                keys: set | None = None) -> list:
    """The seed's runs that failed (a guest that panicked, hung, or whose
    reproducer died: e.g. OOM-killed) and have no ok run of the same key:
    a kernel missing from a column is said, with the reason, not hidden.
    ok_ids: the ok runs already selected (select_runs), so they are not looked up again."""
    ok_rows = ([run_of(con, i) for i in ok_ids] if ok_ids is not None else _matching(con, seed, study_id, "ok", keys))
    ok = {r["run_key"] for r in ok_rows if r["run_key"]}
    return [r for r in _matching(con, seed, study_id, "failed", keys) if not r["run_key"] or r["run_key"] not in ok]
