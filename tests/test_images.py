import re
import stat

import pytest

from images import initramfs, kernel, variants
from tests import bootstrapped


def read_cpio(blob: bytes):
    """Minimal newc reader: name -> (mode, rdevmajor, rdevminor, data)."""
    out, off = {}, 0
    while True:
        assert blob[off:off + 6] == b"070701", f"bad magic at {off}"
        f = [int(blob[off + 6 + 8 * i: off + 14 + 8 * i], 16) for i in range(13)]
        namesize, filesize = f[11], f[6]
        name = blob[off + 110: off + 110 + namesize - 1].decode()
        off = (off + 110 + namesize + 3) & ~3
        data = blob[off: off + filesize]
        off = (off + filesize + 3) & ~3
        if name == "TRAILER!!!":
            return out, off
        out[name] = (f[1], f[9], f[10], data)


def test_cpio_has_console_node_and_is_reproducible(tmp_path):
    prog = tmp_path / "memeater"
    prog.write_bytes(b"\x7fELF fake")
    a = initramfs.base_archive({"memeater": prog})
    b = initramfs.base_archive({"memeater": prog})
    assert a == b and len(a) % 512 == 0
    entries, _ = read_cpio(a)
    mode, maj, mnr, _ = entries["dev/console"]
    assert stat.S_ISCHR(mode) and (maj, mnr) == (5, 1)
    assert entries["init"][3].startswith(b"#!/bin/busybox sh")
    assert entries["init"][0] & 0o111
    assert entries["bin/memeater"][3] == b"\x7fELF fake"
    assert stat.S_ISDIR(entries["proc"][0])


def test_run_archive_appends_a_second_archive():
    blob = initramfs.run_archive({"run.conf": "VMLAB_EXP=memeater\n", "knobs": "thp /sys/x never\n"})
    entries, end = read_cpio(blob)
    assert entries["vmlab/run.conf"][3] == b"VMLAB_EXP=memeater\n"
    assert entries["vmlab/knobs"][3] == b"thp /sys/x never\n"


def test_kernel_key_depends_on_patchset_and_flavor():
    bootstrapped.apt(variants.SOURCE_PACKAGE)
    k1 = variants.key(variants.Variant())
    k2 = variants.key(variants.Variant(flavor="lockstat"))
    assert k1 != k2 and k1 == variants.key(variants.Variant())


def test_unknown_patchset_and_flavor_rejected():
    with pytest.raises(variants.BuildError, match="patch set"):
        variants.check_variant(variants.Variant(patchset="nosuch"))
    with pytest.raises(variants.BuildError, match="flavor"):
        variants.check_variant(variants.Variant(flavor="debug"))


def test_config_check_catches_dropped_symbol(tmp_path):
    frag = tmp_path / "f.config"
    frag.write_text("CONFIG_NUMA=y\nCONFIG_NR_CPUS=64\n# comment\n")
    cfg = tmp_path / ".config"
    cfg.write_text("CONFIG_NUMA=y\nCONFIG_NR_CPUS=64\n")
    kernel.check_config(cfg, [frag])
    cfg.write_text("# CONFIG_NUMA is not set\nCONFIG_NR_CPUS=64\n")
    with pytest.raises(variants.BuildError, match="line 1: CONFIG_NUMA=y was not taken"):
        kernel.check_config(cfg, [frag])


def fake_source(tmp_path, monkeypatch, sets: dict):
    """A pristine 'kernel source' of two files and patch sets against it."""
    cache = tmp_path / "cache"
    ver = "0-test"
    src = cache / "src" / f"{variants.SOURCE_PACKAGE}_{ver}"
    (src / "mm").mkdir(parents=True)
    (src / "Makefile").write_text("all:\n")
    (src / "mm" / "a.c").write_text("int a = 1;\nint b = 2;\n")
    (src / "mm" / "c.c").write_text("int c = 3;\n")
    for name, patches in sets.items():
        d = tmp_path / "patches" / name
        d.mkdir(parents=True)
        (d / "series").write_text("".join(f"{n}\n" for n in patches))
        for n, text in patches.items():
            (d / n).write_text(text)
    monkeypatch.setattr(variants, "PATCHES", tmp_path / "patches")
    monkeypatch.setattr(variants, "source_version", lambda: ver)
    return cache, src


def test_failing_patch_names_patch_and_hunk(tmp_path, monkeypatch):
    """A patch that does not apply stops the build with its name and hunk."""
    cache, _ = fake_source(tmp_path, monkeypatch, {"broken": {"0001-change-mm.patch":
        "--- a/mm/a.c\n+++ b/mm/a.c\n@@ -1,2 +1,2 @@\n-int a = 5;\n+int a = 6;\n int b = 2;\n"}})
    with pytest.raises(variants.BuildError) as e:
        kernel.work_source(cache, variants.Variant(patchset="broken"))
    assert "0001-change-mm.patch does not apply" in str(e.value) and "Hunk #1 FAILED" in str(e.value)


def test_a_tree_of_another_source_version_starts_over_with_its_build_directory(tmp_path, monkeypatch):
    """A host whose kernel source moved (a pin changed, or another version
    was installed) rebuilds from the new source: the old tree and its
    objects go, not kept to look newer than the new source's files."""
    cache, src = fake_source(tmp_path, monkeypatch, {})
    v = variants.Variant(patchset="vanilla")
    work = cache / "work" / v.tree
    (work / "mm").mkdir(parents=True)
    (work / "mm" / "a.c").write_text("int a = 99;\n")  # the other version's file
    (work / ".vmlab-applied").write_text('{"patchset": "vanilla", "files": [], "source": "other_1-3"}')
    (cache / "build" / v.tree).mkdir(parents=True)
    (cache / "build" / v.tree / "a.o").write_text("old object")
    out = kernel.work_source(cache, v)
    assert (out / "mm" / "a.c").read_text() == "int a = 1;\nint b = 2;\n"
    assert not (cache / "build" / v.tree / "a.o").exists()
    assert src.name in (out / ".vmlab-applied").read_text()


def test_switching_patch_sets_in_the_shared_tree(tmp_path, monkeypatch):
    """All sets of an arch x flavor share one tree: a switch reverts what the
    last set changed (with a new mtime, so make rebuilds it), applies the
    next, and never touches the pristine source."""
    import os
    a = "--- a/mm/a.c\n+++ b/mm/a.c\n@@ -1,2 +1,2 @@\n-int a = 1;\n+int a = 10;\n int b = 2;\n"
    c = "--- a/mm/c.c\n+++ b/mm/c.c\n@@ -1 +1 @@\n-int c = 3;\n+int c = 30;\n"
    cache, src = fake_source(tmp_path, monkeypatch, {"set-a": {"0001-a.patch": a}, "set-c": {"0001-c.patch": c}})
    wa = kernel.work_source(cache, variants.Variant(patchset="set-a"))
    assert (wa / "mm" / "a.c").read_text().startswith("int a = 10;")
    assert (wa / "mm" / "c.c").read_text() == "int c = 3;\n"
    old = (wa / "mm" / "a.c").stat().st_mtime_ns
    os.utime(src / "mm" / "a.c", ns=(1, 1))  # pristine files are old; a reverted copy must not be
    wc = kernel.work_source(cache, variants.Variant(patchset="set-c"))
    assert wc == wa
    assert (wc / "mm" / "a.c").read_text() == "int a = 1;\nint b = 2;\n"
    assert (wc / "mm" / "a.c").stat().st_mtime_ns >= old
    assert (wc / "mm" / "c.c").read_text() == "int c = 30;\n"
    assert kernel.work_source(cache, variants.Variant(patchset="vanilla")) == wa
    assert (wa / "mm" / "c.c").read_text() == "int c = 3;\n"
    assert (wa / "mm" / "a.c").read_text().startswith("int a = 1;")
    # the pristine tree never changed
    assert (src / "mm" / "a.c").read_text() == "int a = 1;\nint b = 2;\n"
    assert (src / "mm" / "c.c").read_text() == "int c = 3;\n"


SHIPPED = ["zone-reclaim-auto", "rmap-lock-blocking", "kswapd-no-backoff", "mlocked-on-lru",
           "mlocked-on-lru-kswapd-sleeps", "scan-balance-3.9", "rmap-lock-blocking-ptl-trylock",
           "allocators-reclaim", "rmap-lock-spinning", "kswapd-series-flatten", "kswapd-series-limitprio",
           "kswapd-series-block"]


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_patch_sets_are_complete(name):
    """Each set: a series of patches against mm/ (and rmap.h), a README naming
    its seed, and a boot-time announcement per layer that the guest reports
    (its liveness proof); the set's own patch announces last."""
    assert name in variants.patchsets()
    d = variants.PATCHES / name
    readme = (d / "README.md").read_text()
    assert "seed" in readme.lower() and "## What it changes" in readme
    patches = variants.series(name)
    assert patches and all(f.startswith(("mm/", "include/linux/rmap.h")) for f in kernel.patched_files(patches))
    own = patches[-1].read_text()  # the set's own layer is last in its series ...
    # ... unless the set is other sets' layers only (seed 001's intermediate kernels)
    assert patches[-1].parent == d or all(p.parent != d for p in patches)
    names = variants.components(name)
    assert names and f'"vmlab-patch: {names[-1]}' in own
    assert f"vmlab_patch_{re.sub(r'[^0-9a-z]', '_', names[-1])}(void)" in own
    # each announced name is one layer: a stacked set names its base's layers first
    assert len(names) == len({p.name for p in patches} - {"series"})


def test_seed_001s_intermediate_kernels_take_out_the_series_descendants_in_turn():
    """3.9-rc2 (scan-balance-3.9) and the seed's steps: flatten keeps 6.1's
    bound (patches 1-4), limitprio also its priority floor (5), block also
    its writeback rule and stall (6, 7); none has 4.12's hopeless-node exit."""
    c = {s: variants.components(s) for s in ("scan-balance-3.9", "kswapd-series-flatten", "kswapd-series-limitprio",
                                         "kswapd-series-block")}
    later = ["kswapd-priority-zero", "kswapd-writes-by-priority", "kswapd-no-writeback-stall"]
    assert c["scan-balance-3.9"] == ["kswapd-no-hopeless-node", "kswapd-no-backoff", "scan-balance-3.9", *later]
    assert c["kswapd-series-flatten"] == ["kswapd-no-hopeless-node", "scan-balance-3.9", *later]
    assert c["kswapd-series-limitprio"] == ["kswapd-no-hopeless-node", "scan-balance-3.9", *later[1:]]
    assert c["kswapd-series-block"] == ["kswapd-no-hopeless-node", "scan-balance-3.9"]


def test_stacked_set_names_every_layer_of_its_base():
    assert variants.components("mlocked-on-lru-kswapd-sleeps") == [
        *variants.components("mlocked-on-lru"), "kswapd-sleeps"]
    assert variants.components("rmap-lock-blocking-ptl-trylock") == ["rmap-lock-blocking", "ptl-trylock"]
    assert variants.components("rmap-lock-spinning") == ["rmap-lock-blocking", "rmap-lock-spinning"]
    assert variants.components("vanilla") == []


def test_alpha_archive_has_compiled_init_and_no_busybox(tmp_path):
    init, probe = tmp_path / "init", tmp_path / "probe"
    init.write_bytes(b"\x7fELF init")
    probe.write_bytes(b"\x7fELF probe")
    entries, _ = read_cpio(initramfs.base_archive({"init": init, "vmlab-probe": probe}, "alpha"))
    assert entries["init"][3] == b"\x7fELF init" and entries["init"][0] & 0o111
    assert entries["bin/vmlab-probe"][3] == b"\x7fELF probe"
    assert "bin/busybox" not in entries and "bin/init" not in entries
    assert stat.S_ISCHR(entries["dev/console"][0])


def test_alpha_kernel_key_includes_arch_fixes(tmp_path, monkeypatch):
    bootstrapped.apt(variants.SOURCE_PACKAGE)
    alpha = variants.Variant(arch="alpha")
    assert [p.name for p in variants.all_patches(alpha)] == [p.name for p in variants.arch_fixes("alpha")]
    assert variants.arch_fixes("alpha") and not variants.arch_fixes("x86_64")
    k = variants.key(alpha)
    fixes = tmp_path / "alpha"
    fixes.mkdir()
    (fixes / "series").write_text("0001-x.patch\n")
    (fixes / "0001-x.patch").write_text(variants.arch_fixes("alpha")[0].read_text() + "\n")
    monkeypatch.setattr(variants, "ARCH_FIXES", tmp_path)
    assert variants.key(alpha) != k
    assert variants.key(variants.Variant()) == variants.key(variants.Variant())  # x86_64 has none


def test_arch_fixes_apply_after_the_patch_set(tmp_path, monkeypatch):
    """An Alpha build of a patch set gets the set's series, then the arch fixes."""
    cache = tmp_path / "cache"
    ver = "0-test"
    src = cache / "src" / f"{variants.SOURCE_PACKAGE}_{ver}"
    src.mkdir(parents=True)
    (src / "Makefile").write_text("all:\n")
    (src / "mm.c").write_text("int a = 1;\n")
    (src / "arch.c").write_text("int b = 1;\n")
    for d, f, name in ((tmp_path / "patches" / "set", "mm.c", "a"), (tmp_path / "fixes" / "alpha", "arch.c", "b")):
        d.mkdir(parents=True)
        (d / "series").write_text("0001.patch\n")
        (d / "0001.patch").write_text(f"--- a/{f}\n+++ b/{f}\n@@ -1 +1 @@\n-int {name} = 1;\n+int {name} = 2;\n")
    monkeypatch.setattr(variants, "PATCHES", tmp_path / "patches")
    monkeypatch.setattr(variants, "ARCH_FIXES", tmp_path / "fixes")
    monkeypatch.setattr(variants, "source_version", lambda: ver)
    out = kernel.work_source(cache, variants.Variant(arch="alpha", patchset="set"))
    assert (out / "mm.c").read_text() == "int a = 2;\n" and (out / "arch.c").read_text() == "int b = 2;\n"
    assert (src / "arch.c").read_text() == "int b = 1;\n"  # the pristine tree is untouched
    x86 = kernel.work_source(cache, variants.Variant(patchset="set"))
    assert (x86 / "arch.c").read_text() == "int b = 1;\n" and x86 != out


def test_guest_init_reports_every_layer_name_whole():
    """/init turns each `vmlab-patch: NAME` boot line into a patch record;
    its pattern must keep every name whole (scan-balance-3.9 has a dot)."""
    import subprocess
    init = (variants.HERE / "initramfs" / "init").read_text()
    expr = re.search(r"sed -n '([^']*vmlab-patch[^']*)'", init).group(1)
    names = [c for s in variants.patchsets() for c in variants.components(s)]
    dmesg = "".join(f"[    1.{i:06d}] vmlab-patch: {n}{' (zone_reclaim_mode=1 at boot)' if i % 2 else ''}\n"
                    for i, n in enumerate(names))
    out = subprocess.run(["sed", "-n", expr], input=dmesg, capture_output=True, text=True, check=True).stdout
    assert out.split() == names and "scan-balance-3.9" in names
