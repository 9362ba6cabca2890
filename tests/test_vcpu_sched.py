"""The per-vCPU clock scheduler's arithmetic, outside QEMU: the very headers
our series adds to QEMU (include/qemu/vmlab-sched.h, vmlab-pause.h and
vmlab-resume.h, files of engine/qemu-files/ that the build copies into the
QEMU tree) are compiled with a small harness and driven with ctypes.
Quantum boundaries, halted vCPUs, stall overshoot, the machine's time."""
import ctypes
from pathlib import Path

import pytest

from engine import qemu_build
from tests.cbuild import SHARED, gcc

HERE = Path(__file__).resolve().parent
PS = 870          # EV7 cycle
Q = 1000 * 1000   # 1 us quantum, in ps


# where QEMU's tree has them: include/qemu/vmlab-{sched,pause,resume}.h
QEMU_INCLUDE = qemu_build.FILES / "include"
HEADERS = ("vmlab-sched.h", "vmlab-pause.h", "vmlab-resume.h")


def test_the_headers_are_files_the_build_adds_to_qemu():
    assert {f"include/qemu/{h}" for h in HEADERS} <= set(qemu_build.qemu_files())


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    d = tmp_path_factory.mktemp("sched")
    out = gcc(d / "sched.so", HERE / "c" / "vcpu_sched_harness.c", flags=SHARED, include=[QEMU_INCLUDE])
    lib = ctypes.CDLL(str(out))
    i64 = ctypes.c_int64
    lib.pick.restype = ctypes.c_int
    lib.pick.argtypes = [ctypes.POINTER(i64), ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(i64), ctypes.POINTER(i64)]
    for f in (lib.target, lib.budget):
        f.restype = i64
    lib.target.argtypes = [i64, i64, i64, i64]
    lib.budget.argtypes = [i64, i64, i64]
    lib.max_slice.restype = i64
    lib.resume.restype = ctypes.c_int
    lib.resume.argtypes = [ctypes.POINTER(i64), ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int,
                           ctypes.c_int, i64]
    lib.pause_keeps.restype = ctypes.c_int
    lib.pause_keeps.argtypes = [ctypes.POINTER(i64), ctypes.c_char_p, ctypes.c_int, ctypes.c_int, i64, i64, i64,
                                ctypes.POINTER(i64)]
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


def pause_keeps(lib, clocks, active, self, mine, g, target):
    """At a PAUSE of vCPU `self` (its clock now `mine`): (keeps, second)."""
    n = len(clocks)
    second = ctypes.c_int64(-1)
    r = lib.pause_keeps((ctypes.c_int64 * n)(*clocks), bytes(int(a) for a in active), n, self, mine, g, target,
                        ctypes.byref(second))
    assert r in (0, 1)
    return bool(r), second.value


def test_a_spinner_keeps_its_slice_while_it_is_still_furthest_behind(lib):
    # vCPU 1 picked at 1000 (the others at 3000 and 8000): at 2500 it is still behind everyone
    assert pause_keeps(lib, [3000, 1000, 8000], [1, 1, 1], 1, 2500, 1000, 3000 + Q) == (True, 3000)
    # past vCPU 0's clock: the pick would run vCPU 0 now
    assert pause_keeps(lib, [3000, 1000, 8000], [1, 1, 1], 1, 3001, 1000, 3000 + Q)[0] is False
    # level with vCPU 0, which comes first in the list: vCPU 0 wins the tie; vCPU 2 would not
    assert pause_keeps(lib, [3000, 1000, 8000], [1, 1, 1], 1, 3000, 1000, 3000 + Q)[0] is False
    assert pause_keeps(lib, [5000, 1000, 3000], [1, 1, 1], 1, 3000, 1000, 3000 + Q) == (True, 3000)
    # its slice's target reached: the slice ends whatever the others do
    assert pause_keeps(lib, [9000, 1000], [1, 1], 1, 9000 - 1, 1000, 9000 - 1)[0] is False


def test_a_spinner_alone_keeps_its_slice_and_a_woken_vcpu_counts_at_the_machines_time(lib):
    # the others halted: it spins on alone (no next vCPU: the pick's cap applies)
    assert pause_keeps(lib, [50, 1000, 60], [0, 1, 0], 1, 4000, 1000, 10**12) == (True, 2**63 - 1)
    # vCPU 0 woken during the slice (say by this vCPU's IPI): it resumes at the machine's time
    # (1000), behind the spinner, so the spinner yields to it
    assert pause_keeps(lib, [50, 1000, 60], [1, 1, 0], 1, 4000, 1000, 10**12)[0] is False
    # a vCPU that halted ahead of the spinner and woke keeps its own clock: no reason to yield
    assert pause_keeps(lib, [9000, 1000], [1, 1], 1, 4000, 1000, 10**12) == (True, 9000)


def test_pause_keeps_exactly_when_the_pick_would_choose_the_spinner_again(lib):
    """The property the series' x86 PAUSE (0003, vmlab-pause.h) rests on: for
    any clocks, activity and spinner, keeping the slice at a PAUSE is the
    pick's own answer."""
    import random
    rnd = random.Random(7)
    for _ in range(3000):
        n = rnd.randint(1, 9)
        clocks = [rnd.choice([rnd.randrange(0, 5000), 2000, 3000]) for _ in range(n)]
        active = [rnd.random() < 0.7 for _ in range(n)]
        self = rnd.randrange(n)
        active[self] = True
        g = min([c for c, a in zip(clocks, active) if a] + [rnd.randrange(0, 5000)])
        mine = max(g, clocks[self]) + rnd.choice([0, 1, rnd.randrange(0, 3000)])
        target = mine + rnd.choice([-1, 0, 1, Q])
        keeps, second = pause_keeps(lib, clocks, active, self, mine, g, target)
        after = list(clocks)
        after[self] = mine
        m = Machine(lib, after, active)
        m.g = g
        best, pick_second = m.pick()
        assert keeps == (best == self and mine < target), (clocks, active, self, mine, g, target)
        if keeps:
            assert second == pick_second



def resume(lib, clocks, active, was_active, last, target):
    arr = (ctypes.c_int64 * len(clocks))(*clocks)
    return lib.resume(arr, bytes(active), len(clocks), bytes(was_active), len(was_active), last, target)


def test_a_slice_the_host_cut_short_goes_on_and_a_guest_event_picks_afresh(lib):
    """The series' scheduler (0002, vmlab-resume.h): a slice that ended early
    runs on to its target while the guest changed nothing (so a host kick
    never decides who runs next); a vCPU woken or halted, the target
    reached, or a vCPU more or fewer make the pick choose again."""
    clocks, on = [5 * Q, 7 * Q, 9 * Q], [1, 1, 0]
    assert resume(lib, clocks, on, on, 0, 6 * Q) == 1                   # cut short at 5 of 6: goes on
    assert resume(lib, clocks, on, on, 0, 5 * Q) == 0                   # reached its target
    assert resume(lib, clocks, [1, 1, 1], on, 0, 6 * Q) == 0            # an IPI woke CPU 2
    assert resume(lib, clocks, [1, 0, 0], on, 0, 6 * Q) == 0            # CPU 1 halted
    assert resume(lib, clocks, [0, 1, 0], [0, 1, 0], 0, 6 * Q) == 0     # the slice's own vCPU halted
    assert resume(lib, clocks, on, on, -1, 6 * Q) == 0                  # nothing picked (a PAUSE yielded)
    assert resume(lib, clocks, on, [1, 1], 0, 6 * Q) == 0               # another number of vCPUs
    assert resume(lib, clocks, on, on, 3, 6 * Q) == 0                   # no such vCPU
