import pytest

import experiments as E
import topologies as T


def test_memeater_defaults_scale_with_the_topology():
    e = E.load("memeater")
    p32 = e.resolve(T.load("gs1280-32"), {})
    # a quarter of a 64 MiB node per chunk; half of 2 GiB in all
    assert p32.derived["chunk_mib"] == 16 and p32.derived["chunks"] == 64
    assert p32.derived["fill_mib"] == 1024 > 4 * 64   # well past four nodes' worth
    assert "--chunks 64" in p32.command and "--cpu 0" in p32.command
    p8 = e.resolve(T.load("gs1280-8"), {})
    assert p8.derived["chunks"] == 16


def test_overrides_and_their_errors():
    e = E.load("memeater")
    t = T.load("gs1280-8")
    p = e.resolve(t, E.parse_overrides(["chunks=5,cycles=2", "zone_reclaim_mode=5"]))
    assert p.derived["chunks"] == 5 and p.params["cycles"] == 2 and p.params["zone_reclaim_mode"] == 5
    knobs = {name: (path, value) for name, path, value in p.knobs()}
    assert knobs["zone_reclaim_mode"] == ("/proc/sys/vm/zone_reclaim_mode", 5)
    assert knobs["thp"] == ("/sys/kernel/mm/transparent_hugepage/enabled", "always")
    assert "cycles" not in knobs and "swap" not in knobs
    with pytest.raises(E.ExperimentError, match="unknown parameter 'chunkz'.*expected one of"):
        e.resolve(t, {"chunkz": "3"})
    with pytest.raises(E.ExperimentError, match="'cycles': expected int"):
        e.resolve(t, {"cycles": "many"})
    with pytest.raises(E.ExperimentError, match="'thp': expected one of always, madvise, never"):
        e.resolve(t, {"thp": "sometimes"})
    with pytest.raises(E.ExperimentError, match="'cpu': expected a CPU number below"):
        e.resolve(t, {"cpu": "8"})
    with pytest.raises(E.ExperimentError, match="NAME=VALUE"):
        E.parse_overrides(["cycles"])


def test_unknown_experiment():
    with pytest.raises(E.ExperimentError, match="expected one of .*memeater"):
        E.load("nosuch")


def test_expression_language_is_closed():
    assert E.evaluate("max(1, ceil(a / 3))", {"a": 10}) == 4
    assert E.evaluate("a if a > 0 else 7", {"a": 0}) == 7
    for bad in ("__import__('os')", "a.b", "[1][0]", "open('x')"):
        with pytest.raises(E.ExperimentError):
            E.evaluate(bad, {"a": 1})


def test_kernel_default_knob_is_left_to_the_kernel(tmp_path):
    """zone_reclaim_mode defaults to the kernel's own boot value (a patched
    kernel may change it): /init gets no line for it; any knob can ask for
    that, and a parameter without a knob cannot."""
    e = E.load("memeater")
    t = T.load("gs1280-8")
    p = e.resolve(t, {})
    assert p.params["zone_reclaim_mode"] == E.KERNEL_DEFAULT
    names = [name for name, _, _ in p.knobs()]
    assert "zone_reclaim_mode" not in names and "thp" in names
    p = e.resolve(t, E.parse_overrides(["thp=kernel", "zone_reclaim_mode=0"]))
    knobs = {name: value for name, _, value in p.knobs()}
    assert "thp" not in knobs and knobs["zone_reclaim_mode"] == 0
    with pytest.raises(E.ExperimentError, match="'cycles': expected int, got 'kernel'"):
        e.resolve(t, {"cycles": "kernel"})
    bad = tmp_path / "common.toml"
    bad.write_text('[params.swapiness]\ntype = "int"\ndefault = "kernel"\n')
    with pytest.raises(E.ExperimentError, match=r"params.swapiness.default': 'kernel' needs a 'knob'"):
        E._params(__import__("tomllib").loads(bad.read_text())["params"], bad)


@pytest.mark.parametrize("edit, field, expect", [
    (lambda d: d.update(progres={"record": "chunk"}), "progres", "unknown key; expected one of checks, command"),
    (lambda d: d["derived"].update(chunk_mib=16.5j), "derived.chunk_mib", "expected an expression"),
    (lambda d: d["checks"].update(cycles="cycles > 0"), "checks.cycles", "expected [expression, what is expected]"),
    (lambda d: d["progress"].update(totl="chunks"), "progress.totl", "unknown key; expected one of label, record"),
    (lambda d: d["params"]["cycles"].update(defualt=3), "params.cycles.defualt", "unknown key; expected one of"),
    (lambda d: d["params"]["cycles"].update(min="1"), "params.cycles.min", "expected an integer or a number"),
    (lambda d: d.update(timeout_s=True), "timeout_s", "expected a string or an integer or a number"),
    (lambda d: d.pop("command"), "command", "missing"),
])
def test_a_misspelt_or_mistyped_manifest_key_is_one_line_naming_file_and_key(edit, field, expect):
    import copy
    import tomllib
    path = E.HERE / "memeater" / "manifest.toml"
    data = copy.deepcopy(tomllib.loads(path.read_text()))
    E.check_manifest(data, path)  # the shipped one is fine
    edit(data)
    with pytest.raises(E.ExperimentError) as e:
        E.check_manifest(data, path)
    msg = str(e.value)
    assert msg.startswith(f"{path}: field '{field}': ") and expect in msg and "\n" not in msg


def test_every_shipped_manifest_and_results_module_loads():
    # a name read back from a database may be one this checkout lacks, or not a name at all
    assert all(E.results_module(n) is None for n in ("no_such", "lib", "../memeater", "memeater.results", ""))
    for name in E.available():
        exp = E.load(name)
        res = exp.results
        if res is not None:  # what the schema machinery and the summary call
            assert all(isinstance(step, str) and "CREATE" in step for step in getattr(res, "SCHEMA", []))
            assert callable(getattr(res, "figures", None)) and isinstance(res.QUERY_TABLE, str)
