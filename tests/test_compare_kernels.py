"""./run.py --kernel a,b (pipeline/compare_kernels.py) without QEMU: each
prepared run is executed in order into one stored comparison, an aborted
run ends it, and the exit status is the worst run's."""
from types import SimpleNamespace

import pytest

import topologies
from tests.runrows import run_start


def fake_runs(monkeypatch, statuses):
    """pipeline.execute.execute stores a run row per call, with the next status."""
    from analysis import db
    from pipeline import execute
    topo = topologies.load("gs1280-8")
    calls = []

    def execute_(prep, built, con, dbpath, runs_dir=None, userland=None):
        calls.append((prep.variant.patchset, userland, runs_dir))
        rid = db.start_run(con, run_start(topo, patch_set=prep.variant.patchset))
        status = statuses[len(calls) - 1]
        with con:
            con.execute("UPDATE runs SET status = ?, reason = ? WHERE id = ?",
                        (status, None if status == "ok" else "why", rid))
        return rid, status
    monkeypatch.setattr(execute, "execute", execute_)
    preps = [SimpleNamespace(exp=SimpleNamespace(name="memeater"), topo=topo, variant=SimpleNamespace(patchset=k))
             for k in ("vanilla", "zone-reclaim-auto", "kswapd-no-backoff")[:len(statuses)]]
    built = [SimpleNamespace(userland=f"userland of {p.variant.patchset}".encode()) for p in preps]
    return preps, built, calls


@pytest.mark.parametrize("statuses,code,ran", [
    (["ok", "ok"], 0, 2),
    (["ok", "failed", "ok"], 1, 3),
    (["aborted", "ok", "ok"], 130, 1),  # Ctrl-C ends the comparison
])
def test_kernels_run_in_order_into_one_comparison(tmp_path, monkeypatch, capsys, statuses, code, ran):
    from analysis import compare, db
    from pipeline import compare_kernels
    preps, built, calls = fake_runs(monkeypatch, statuses)
    dbpath = tmp_path / "r.db"
    assert compare_kernels.run(preps, built, dbpath, tmp_path / "runs", "a,b") == code
    assert [c[0] for c in calls] == [p.variant.patchset for p in preps][:ran]
    assert {c[1] for c in calls} == {built[0].userland}  # every kernel boots the first build's userland
    con = db.connect(dbpath)
    (cid,) = con.execute("SELECT id FROM compare_sets").fetchone()
    assert compare.runs_in(con, cid) == list(range(1, ran + 1))
    out = capsys.readouterr().out
    assert f"=== kernel 1/{len(preps)}: vanilla (comparison {cid}) ===" in out
    assert f"`./run.py compare --set {cid}`" in out


def test_one_kernel_is_a_plain_run_with_its_summary(tmp_path, monkeypatch):
    from analysis import db, summary
    from pipeline import compare_kernels
    preps, built, calls = fake_runs(monkeypatch, ["failed"])
    shown = []
    monkeypatch.setattr(summary, "render", lambda con, rid: shown.append(rid) or f"summary of {rid}")
    assert compare_kernels.run(preps, built, tmp_path / "r.db", None, "vanilla") == 1
    assert shown == [1]
    assert db.connect(tmp_path / "r.db").execute("SELECT COUNT(*) FROM compare_sets").fetchone()[0] == 0
