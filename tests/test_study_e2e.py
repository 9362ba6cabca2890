"""Studies with real guests (slow): a local-pool study whose worker is
killed mid-run and whose coordinator is interrupted, then resumed; and the
same study on a Dask LocalCluster. tests/data/study-small.toml: three short
runs on the 2-node test machine, restored from its snapshot (the Dask
study) or booted (the killed-worker study, study-small-boot.toml)."""
import os
import re
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from tests import bootstrapped
from tests.e2e import REPO, vmlab_cmd

pytestmark = pytest.mark.study
STUDY = REPO / "tests" / "data" / "study-small.toml"


STUDY_BOOT = REPO / "tests" / "data" / "study-small-boot.toml"


def study_cmd(tmp, *extra, study=STUDY):
    return vmlab_cmd(None, "study", str(study), "--db", str(tmp / "s.db"), *extra)


def rows(tmp, sql, args=()):
    c = sqlite3.connect(tmp / "s.db", timeout=30)
    c.row_factory = sqlite3.Row
    try:
        return c.execute(sql, args).fetchall()
    finally:
        c.close()


def wait_for(pred, timeout, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if pred():
                return
        except sqlite3.Error:
            pass  # the database is being created
        time.sleep(1)
    raise AssertionError(f"timed out waiting for {what}")


def worker_groups(db_dir: Path) -> list[int]:
    """Process groups of this study's running tasks (python -m pipeline.worker SPEC DIR)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"pipeline.worker" in cmd and any(str(db_dir).encode() in c for c in cmd):
                out.append(int(d.name))
    return out


def test_a_killed_worker_and_an_interrupted_study_lose_no_finished_run(vmlab_env, tmp_path):
    # booted runs: long enough to kill one mid-run (the Dask test below restores)
    coord = subprocess.Popen(study_cmd(tmp_path, "--workers", "1", "--no-report", study=STUDY_BOOT), env=vmlab_env,
                             cwd=REPO,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: rows(tmp_path, "SELECT COUNT(*) FROM study_runs WHERE status = 'ok'")[0][0] >= 1, 900,
                 "the first run to finish")
        first = rows(tmp_path, "SELECT key, run_id FROM study_runs WHERE status = 'ok'")[0]
        # The next run's worker dies mid-run (its whole process group: worker, QEMU).
        wait_for(lambda: worker_groups(tmp_path), 300, "the next run's worker")
        time.sleep(10)
        killed = worker_groups(tmp_path)
        for pgid in killed:
            os.killpg(pgid, signal.SIGKILL)
        # It is retried; then the coordinator is interrupted during the retry.
        time.sleep(3)
        wait_for(lambda: set(worker_groups(tmp_path)) - set(killed), 300, "the retry")
        time.sleep(10)
        coord.send_signal(signal.SIGINT)
        out = coord.communicate(timeout=180)[0]
    finally:
        if coord.poll() is None:
            coord.kill()
    assert coord.returncode == 130, out[-3000:]
    assert "lost on attempt 1; retrying" in out and "resume" in out, out[-3000:]
    # the finished run is stored, once
    assert rows(tmp_path, "SELECT status FROM runs WHERE id = ?", (first["run_id"],))[0][0] == "ok"
    # resume: the rest runs, nothing finished runs again
    done_before = rows(tmp_path, "SELECT COUNT(*) FROM study_runs WHERE status = 'ok'")[0][0]
    r = subprocess.run(study_cmd(tmp_path, study=STUDY_BOOT), env=vmlab_env, cwd=REPO, capture_output=True, text=True,
                       timeout=1800)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    # the tally always says "N already done": N is what finished before the interruption (plus a
    # run adopted from its work folder), and one run at least never started before it
    skipped = re.search(r": 3 runs: (\d+) already done, ", r.stdout)
    assert skipped and 1 <= done_before <= int(skipped[1]) <= 2, (done_before, r.stdout[-3000:])
    study = rows(tmp_path, "SELECT key, status, run_id, attempts, executed_on FROM study_runs")
    assert len(study) == 3 and all(s["status"] == "ok" for s in study)
    assert next(s for s in study if s["key"] == first["key"])["run_id"] == first["run_id"]
    assert all("local pool" in s["executed_on"] for s in study)
    assert max(s["attempts"] for s in study) >= 2  # the killed run was tried again
    per_key = rows(tmp_path, "SELECT run_key, COUNT(*) AS n FROM runs WHERE status = 'ok' GROUP BY run_key")
    assert len(per_key) == 3 and all(p["n"] == 1 for p in per_key)
    # each merged run keeps its console, under the study's runs folder
    for s in study:
        log = rows(tmp_path, "SELECT log_path FROM runs WHERE id = ?", (s["run_id"],))[0][0]
        assert Path(log).exists() and "@@VMLAB" in Path(log).read_text(errors="replace")
    # latprobe's guest records were merged with the run (remapped ids)
    assert rows(tmp_path, "SELECT COUNT(*) FROM runs r JOIN records x ON x.run_id = r.id "
                          "WHERE r.experiment = 'latprobe' AND r.status = 'ok'")[0][0] > 0
    # the report was written at the end
    report = tmp_path / "report"
    assert list(report.glob("*-study-*/index.html")), r.stdout[-2000:]


def test_a_study_runs_on_a_dask_cluster(vmlab_env, tmp_path, monkeypatch):
    distributed = bootstrapped.pip("distributed", "distributed")
    # Workers import pipeline.worker from this checkout and build into the same cache.
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    for k in ("VMLAB_CACHE", "VMLAB_IN_VENV"):
        if k in vmlab_env:
            monkeypatch.setenv(k, vmlab_env[k])
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cl:
        r = subprocess.run(study_cmd(tmp_path, "--dask", cl.scheduler_address, "--no-report"), env=vmlab_env,
                           cwd=REPO, capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    study = rows(tmp_path, "SELECT status, executed_on, run_id FROM study_runs")
    assert len(study) == 3 and all(s["status"] == "ok" for s in study)
    assert all("dask worker tcp://" in s["executed_on"] for s in study)
    ids = [s["run_id"] for s in study]
    assert len(set(ids)) == 3
    assert rows(tmp_path, "SELECT COUNT(*) FROM runs")[0][0] == 3
