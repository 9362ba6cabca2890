"""tests/e2e.py's command builder: an end-to-end run names its timing mode
(the default prices every instruction), checked before any guest starts."""
import pytest

from tests.e2e import vmlab_cmd

RUN = ("-t", "x86-1s-2c", "-e", "memeater")


def test_a_run_without_a_timing_mode_is_refused_before_it_starts(tmp_path):
    with pytest.raises(ValueError, match="--timing"):
        vmlab_cmd(tmp_path, *RUN)


@pytest.mark.parametrize("tmp,args,kw", [
    ("tmp", (*RUN, "--timing", "off"), {}),
    ("tmp", RUN, {"default_timing": True}),     # a test of the default itself
    ("tmp", RUN, {"runs_dir": False}),           # bad input: nothing boots
    ("tmp", ("compare", "--set", "1"), {}),      # a subcommand, not a run
    (None, ("build", *RUN), {}),
])
def test_what_names_its_mode_or_runs_no_guest_passes(tmp_path, tmp, args, kw):
    cmd = vmlab_cmd(tmp_path if tmp else None, *args, **kw)
    assert cmd[2:2 + len(args)] == list(args)
