import pytest

import experiments as E
import topologies as T
from analysis import experiment_results as ER


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
        E.parse_params(__import__("tomllib").loads(bad.read_text())["params"], bad)


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
    assert all(ER.results_module(n) is None for n in ("no_such", "lib", "../memeater", "memeater.results", ""))
    for name in E.available():
        E.load(name)
        res = ER.results_module(name)
        if res is not None:  # what the schema machinery and the summary call
            assert all(isinstance(step, str) and ("CREATE" in step or step.startswith("ALTER TABLE"))
                       for step in getattr(res, "SCHEMA", []))
            assert callable(getattr(res, "figures", None)) and isinstance(res.QUERY_TABLE, str)


# --- limits (issue 10): absurd counts and sizes are one line before the run ----
def one_line(exp, topo, overrides, expect, start="--param: "):
    with pytest.raises(E.ExperimentError) as e:
        E.load(exp).resolve(T.load(topo), overrides)
    msg = str(e.value)
    assert msg.startswith(start) and expect in msg, msg
    assert "\n" not in msg and len(msg) < 400
    return msg


@pytest.mark.parametrize("exp, overrides, expect", [
    ("memeater", {"chunks": str(10**12)}, "parameters chunks=1000000000000: expected a run within 1e+07 s"),
    ("memeater", {"cycles": str(10**12)}, "timeout_s = '120 + fill_mib * cycles / 4 + cache_mib / 4' gives 6.4e+13 s"),
    ("memeater", {"chunks": "-1"}, "parameter 'chunks': expected >= 0"),
    ("memeater", {"chunk_frac": "inf"}, "parameter 'chunk_frac': expected a finite number, got inf"),
    ("memeater", {"fill_frac": "nan"}, "parameter 'fill_frac': expected a finite number, got nan"),
    ("memeater", {"chunks": "9" * 5000}, "expected int, got '99999999999999999999...(5000 characters)'"),
    ("qsbench", {"mem_frac": "1e300"}, "derived value array_mib of the guest command within 9223372036854775807"),
    ("forkstorm", {"duration_s": "1e300"}, "derived value duration_ms"),
    ("kvio", {"io_max_frac": "1e30"}, "expected a run within 1e+07 s"),
    ("qsbench", {"qs_seed": str(2**63)}, "parameter qs_seed of the guest command within 9223372036854775807"),
    ("mlockchurn", {"recycle_frac": "1e306"}, "is a finite number"),
])
def test_absurd_parameters_are_refused_in_one_line(exp, overrides, expect):
    one_line(exp, "gs1280-8", overrides, expect)


def test_the_run_time_bound_is_the_one_timeout_has_and_at_it_the_plan_resolves():
    from pipeline import execute
    from pipeline.spec import InputError, RunSpec
    for name in ("timeout", "boot_timeout"):  # the options' bound is this one
        with pytest.raises(InputError, match=f"--{name.replace('_', '-')}: expected a positive number"):
            execute.prepare(RunSpec(topology="gs1280-8", **{name: E.MAX_TIMEOUT_S}))
        execute.prepare(RunSpec(topology="gs1280-8", **{name: E.MAX_TIMEOUT_S * 0.999}))
    e, t = E.load("memeater"), T.load("gs1280-8")  # 16 chunks of 16 MiB: 120 + 256 x cycles / 4 s
    assert e.resolve(t, {"cycles": "156248"}).timeout_s <= E.MAX_TIMEOUT_S
    one_line("memeater", "gs1280-8", {"cycles": "156249"}, "expected a run within 1e+07 s")


def test_swap_larger_than_its_own_tables_can_map_is_refused():
    """swapon keeps a byte per swap page (zram 16 more): past 4096 (241)
    times guest memory the tables need all of it."""
    e, t = E.load("memeater"), T.load("gs1280-8")
    assert e.resolve(t, {"swap_frac": "4096"}).params["swap_frac"] == 4096
    one_line("memeater", "gs1280-8", {"swap_frac": "4097"}, "expected at most 4096 with swap=disk")
    assert e.resolve(t, {"swap": "zram", "swap_frac": "240"})
    one_line("memeater", "gs1280-8", {"swap": "zram", "swap_frac": "241"}, "expected at most 240.9 with swap=zram")
    assert e.resolve(t, {"swap": "none", "swap_frac": "4097"})  # no swap, no tables
    assert E.max_swap_frac("alpha", "disk") == 8192  # 8 KiB pages


def test_max_procs_is_the_guest_kernels_pid_and_thread_limit():
    # threads-max: 8 per MiB (16 KiB stacks, 1/8 of RAM); pid_max: 32768, or 1024 per CPU past 32
    assert E.max_procs(T.load("gs1280-8")) == 8 * 512
    assert E.max_procs(T.load("gs1280-32")) == min(32768, 8 * 2048)


def synthetic(tmp_path, params, command="prog --procs {procs} --n {n}"):
    import tomllib
    path, table = tmp_path / "manifest.toml", tomllib.loads(params)["params"]
    exp = E.Experiment("synthetic", tmp_path, {"name": "synthetic", "programs": [], "command": command,
                                               "params": table, "timeout_s": 60})
    exp.params = E.parse_params(table, path)
    return exp


PARAMS = """
[params.procs]
type = "int"
default = 1
min = 1
max = "max_procs"
[params.n]
type = "int"
default = 1
max = 64
"""


def test_max_as_a_number_or_an_expression_over_the_topology(tmp_path):
    exp, t = synthetic(tmp_path, PARAMS), T.load("gs1280-8")
    assert exp.resolve(t, {"procs": "4096", "n": "64"}).command == "prog --procs 4096 --n 64"
    with pytest.raises(E.ExperimentError, match=r"^--param: parameter 'procs': expected <= 4096 \(max_procs on "
                                                r"gs1280-8\), got 4097$"):
        exp.resolve(t, {"procs": "4097"})
    with pytest.raises(E.ExperimentError, match=r"^--param: parameter 'n': expected <= 64, got 65$"):
        exp.resolve(t, {"n": "65"})


@pytest.mark.parametrize("old, new, field, expect", [
    ('max = "max_procs"', 'max = "max_procs +"', "params.procs.max", "expected a number or an expression"),
    ("max = 64", "max = 0\nmin = 1", "params.n.max", "expected >= min = 1"),
    ("default = 1\nmax = 64", "default = 65\nmax = 64", "params.n.default", "expected <= 64, got 65"),
    ("[params.n]", '[params.s]\ntype = "str"\ndefault = "a"\nmax = 3\n[params.n]', "params.s.max",
     "only on an int or float"),
])
def test_a_bad_bound_in_a_manifest_names_the_file_and_field(tmp_path, old, new, field, expect):
    with pytest.raises(E.ExperimentError) as e:
        synthetic(tmp_path, PARAMS.replace(old, new))
    msg = str(e.value)
    assert msg.startswith(f"{tmp_path / 'manifest.toml'}: field '{field}': ") and expect in msg, msg


def test_an_unknown_name_in_an_expression_max_names_the_field(tmp_path):
    exp = synthetic(tmp_path, PARAMS.replace('"max_procs"', '"max_prcs"'))
    with pytest.raises(E.ExperimentError, match=r"manifest.toml: field 'params.procs.max': unknown name 'max_prcs'"):
        exp.resolve(T.load("gs1280-8"), {})


@pytest.mark.parametrize("topo", T.available())
def test_every_shipped_experiment_resolves_with_its_defaults(topo):
    t = T.load(topo)
    for name in E.available():
        p = E.load(name).resolve(t, {})
        assert 0 < p.timeout_s <= E.MAX_TIMEOUT_S


def test_results_modules_are_read_through_their_declared_hooks():
    """analysis/experiment_results.py: each shipped results.py conforms; what it
    does not declare gets a default; a misshapen hook is one error naming it."""
    import types

    for name in E.available():
        h = ER.results(name)
        mod = ER.results_module(name)
        assert h.QUERY_TABLE == getattr(mod, "QUERY_TABLE", "records")
        assert h.SCHEMA == tuple(getattr(mod, "SCHEMA", ()))
        assert h.TABLES == getattr(mod, "TABLES", ())
    assert ER.results("latprobe").compare_figures(None, 1) == {}    # latprobe declares none
    assert ER.results("no_such").QUERY_TABLE == "records"
    bad = types.ModuleType("fake")
    bad.__file__ = "experiments/fake/results.py"
    bad.verdict = lambda con, run_id: None
    with pytest.raises(E.ExperimentError, match=r"experiments/fake/results.py: verdict: expected a function of "
                                                r"\(con, run_id, r, params, w\)"):
        ER.hooks("fake", bad)
    bad2 = types.ModuleType("fake")
    bad2.SANITY = "yes"
    with pytest.raises(E.ExperimentError, match="SANITY: expected bool"):
        ER.hooks("fake", bad2)
    bad3 = types.ModuleType("fake")
    bad3.TABLES = ("CREATE TABLE t (a)",)
    with pytest.raises(E.ExperimentError, match="TABLES: expected a tuple of analysis.kit Table and View"):
        ER.hooks("fake", bad3)
