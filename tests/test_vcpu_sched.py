"""The per-vCPU clock scheduler's arithmetic, outside QEMU: the very header
our series adds (include/qemu/vmlab-sched.h, a new file in patch 0003) is cut
out of the patch, compiled with a small harness and driven with ctypes.
Quantum boundaries, halted vCPUs, stall overshoot, the machine's time."""
import ctypes
import subprocess
from pathlib import Path

import pytest

from configs import qemu_build

HERE = Path(__file__).resolve().parent
PS = 870          # EV7 cycle
Q = 1000 * 1000   # 1 us quantum, in ps


def header_from_patch() -> str:
    """The new file's '+' lines in patch 0003."""
    text = next(p for p in qemu_build.series() if p.name.startswith("0003")).read_text()
    part = text.split("+++ b/include/qemu/vmlab-sched.h\n", 1)[1].split("\ndiff --git", 1)[0]
    lines = part.splitlines()[1:]  # drop the @@ line
    assert all(ln.startswith("+") for ln in lines), "vmlab-sched.h must be a new file in the patch"
    return "\n".join(ln[1:] for ln in lines) + "\n"


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    d = tmp_path_factory.mktemp("sched")
    (d / "vmlab-sched.h").write_text(header_from_patch())
    out = d / "sched.so"
    subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared", f"-I{d}", "-o", str(out),
                    str(HERE / "c" / "vcpu_sched_harness.c")], check=True)
    lib = ctypes.CDLL(str(out))
    i64 = ctypes.c_int64
    lib.pick.restype = ctypes.c_int
    lib.pick.argtypes = [ctypes.POINTER(i64), ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(i64), ctypes.POINTER(i64)]
    for f in (lib.target, lib.budget):
        f.restype = i64
    lib.target.argtypes = [i64, i64, i64, i64]
    lib.budget.argtypes = [i64, i64, i64]
    lib.max_slice.restype = i64
    return lib


class Machine:
    """vCPU clocks and the machine's time, moved only by the scheduler."""

    def __init__(self, lib, clocks, active=None):
        self.lib = lib
        self.clocks = list(clocks)
        self.active = list(active or [True] * len(clocks))
        self.g = 0

    def pick(self):
        n = len(self.clocks)
        arr = (ctypes.c_int64 * n)(*self.clocks)
        g, second = ctypes.c_int64(self.g), ctypes.c_int64(0)
        best = self.lib.pick(arr, bytes(int(a) for a in self.active), n, ctypes.byref(g), ctypes.byref(second))
        assert g.value >= self.g, "the machine's time never goes back"
        self.clocks, self.g = list(arr), g.value
        return best, second.value


def test_the_vcpu_furthest_behind_runs_first_lowest_index_on_a_tie(lib):
    m = Machine(lib, [500, 200, 200, 900])
    best, second = m.pick()
    assert (best, second) == (1, 200) and m.g == 200


def test_halted_vcpus_do_not_hold_the_machine_back_and_wake_at_its_time(lib):
    m = Machine(lib, [100, 5000, 7000], [False, True, True])
    best, second = m.pick()
    assert (best, second, m.g) == (1, 7000, 5000)
    assert m.clocks[0] == 100          # a halted vCPU's clock is left alone ...
    m.active[0] = True                 # ... until it wakes: then it jumps to the machine's time
    best, _ = m.pick()
    assert m.clocks[0] == 5000 and best == 0
    m.active = [False] * 3
    assert m.pick()[0] == -1


def test_slice_ends_a_quantum_past_the_next_vcpu_or_at_the_timer(lib):
    assert lib.target(1000, 4000, Q, -1) == 4000 + Q
    assert lib.target(1000, 4000, Q, 2) == 1000 + 2000          # a timer 2 ns away comes first
    assert lib.target(1000, 2**63 - 1, Q, -1) == 1000 + lib.max_slice()   # alone: until the cap
    assert lib.target(1000, 2**63 - 1, Q, 50) == 1000 + 50_000


def test_budget_rounds_up_to_whole_instructions_and_runs_at_least_one(lib):
    assert lib.budget(0, 10 * PS, PS) == 10
    assert lib.budget(0, 10 * PS + 1, PS) == 11
    assert lib.budget(5000, 4000, PS) == 1     # already past the target (a stall): one instruction
    assert lib.budget(0, 10**15, 1) == 2**31 - 1


def run(m, lib, slices, work=None, stall=None):
    """Each slice the picked vCPU runs its budget (plus any stall charged
    to it); returns the largest skew seen between active vCPUs at a pick."""
    skew = 0
    for k in range(slices):
        best, second = m.pick()
        act = [c for c, a in zip(m.clocks, m.active) if a]
        skew = max(skew, max(act) - min(act))
        t = lib.target(m.g, second, Q, -1)
        m.clocks[best] += lib.budget(m.clocks[best], t, PS) * PS + (stall(k, best) if stall else 0)
    return skew


def test_busy_vcpus_stay_within_a_quantum_of_each_other(lib):
    m = Machine(lib, [0, 0, 0, 0])
    skew = run(m, lib, 400)
    assert skew <= Q + PS
    assert max(m.clocks) - min(m.clocks) <= Q + PS
    assert m.g >= 90 * Q           # 400 slices of four vCPUs: about 100 quanta of machine time


def test_a_stalled_vcpu_sits_out_until_the_others_catch_up(lib):
    """A 20-quantum stall overshoots the slice; the vCPU is not run again
    until every other vCPU has caught up with it: its time is its own."""
    m = Machine(lib, [0, 0, 0])
    picks = []

    def stall(k, best):
        picks.append((best, list(m.clocks)))
        return 20 * Q if k == 0 else 0
    run(m, lib, 60, stall=stall)
    again = next(i for i, (b, _) in enumerate(picks) if i > 0 and b == 0)
    assert {b for b, _ in picks[1:again]} == {1, 2}
    stalled_at, clocks = picks[again][1][0], picks[again][1]
    assert stalled_at > 20 * Q and min(clocks[1], clocks[2]) >= stalled_at
    assert again - 1 >= 10     # the two others leapfrog ~2 quanta a slice
