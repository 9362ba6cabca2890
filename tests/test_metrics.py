"""Metrics declared once (experiments/metrics.py): each manifest's [metrics]
parses, every figure a guest program or results module stores under a
literal name is declared, bad declarations are one line, and the ingest
flags a figure nobody declared."""
import re

import pytest

import experiments
import topologies as T
from analysis import db
from experiments import metrics as M
from protocol import records as R
from tests.e2e import REPO
from tests.runrows import run_end, run_start

# vl_metric("name", ...) in a guest program; metric(con, run_id, "name", ...) in a results module
LITERALS = (re.compile(r'vl_metric\("([^"%]+)"'), re.compile(r'metric\(con, run_id, "([^"{]+)"'))


@pytest.mark.parametrize("name", experiments.available())
def test_every_literal_figure_is_declared_with_its_unit(name):
    exp = experiments.load(name)
    d = REPO / "experiments" / name
    found = {}
    for src in [*d.glob("*.c"), *d.glob("results.py")]:
        text = src.read_text()
        for pat in LITERALS:
            for m in pat.finditer(text):
                unit = re.match(r'[^,]*,[^,]*(?:,\s*"([^"]*)")?', text[m.end():])
                found[m.group(1)] = unit.group(1) if unit else None
    for fig, unit in found.items():
        decl = exp.metric(fig)
        assert decl is not None, f"experiments/{name}: {fig} is stored but not declared in its manifest"
        if unit is not None:
            assert decl.unit == unit, f"{name}: {fig} stored in {unit!r}, declared {decl.unit!r}"


def test_headlines_and_directions_make_sense():
    for name in experiments.available():
        exp = experiments.load(name)
        assert all(m.better in M.BETTER and m.aggregate in M.AGGREGATES and m.help for m in exp.metrics)
        # common.toml's names carry the experiment's own name
        assert exp.metric(f"{name}.sanity_ok").aggregate == "min"
    assert experiments.load("qsbench").metric("qsbench.elapsed_s").headline
    kv = experiments.load("kvio").metric("kvio.ops_per_s.io3")
    assert kv.pattern == "kvio.ops_per_s.io*" and kv.better == "higher"


def test_judge_and_combine():
    lower = M.Metric("x", "s", "lower", "median")
    assert lower.judge(10, 12) == "worse" and lower.judge(10, 8) == "better"
    assert lower.judge(10, 10.05) == "" and lower.judge(None, 3) == ""
    assert M.Metric("y", "GB/s", "higher").judge(10, 12) == "better"
    assert M.Metric("z", "", "neither").judge(1, 5) == ""
    assert lower.combine([3, 1, 2, None]) == 2 and M.Metric("w", "", "lower", "max").combine([1, 4]) == 4
    assert lower.combine([]) is None


@pytest.mark.parametrize("table,expected", [
    ({"a": {"unit": "s", "better": "up", "help": "h"}}, "field 'metrics.a.better': expected one of lower"),
    ({"a": {"unit": "s", "better": "lower"}}, "field 'metrics.a.help': missing"),
    ({"a": {"unit": "s", "better": "lower", "help": "h", "aggregate": "avg"}}, "metrics.a.aggregate': expected"),
    ({"a": {"unit": "s", "better": "lower", "help": "h", "headline": "yes"}}, "metrics.a.headline': expected true"),
    ({"a": {"unit": "s", "better": "lower", "help": "h", "colour": 1}}, "metrics.a.colour': unknown key"),
    ({"a": 3}, "field 'metrics.a': expected a table"),
])
def test_a_bad_declaration_is_one_line_naming_the_field(tmp_path, table, expected):
    with pytest.raises(experiments.ExperimentError, match=re.escape(expected)):
        M.parse_metrics(table, tmp_path / "manifest.toml")


def test_the_ingest_flags_an_undeclared_figure_and_a_wrong_unit(tmp_path):
    topo = T.load("gs1280-8")
    con = db.connect(tmp_path / "r.db")
    rid = db.start_run(con, run_start(topo, experiment="qsbench"))
    lines = ['@@VMLAB {"type":"metric","name":"qsbench.elapsed_s","value":2.5,"unit":"s"}',
             '@@VMLAB {"type":"metric","name":"qsbench.majflt","value":9,"unit":"pages"}',
             '@@VMLAB {"type":"metric","name":"qsbench.surprise","value":1,"unit":""}']
    db.finish_run(con, rid, run_end(), R.parse_bytes("\n".join(lines).encode()), topo)
    errs = dict(con.execute("SELECT name, text FROM metrics WHERE name LIKE 'ingest_error_metric.%'").fetchall())
    assert set(errs) == {"ingest_error_metric.qsbench.majflt", "ingest_error_metric.qsbench.surprise"}
    assert "declares 'faults'" in errs["ingest_error_metric.qsbench.majflt"]
    assert "not declared" in errs["ingest_error_metric.qsbench.surprise"]
    # the figures themselves are stored all the same
    assert con.execute("SELECT value FROM metrics WHERE name = 'qsbench.elapsed_s'").fetchone()[0] == 2.5
