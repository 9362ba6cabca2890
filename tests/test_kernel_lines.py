"""Kernel lines (images/variants.py LINES): a kernel is a patch set, optionally
`@line` (vanilla@6.12). The default line's kernels keep their keys and
artifacts (`set@6.1` is `set`); another line has its own source package,
fragment, tree and key; a patch set says which lines it applies to; bad
input is one line naming the option or the file and field, exit 2."""
import pytest

from images import kernel, variants
from tests import bootstrapped
from tests.e2e import ENV, REPO, vmlab


def test_names_split_into_set_and_line():
    assert variants.split_kernel("vanilla") == ("vanilla", "6.1")
    assert variants.split_kernel("zone-reclaim-auto@6.1") == ("zone-reclaim-auto", "6.1")
    v = variants.Variant(patchset="vanilla@6.12")
    assert (v.set, v.line, v.tree) == ("vanilla", "6.12", "x86_64-default@6.12")
    assert variants.Variant().tree == "x86_64-default" and variants.Variant(flavor="lockstat").tree == "x86_64-lockstat"


def test_the_default_line_keeps_its_keys_and_artifacts():
    bootstrapped.apt(variants.SOURCE_PACKAGE)
    for name in variants.patchsets():
        a, b = variants.Variant(patchset=name), variants.Variant(patchset=f"{name}@6.1")
        assert variants.key(a) == variants.key(b)
        assert variants.artifact_dir(REPO, a) == variants.artifact_dir(REPO, b)
        assert "@" not in variants.artifact_dir(REPO, a).name
        assert variants.fragments(a) == [variants.KDIR / "x86_64.config"]


def test_line_6_12_has_its_source_fragment_and_key():
    bootstrapped.apt("linux-source-6.12")
    v = variants.Variant(patchset="vanilla@6.12")
    variants.check_variant(v)
    assert variants.fragments(v) == [variants.KDIR / "x86_64.config", variants.KDIR / "x86_64-6.12.config"]
    assert variants.key(v) != variants.key(variants.Variant())
    assert variants.artifact_dir(REPO, v).name.startswith("x86_64-default-vanilla@6.12-")
    assert variants.source_version("6.12").startswith("6.12.")
    own = (variants.KDIR / "x86_64-6.12.config").read_text()
    for sym in ("CONFIG_NUMA=y", "CONFIG_ACPI_HMAT=y", "CONFIG_NUMA_BALANCING=y", "CONFIG_MIGRATION=y"):
        assert sym in own.splitlines()


def test_patch_sets_say_which_lines_they_apply_to():
    assert variants.set_lines("vanilla") == list(variants.LINES)
    for name in variants.patchsets():
        if name != "vanilla":
            assert variants.set_lines(name) == ["6.1"], name
            assert all(p.suffix == ".patch" for p in variants.series(name))  # the lines: entry is no patch


@pytest.mark.parametrize("variant,expect", [
    (variants.Variant(patchset="vanilla@6.5"), "--kernel: expected a kernel line after '@' in 'vanilla@6.5'"),
    (variants.Variant(patchset="zone-reclaim-auto@6.12"), "zone-reclaim-auto/series: field 'lines': patch set "
                                                        "zone-reclaim-auto applies to kernel line(s) 6.1, not 6.12"),
    (variants.Variant(arch="alpha", patchset="vanilla@6.12"), "--kernel: kernel line 6.12 builds x86_64 guests"),
    (variants.Variant(patchset="nosuch@6.12"), "--kernel: expected a patch set under images/patches/"),
])
def test_bad_kernel_names(variant, expect):
    with pytest.raises(variants.BuildError) as e:
        variants.check_variant(variant)
    assert expect in str(e.value) and "\n" not in str(e.value)


def test_a_later_fragment_s_value_is_the_one_checked(tmp_path):
    base, own = tmp_path / "a.config", tmp_path / "b.config"
    base.write_text("CONFIG_NUMA=y\nCONFIG_NR_CPUS=64\n")
    own.write_text("CONFIG_NR_CPUS=128\n")
    cfg = tmp_path / ".config"
    cfg.write_text("CONFIG_NUMA=y\nCONFIG_NR_CPUS=128\n")
    kernel.check_config(cfg, [base, own])
    cfg.write_text("CONFIG_NUMA=y\nCONFIG_NR_CPUS=64\n")
    with pytest.raises(variants.BuildError, match="b.config: line 1: CONFIG_NR_CPUS=128 was not taken"):
        kernel.check_config(cfg, [base, own])


@pytest.mark.parametrize("args,expect", [
    (["--kernel", "vanilla@6.5"], "--kernel: expected a kernel line after '@'"),
    (["--kernel", "zone-reclaim-auto@6.12"], "field 'lines'"),
    (["--topology", "es-clipper-4", "--kernel", "vanilla@6.12"], "kernel line 6.12 builds x86_64 guests"),
])
def test_bad_kernel_lines_on_the_command_line(tmp_path, args, expect):
    r = vmlab(ENV, tmp_path, *args, runs_dir=False, cwd=tmp_path)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and expect in lines[0], r.stderr
    assert not (tmp_path / "r.db").exists()


@pytest.mark.parametrize("old,new,field", [
    ("[[memory_nodes]]\nattach = 0\n", "[[memory_nodes]]\n", "memory_nodes[0].attach"),
    ("attach = 1\n", "attach = 3\n", "memory_nodes[1].attach"),
    ("link_latency_ns = 157.0", "link_latency_ns = 0.0", "memory_nodes[0].link_latency_ns"),
    ("link_bandwidth_gbps = 29.6", "link_bandwidth_gbps = 9999.0", "memory_nodes[0].link_bandwidth_gbps"),
])
def test_a_bad_cxl_topology_on_the_command_line(tmp_path, old, new, field):
    src = (REPO / "topologies" / "spr-2s-cxl.toml").read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(src.replace(old, new, 1))
    r = vmlab(ENV, tmp_path, "--topology", str(bad), runs_dir=False, cwd=tmp_path)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {bad}: field '{field}'"), r.stderr
    assert not (tmp_path / "r.db").exists()


def test_a_bad_flavor_from_a_spec_is_one_input_error():
    """A study's or a worker's spec skips argparse's choices: prepare's one
    check (check_variant) still names the field and what was expected."""
    from pipeline import execute
    from pipeline.spec import InputError, RunSpec
    with pytest.raises(InputError, match=r"^--flavor: expected one of default, lockstat, mglru, got 'debug'$"):
        execute.prepare(RunSpec(topology="gs1280-8", flavor="debug"))
