"""A run's key covers what produces its figures (pipeline/buildkeys.py): the
engine's series, the timing model, the kernel build and the guest programs.
Changing any of them makes a new key, so a study or `./run.py seeds` into a
database of older builds runs again instead of reusing their figures; an
`off` run does not load the model, so the model is not in its key."""
import pytest

import timing
from analysis import db
from engine import qemu_build
from images import variants
from pipeline import buildkeys, execute, study, studycli
from pipeline.spec import RunSpec
from protocol import records
from tests.runrows import run_end, run_start

SPEC = RunSpec(topology="x86-2s", experiment="latprobe", timing="detailed")


def key(spec=SPEC) -> str:
    return execute.prepare(spec).key


def test_the_series_the_model_a_kernel_patch_and_a_guest_program_each_make_a_new_key(monkeypatch, tmp_path):
    k0 = key()
    assert key() == k0  # nothing changed: the same key
    with monkeypatch.context() as m:
        m.setattr(qemu_build, "key", lambda *a, **k: "another series")
        assert key() != k0
    with monkeypatch.context() as m:
        m.setattr(timing, "MODEL_VERSION", timing.MODEL_VERSION + 1)
        assert key() != k0
    extra = tmp_path / "9999-a-patch.patch"
    extra.write_text("--- a/x\n+++ b/x\n")
    with monkeypatch.context() as m:
        real = variants.all_patches
        m.setattr(variants, "all_patches", lambda v: [*real(v), extra])
        assert key() != k0
    src = tmp_path / "lib-change.c"
    src.write_text("int x;\n")
    with monkeypatch.context() as m:
        m.setattr(buildkeys, "GUEST_SIDE", [*buildkeys.GUEST_SIDE, src])
        assert key() != k0


def test_a_run_without_the_plugin_does_not_key_on_the_model(monkeypatch):
    off = RunSpec(topology="x86-2s", experiment="latprobe", timing="off")
    k0 = key(off)
    monkeypatch.setattr(timing, "MODEL_VERSION", timing.MODEL_VERSION + 1)
    assert key(off) == k0
    prep = execute.prepare(off)
    assert "model" not in buildkeys.build_keys(prep.engine, prep.mode, prep.exp, prep.variant)


STUDY = """
name = "k"
[axes]
topology = ["x86-2s"]
experiment = ["latprobe"]
kernel = ["vanilla"]
[run]
timing = "detailed"
"""


@pytest.mark.parametrize("changed", [False, True])
def test_a_study_into_a_database_of_older_builds_runs_again(monkeypatch, tmp_path, capsys, changed):
    path = tmp_path / "s.toml"
    path.write_text(STUDY)
    old = study.load(path)
    con = db.connect(tmp_path / "study.db")
    topo = old.runs[0].prep.topo
    rid = db.start_run(con, run_start(topo, run_key=old.runs[0].key))
    db.finish_run(con, rid, run_end(), records.parse_bytes(b""), topo)
    if changed:  # the engine's series moved on since that run
        monkeypatch.setattr(qemu_build, "key", lambda *a, **k: "another series")
    con.close()
    capsys.readouterr()
    assert studycli.main([str(path), "--db", str(tmp_path / "study.db"), "--dry-run"]) == 0
    line = capsys.readouterr().out.splitlines()[0]
    assert (" todo " in line) == changed and (" ok " in line) != changed, line
