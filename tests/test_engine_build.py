"""Our QEMU's recipe (engine/qemu_build.py): the series, the cache key, and
how a patch that does not apply is reported. The real build runs in the
end-to-end tests (every run uses it)."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine import qemu_build as qb
from tests.e2e import REPO


def test_shipped_series_lists_existing_patches_each_with_a_header():
    pl = qb.series()
    # applied in order, numbered without gaps, every file in the folder listed
    assert [p.name[:4] for p in pl] == [f"{i:04d}" for i in range(1, len(pl) + 1)] and len(pl) >= 6
    assert {p.name for p in pl} == {f.name for f in (REPO / "engine" / "qemu-patches").glob("*.patch")}
    for p in pl:
        text = p.read_text()
        head = text.split("diff --git", 1)[0]
        assert "Subject:" in head and len(head.splitlines()) >= 5, f"{p.name}: a header says what and why"


def test_new_qemu_files_are_files_of_ours_not_patch_hunks():
    """A file our series adds to QEMU whole is a real file under
    engine/qemu-files/ (at its path in the QEMU tree), not a patch hunk from
    /dev/null; what lists it for the build (Kconfig, meson.build) stays in
    the patches."""
    files = qb.qemu_files()
    assert "hw/misc/vmlab-ctl.c" in files and "include/qemu/vmlab-sched.h" in files
    assert "configs/devices/x86_64-softmmu/vmlab.mak" in files
    for p in qb.series():
        assert "--- /dev/null" not in p.read_text(), f"{p.name}: a new QEMU file belongs in {qb.FILES}"
    listed = "".join(p.read_text() for p in qb.series())
    assert "+system_ss.add(when: 'CONFIG_VMLAB_CTL', if_true: files('vmlab-ctl.c'))" in listed


def copy_series(tmp_path) -> Path:
    d = tmp_path / "patches"
    shutil.copytree(qb.PATCHES, d)
    return d


def copy_files(tmp_path) -> Path:
    d = tmp_path / "files"
    shutil.copytree(qb.FILES, d)
    return d


def test_key_follows_the_series_and_names_the_engine(tmp_path):
    d = copy_series(tmp_path)
    k0 = qb.key(d)
    assert qb.key(d) == k0 and qb.engine_dir(tmp_path, d).name.endswith(k0[:16])
    p = qb.series(d)[2]
    p.write_text(p.read_text() + "\n")
    assert qb.key(d) != k0
    assert qb.series_sha256(d)[:12] in qb.label(d)


def test_key_and_label_follow_our_qemu_files_too(tmp_path):
    d, f = copy_series(tmp_path), copy_files(tmp_path)
    k0, label0 = qb.key(d, f), qb.label(d, f)
    assert k0 == qb.key() and label0 == qb.label()   # the same bytes: the shipped engine
    h = f / "include" / "qemu" / "vmlab-sched.h"
    h.write_text(h.read_text() + "\n")
    assert qb.key(d, f) != k0 and qb.label(d, f) != label0
    assert qb.series_sha256(d, f)[:12] in qb.label(d, f)
    h.write_text(h.read_text()[:-1])
    assert qb.key(d, f) == k0
    (f / "include" / "qemu" / "vmlab-extra.h").write_text("/* one more */\n")
    assert qb.key(d, f) != k0 and qb.engine_dir(tmp_path, d, f) != qb.engine_dir(tmp_path, d)


def test_our_files_are_copied_into_the_tree_and_a_file_qemu_has_is_refused(tmp_path):
    tree, f = tmp_path / "src", tmp_path / "files"
    (tree / "include" / "qemu").mkdir(parents=True)
    (tree / "include" / "qemu" / "osdep.h").write_text("/* QEMU's */\n")
    (f / "include" / "qemu").mkdir(parents=True)
    (f / "include" / "qemu" / "ours.h").write_text("/* ours */\n")
    (f / "hw" / "misc").mkdir(parents=True)
    (f / "hw" / "misc" / "ours.c").write_text("int ours;\n")
    assert qb.add_files(tree, f) == ["hw/misc/ours.c", "include/qemu/ours.h"]
    assert (tree / "hw" / "misc" / "ours.c").read_text() == "int ours;\n"
    assert (tree / "include" / "qemu" / "osdep.h").read_text() == "/* QEMU's */\n"
    # a file QEMU has: refused, one line, before anything is copied
    tree2 = tmp_path / "src2"
    (tree2 / "include" / "qemu").mkdir(parents=True)
    (tree2 / "include" / "qemu" / "osdep.h").write_text("/* QEMU's */\n")
    (f / "include" / "qemu" / "osdep.h").write_text("/* a replacement */\n")
    with pytest.raises(qb.EngineBuildError, match=r"already has include/qemu/osdep.h") as e:
        qb.add_files(tree2, f)
    assert "\n" not in str(e.value) and e.value.status == 2
    assert (tree2 / "include" / "qemu" / "osdep.h").read_text() == "/* QEMU's */\n"
    assert not (tree2 / "hw").exists()


def test_series_naming_a_missing_patch_is_one_line(tmp_path):
    d = copy_series(tmp_path)
    (d / "series").write_text("0001-build-device-lists-no-edk2.patch\n# comment\nnope.patch\n")
    with pytest.raises(qb.EngineBuildError, match=r"series: line 3: .*'nope.patch'") as e:
        qb.series(d)
    assert "\n" not in str(e.value) and e.value.status == 2


def test_a_patch_that_does_not_apply_is_named_with_its_hunk(tmp_path):
    tree = tmp_path / "src"
    (tree / "accel").mkdir(parents=True)
    (tree / "accel" / "x.c").write_text("int a;\nint b;\nint c;\n")
    good = tmp_path / "0001-good.patch"
    good.write_text("Subject: ok\n\n--- a/accel/x.c\n+++ b/accel/x.c\n"
                    "@@ -1,3 +1,3 @@\n int a;\n-int b;\n+int bb;\n int c;\n")
    bad = tmp_path / "0002-bad.patch"
    bad.write_text("Subject: stale\n\n--- a/accel/x.c\n+++ b/accel/x.c\n"
                   "@@ -1,3 +1,3 @@\n int a;\n-int zz;\n+int q;\n int c;\n")
    with pytest.raises(qb.EngineBuildError) as e:
        qb.apply_series(tree, [good, bad])
    msg = str(e.value)
    assert msg.startswith(str(bad)) and "accel/x.c" in msg and "Hunk #1 FAILED" in msg and "\n" not in msg
    assert e.value.status == 2
    assert (tree / "accel" / "x.c").read_text() == "int a;\nint bb;\nint c;\n"  # the good one applied
    assert not list(tree.rglob("*.rej")) and not list(tree.rglob("*.orig"))


def test_bad_series_stops_a_run_before_the_database(tmp_path):
    """A series that does not apply fails the build with one line and status 2;
    the run never reaches the database."""
    repo = tmp_path / "repo"
    shutil.copytree(REPO, repo, ignore=shutil.ignore_patterns("results.db*", "runs", ".git", "__pycache__"))
    (repo / "engine" / "qemu-patches" / "series").write_text("0001-build-device-lists-no-edk2.patch\nzz.patch\n")
    r = subprocess.run([sys.executable, str(repo / "run.py"), "-t", "x86-2s", "-e", "memeater", "--db",
                        str(tmp_path / "r.db")], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "zz.patch" in r.stdout + r.stderr
    assert not (tmp_path / "r.db").exists()
