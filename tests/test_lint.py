"""The linter, as part of the test command (so CI runs it too): ruff,
pinned in bootstrap/requirements.txt, configured in ruff.toml (the rules,
and each one left out with its reason), on the whole repository. A `noqa`
names the rule it silences and is itself checked (RUF100): one that
silences nothing fails here too. Fix a finding, or configure it away in
ruff.toml with its reason; `ruff check --fix` applies the safe fixes."""
import subprocess
import sys

from tests.e2e import REPO


def test_ruff_finds_nothing():
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
                       cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, f"ruff check (ruff.toml):\n{r.stdout}{r.stderr}"

