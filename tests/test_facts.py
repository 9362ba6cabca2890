"""Facts shared by C and Python are written once (experiments/lib/vmlab_facts.h,
timing/model_int.h) and read by protocol/facts.py: what the Python reader
sees is what the C compiler sees, and the tables that repeat a list agree
with it."""
import subprocess

import pytest

import timing as T
from analysis import db, timing as timing_db
from protocol import facts, records as R
from tests.cbuild import gcc

PRINT = r"""
#include <stdio.h>
#include "vmlab_facts.h"
#include "model_int.h"
int main(void)
{
	printf("tag=%s|\n", VMLAB_TAG);
	printf("magic=%d\n", VMLAB_PHASE_MAGIC);
#define X(id, sym, name) printf("phase=%d %s\n", id, name);
	VMLAB_PHASES(X)
#undef X
#define X(n) printf("reclaim=%s\n", #n);
	VMLAB_RECLAIM_COUNTERS(X)
#undef X
	printf("max_cpus=%d\ngranule=%llu\nformat=%d\n", MAX_CPUS, 1ull << GRAN_SHIFT, RESULTS_FORMAT);
#define X(n) printf("counter=%s\n", #n);
	COUNTER_FIELDS(X)
#undef X
	return 0;
}
"""


def test_python_reads_what_the_c_compiler_sees(tmp_path):
    src = tmp_path / "p.c"
    src.write_text(PRINT)
    exe = gcc(tmp_path / "p", src, include=[facts.HEADER.parent, T.HERE])
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()
    got = {}
    for line in out:
        k, v = line.split("=", 1)
        got.setdefault(k, []).append(v)
    assert got["tag"] == [facts.TAG + "|"] and facts.TAG == "@@VMLAB "
    assert got["magic"] == [str(facts.MAGIC)] and facts.MAGIC == 0x564D4C
    assert got["phase"] == [f"{i} {n}" for i, n in facts.PHASES.items()]
    assert got["reclaim"] == list(facts.RECLAIM_COUNTERS)
    assert got["max_cpus"] == [str(T.MAX_CPUS)] and got["granule"] == [str(T.GRANULE)] == ["2097152"]
    assert got["format"] == [str(T.RESULTS_FORMAT)]
    assert got["counter"] == list(T.COUNTERS) == list(timing_db.COUNTERS)


def test_host_side_uses_the_shared_facts():
    # the tag the guest's C prints, as the header spells it: a record the host would not find fails here
    header = facts.HEADER.read_text()
    assert f'#define VMLAB_TAG "{R.TAG}"' in header
    assert f'X({facts.phase_id("latprobe.pingpong")}, ' in header and "latprobe.pingpong" in header
    p = R.parse_text(f'{facts.TAG}{{"type":"x"}}')
    assert [r.type for r in p.records] == ["x"]


def test_timing_cpu_table_has_the_model_counters_as_columns():
    """The DDL (a migration: history, not rewritten) lists the counters a third
    time; this is where they would drift."""
    con = db.connect(":memory:")
    cols = [r["name"] for r in con.execute("PRAGMA table_info(timing_cpu)")]
    assert cols == ["run_id", "cpu", "node", *T.COUNTERS]
    phase_cols = {r["name"] for r in con.execute("PRAGMA table_info(timing_phases)")}
    assert set(timing_db.PHASE_COUNTERS) <= phase_cols <= set(T.COUNTERS) | {
        "run_id", "cpu", "phase_id", "phase", "instance", "begin_ps", "end_ps"}


@pytest.mark.parametrize("text,err", [
    ('#define VMLAB_TAG @@VMLAB\n', "#define VMLAB_TAG: expected a string literal"),
    ('#define VMLAB_TAG "x"\n#define VMLAB_PHASE_MAGIC 12\n#define VMLAB_PHASES(X) X(1, A, "a") X(2, B)\n',
     "expected 3 literal argument(s) in X(2, B)"),
    ('#define VMLAB_TAG "x"\n#define VMLAB_PHASE_MAGIC 12\n', "expected a #define VMLAB_PHASES"),
    ('#define VMLAB_TAG "x"\n#define VMLAB_PHASE_MAGIC (1 << 3)\n', "VMLAB_PHASE_MAGIC: expected an integer literal"),
])
def test_an_unreadable_header_is_one_line_naming_the_file(tmp_path, text, err):
    h = tmp_path / "facts.h"
    h.write_text(text)
    with pytest.raises(facts.FactsError) as e:
        facts.load(h)
    assert str(e.value).startswith(f"{h}: ") and err in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(facts.FactsError, match="cannot read"):
        facts.load(tmp_path / "missing.h")
