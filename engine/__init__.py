"""Engine stage: the topology and the built artifacts -> a machine
started, supervised to its end and read back.

engine/base.py is the seam (Engine, Snapshots, Invocation), which the
pipeline and sampling talk to; engine/machine.py the Machine they hand
it. QEMU is the engine today (engine/qemu_engine.py over qemu.py, the
command line and supervision; snapshot.py, boot once, run many; regions.py,
checkpoints inside a run; qemu_build.py, our QEMU from Debian's source and
engine/qemu-patches/).

QEMU shows the guest the topology itself: one NUMA node per topology node,
SLIT distances from the hop matrix, HMAT latency and bandwidth, CPUs as
sockets. So Linux's NUMA policy, per-node kswapd and zone reclaim run against
the simulated shape.
"""
from __future__ import annotations

from engine.qemu import EngineError  # bad engine input (one line, exit 2)


def _qemu(ours: bool):
    from engine.qemu_engine import QemuEngine
    return QemuEngine(ours)


ENGINES = {"vmlab": lambda: _qemu(True), "debian": lambda: _qemu(False)}


def get(name: str):
    """The engine called `name` (--engine): an engine.base.Engine."""
    if name not in ENGINES:
        raise EngineError(f"--engine: expected one of {', '.join(ENGINES)}, got {name!r}")
    return ENGINES[name]()


def input_errors() -> tuple[type[Exception], ...]:
    """What the pipeline reports as bad input (one line, exit 2)."""
    from engine import qemu_build
    return (EngineError, qemu_build.EngineBuildError)
