"""Engine stage, QEMU backend: topology + artifacts -> a QEMU command line,
and the supervision of one guest run (console capture, timeouts, Ctrl-C).

QEMU shows the guest the topology itself: one NUMA node per topology node,
SLIT distances from the hop matrix, HMAT latency and bandwidth, CPUs as
sockets. So Linux's NUMA policy, per-node kswapd and zone reclaim run against
the simulated shape.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

from engine.base import EXIT_STATUS, PANIC_LINE, Outcome
from engine.machine import QUANTUM_NS, Machine
from protocol import records as rec

# Guest time (--qemu-mode):
# - icount (default): our series' per-vCPU clocks. Each vCPU's time is its own
#   instructions at the topology's clock (one per cycle) plus the stalls the
#   timing model charges it; vCPUs interleave furthest-behind-first in a
#   quantum of guest time; idle time is skipped; the RTC is pinned. Same
#   inputs give the same instruction counts and console, run after run.
# - mttcg: faster on several host cores, not repeatable: guest time follows the host.
MODES = ("icount", "mttcg")
MAX_QUANTUM_NS = 1_000_000  # 1 ms: past that, interleaving stops meaning anything
RTC = "base=2005-05-24T00:00:00"


class EngineError(RuntimeError):
    pass


def perturbation(seed: int, repeat: int) -> str:
    """The kernel command-line word that makes run (seed, repeat) differ from
    its siblings: "" for (0, 0), the unperturbed machine every single run and
    every figure before this existed used.

    Under per-vCPU clocks a run is deterministic: two runs of the same inputs
    are one run, and repeats would report a spread of zero. Real machines
    vary because of timing noise; a deterministic simulator gets run-to-run
    variation by perturbing each run slightly and seeding the perturbation
    (Alameldeen & Wood, HPCA 2003). Ours is the guest kernel's entropy: Linux
    mixes its command line into the entropy pool at boot
    (random_init_early()), so a different word gives other ASLR placements,
    hash seeds and random choices, whose few instructions more or less move
    every later quantum boundary and with it the interleaving of vCPUs, locks
    and reclaim. Each (seed, repeat) stays exactly repeatable. The
    reproducers' own random seeds are parameters and are not touched (the
    same work in every repeat)."""
    if seed == 0 and repeat == 0:
        return ""
    return f"vmlab.perturb={seed}.{repeat}"


def cycle_ps(topo) -> int:
    """Guest time per instruction: one cycle of the topology's clock."""
    return topo.cycle_ps


def check_quantum(quantum_ns) -> int:
    q = quantum_ns
    if isinstance(q, bool) or not isinstance(q, (int, float)) or q != q or not 1 <= q <= MAX_QUANTUM_NS \
            or int(q) != q:
        raise EngineError(f"--quantum-ns: expected a whole number of guest ns from 1 to {MAX_QUANTUM_NS}, got {q!r}")
    return int(q)


def clock_args(topo, mode: str, quantum_ns: int = QUANTUM_NS, vcpu_clocks: bool = True) -> list[str]:
    """vcpu_clocks=False: upstream -icount (one counter for every vCPU), for
    comparing with Debian's binary (`--engine debian`)."""
    if mode == "icount" and not vcpu_clocks:
        return ["-icount", "shift=0,sleep=off", "-rtc", f"{RTC},clock=vm"]
    if mode == "icount":
        return ["-icount", f"shift=0,sleep=off,vcpu-clock=on,cycle-ps={cycle_ps(topo)},"
                f"pause-cycles={topo.pause_cycles},quantum-ns={check_quantum(quantum_ns)}",
                "-rtc", f"{RTC},clock=vm"]
    return ["-accel", "tcg,thread=multi", "-rtc", f"{RTC},clock=host"]


# A test hook of the series (x-kick-storm-us, patch 0002): a host thread kicks
# the running vCPU every random 1..N host us, as RCU and the main loop do now
# and then. A run with it must repeat one without it, so it is kept out of
# every key; tests/test_determinism_e2e.py sets it for one run of a pair.
KICK_STORM_ENV = "VMLAB_X_KICK_STORM_US"


def with_test_hooks(cmd: list[str]) -> list[str]:
    """cmd with the kick storm of $VMLAB_X_KICK_STORM_US (per-vCPU clocks only)."""
    us = os.environ.get(KICK_STORM_ENV, "")
    if not us.isdigit() or "-icount" not in cmd:
        return cmd
    i = cmd.index("-icount") + 1
    if "vcpu-clock=on" not in cmd[i]:
        return cmd
    return cmd[:i] + [f"{cmd[i]},x-kick-storm-us={int(us)}"] + cmd[i + 1:]


def clock_model(topo, mode: str, quantum_ns: int, stalls: bool, vcpu_clocks: bool = True) -> str:
    """How guest time is kept, for the run row and the summary. With stalls
    charged, an out-of-order core's plugin sets the engine's time per
    instruction to the core's best case (series patch 0008, timing/plugin.c
    core_charges; the command line keeps the cycle)."""
    if mode == "icount" and not vcpu_clocks:
        return "upstream icount: one instruction counter for every vCPU, 1 instruction = 1 ns"
    if mode == "icount" and stalls and topo.core.model == "out-of-order":
        return (f"per-vCPU clocks: {topo.core.insn_ps(topo.cycle_ps)} ps per instruction at best "
                f"({topo.core.width} a cycle at "
                f"{topo.clock_ghz} GHz, set by the timing plugin when it starts charging), the model's core "
                f"charging the rest (dataflow, latencies, branch mispredictions, memory), PAUSE "
                f"{topo.pause_cycles} cycle{'s' if topo.pause_cycles != 1 else ''}, quantum {quantum_ns} ns")
    if mode == "icount":
        return (f"per-vCPU clocks: {cycle_ps(topo)} ps per instruction ({topo.clock_ghz} GHz, 1 IPC), "
                f"PAUSE {topo.pause_cycles} cycle{'s' if topo.pause_cycles != 1 else ''}, "
                f"quantum {quantum_ns} ns, model stalls {'charged' if stalls else 'not charged'}")
    return "host time (mttcg): not repeatable, blind to the topology"


def numa_args(topo, hmat: bool = True) -> list[str]:
    """One NUMA node per topology node, the SLIT and the HMAT. A CPU-less
    memory node (a CXL expander) is a node with memory and no CPUs, whose
    HMAT initiator is the socket it hangs off; the HMAT has a latency and a
    bandwidth for every initiator (a node with CPUs) and target (every node),
    from which Linux 6.7+ places a CPU-less node in its memory tier."""
    args = []
    for n in range(topo.nodes):
        cpus = topo.node_cpus(n)
        args += ["-object", f"memory-backend-ram,id=mem{n},size={topo.node_memory_mib(n)}M"]
        node = (f"node,nodeid={n},cpus={cpus[0]}-{cpus[-1]},memdev=mem{n}" if cpus
                else f"node,nodeid={n},memdev=mem{n}")
        if hmat:
            node += f",initiator={topo.initiator(n)}"
        args += ["-numa", node]
    slit = topo.slit()
    for i in range(topo.nodes):
        for j in range(topo.nodes):
            if i != j:
                args += ["-numa", f"dist,src={i},dst={j},val={slit[i][j]}"]
    if hmat:
        for i in range(topo.cpu_nodes):  # initiators: the nodes with CPUs
            for j in range(topo.nodes):
                lat = round(topo.latency_ns(i, j))
                bw = round(topo.bandwidth_gbps(i, j) * 1000)
                args += ["-numa", f"hmat-lb,initiator={i},target={j},hierarchy=memory,"
                         f"data-type=access-latency,latency={lat}",
                         "-numa", f"hmat-lb,initiator={i},target={j},hierarchy=memory,"
                         f"data-type=access-bandwidth,bandwidth={bw}M"]
    return args


def command_line(m: Machine, *, binary: Path, vcpu_clocks: bool = True) -> list[str]:
    """The QEMU command line that starts machine m. binary: our QEMU for the
    guest's ISA (engine/qemu_build.binary); vcpu_clocks=False: Debian's
    binary (upstream -icount)."""
    if m.qemu_mode not in MODES:
        raise EngineError(f"--qemu-mode: expected one of {', '.join(MODES)}, got {m.qemu_mode!r}")
    topo = m.topo
    if topo.guest_isa == "alpha":
        cmd = alpha_command_line(m, binary=binary, vcpu_clocks=vcpu_clocks)
        return cmd + (["-plugin", f"{m.plugin[0]},config={m.plugin[1]}"] if m.plugin is not None else [])
    machine = "q35" + (",hmat=on" if m.hmat else "")
    cmd = [str(binary), "-machine", machine, "-nodefaults", "-display", "none", "-monitor", "none",
           # qemu64: no RDRAND, whose host randomness would break determinism.
           "-cpu", "qemu64", "-m", f"{topo.total_memory_mib}M",
           # One socket per node: plain -smp N makes one socket spanning every node.
           "-smp", f"{topo.cpus},sockets={topo.cpu_nodes},cores={topo.cpus_per_node},threads=1",
           *clock_args(topo, m.qemu_mode, m.quantum_ns, vcpu_clocks), "-no-reboot",
           "-kernel", str(m.kernel), "-initrd", str(m.initrd),
           "-append", ("console=ttyS0 panic=-1 nokaslr mitigations=off " + m.append).strip()]
    cmd += numa_args(topo, m.hmat)
    if m.plugin is not None:
        cmd += ["-plugin", f"{m.plugin[0]},config={m.plugin[1]}"]
    if m.job is not None:
        cmd += ["-device", "vmlab-ctl"]
    return cmd + disks(m.swap, m.data, m.disk, job_image=m.job)


def disks(swap_image: Path | None, data_image: Path | None, disk=None, sg_chain: bool = True,
          job_image: Path | None = None) -> list[str]:
    """virtio-blk disks: swap first, then the guest's data disk (so it is
    /dev/vdb, or /dev/vda without swap). With a disk model every request
    completes at its modelled guest time (series patch 0005); ioeventfd off
    so a request is taken in the notifying vCPU's own time, not when the
    host's main loop gets to it.

    sg_chain=False is for guests whose kernel cannot chain scatterlists
    (Alpha selects ARCH_NO_SG_CHAIN). QEMU then advertises seg_max 126
    instead of queue size - 2 = 254: Linux 6.1's virtio_blk takes seg_max as
    the queue's max_segments, but without chaining sg_alloc_table_chained()
    refuses more than 128 entries, so a merged swap-out of 160 pages failed
    with BLK_STS_RESOURCE on every retry while its bios held fs_bio_set's
    reserve: the swap stall on es-clipper-4."""
    model = "" if sg_chain else ",seg-max-adjust=off"
    if disk is not None:
        model += (f",ioeventfd=off,x-vmlab-read-ns={disk.read_ns},x-vmlab-write-ns={disk.write_ns},"
                  f"x-vmlab-mbps={disk.mbps},x-vmlab-servers={disk.servers}")
    out = []
    for img, name in ((swap_image, "swap"), (data_image, "data"), (job_image, "job")):
        if img is not None:
            out += ["-drive", f"file={img},if=none,format=raw,id={name},cache=unsafe",
                    "-device", f"virtio-blk-pci,drive={name}{model}"]
    return out


def alpha_command_line(m: Machine, *, binary: Path, vcpu_clocks: bool = True) -> list[str]:
    """QEMU's clipper (DP264, 21264 CPUs): the ELF vmlinux is loaded by QEMU
    with its own PALcode; at most 4 CPUs and one memory (the topology stage
    refuses more), so no NUMA arguments. Its PCI bus takes virtio-blk."""
    topo = m.topo
    cmd = [str(binary), "-machine", "clipper", "-nodefaults", "-display", "none", "-monitor", "none",
           "-cpu", "ev67", "-m", f"{topo.total_memory_mib}M", "-smp", str(topo.cpus),
           *clock_args(topo, m.qemu_mode, m.quantum_ns, vcpu_clocks), "-no-reboot",
           "-kernel", str(m.kernel), "-initrd", str(m.initrd),
           "-append", ("console=ttyS0 panic=-1 " + m.append).strip()]
    if m.job is not None:
        cmd += ["-device", "vmlab-ctl"]  # on the clipper's ISA bus, as on q35's
    return cmd + disks(m.swap, m.data, m.disk, sg_chain=False, job_image=m.job)


def boot_timeout_s(topo, mode: str, slowdown: float = 1.0) -> float:
    """Measured: 32 CPUs boot in ~135 s under icount, ~86 s under MTTCG
    (QEMU 10.0.2, this class of host); 3x margin for a loaded machine, and
    the timing mode's slowdown on top (timing/modes.py; a 1-CPU detailed boot took over
    104 s with four guests sharing 2 host cores)."""
    per_cpu = 4.5 if mode == "icount" else 3.0
    return (90 + 3 * per_cpu * topo.cpus) * slowdown


PANIC = re.compile(re.escape(PANIC_LINE) + ".*")
VCPU_CLOCK = re.compile(r"^vmlab-clock: cpu (\d+) insns (\d+) stall_ps (\d+) clock_ps (\d+)$", re.M)


def vcpu_clocks(qemu_log: Path) -> list[tuple[int, int, int, int]]:
    """(cpu, instructions, stall ps, clock ps) per vCPU, as our QEMU prints
    them at exit (patch 0002); empty if it did not get that far."""
    try:
        text = qemu_log.read_text(errors="replace")
    except OSError:
        return []
    return [tuple(map(int, m.groups())) for m in VCPU_CLOCK.finditer(text)]


SCHED_COUNTS = re.compile(r"^vmlab-clock: slices (\d+) pauses (\d+) pauses_kept (\d+)$", re.M)


def sched_counts(qemu_log: Path) -> dict[str, int]:
    """The round-robin scheduler's counts at exit (patches 0002 and 0003): slices picked,
    x86 PAUSEs run by all vCPUs (spin-loop turns), and those that kept their
    slice; empty if QEMU did not print them."""
    try:
        m = SCHED_COUNTS.search(qemu_log.read_text(errors="replace"))
    except OSError:
        return {}
    return dict(zip(("slices", "pauses", "pauses_kept"), map(int, m.groups()))) if m else {}


def supervise(cmd: list[str], console: Path, qemu_log: Path, boot_timeout: float, run_timeout: float,
              on_record=None, on_tick=None, poll_s: float = 0.25) -> Outcome:
    """Run QEMU with its serial console going to `console`; follow the console
    for records; stop the guest on panic, timeout or Ctrl-C."""
    cmd = list(cmd) + ["-serial", f"file:{console}"]
    console.write_bytes(b"")
    t0 = time.monotonic()
    parsed = rec.Parsed()
    boot_at = end_at = None
    pending = b""
    lineno = 0
    reason = ""
    status = None
    with open(qemu_log, "wb") as ql:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=ql, stderr=subprocess.STDOUT,
                                start_new_session=True)  # Ctrl-C reaches us, not QEMU
        try:
            with open(console, "rb") as cf:
                while True:
                    chunk = cf.read()
                    exited = proc.poll() is not None
                    if chunk:
                        pending += chunk
                        *lines, pending = pending.split(b"\n")
                        for raw in lines:
                            lineno += 1
                            line = raw.decode("utf-8", errors="replace").replace("\r", "")
                            n_before = len(parsed.records)
                            rec.parse_line(line, lineno, parsed)
                            for r in parsed.records[n_before:]:
                                r.host_s = round(time.monotonic() - t0, 3)
                                if r.type == "machine" and boot_at is None:
                                    boot_at = time.monotonic() - t0
                                if r.type == "end":
                                    end_at = time.monotonic()
                                if on_record:
                                    on_record(r)
                            m = PANIC.search(line)
                            if m and not reason:
                                reason = m.group(0)
                    now = time.monotonic()
                    if on_tick:
                        on_tick(now - t0, boot_at)
                    if exited and not chunk:
                        break
                    if end_at is not None and now - end_at > 30:
                        break  # the records are complete; a slow poweroff is not a failure
                    if reason and not exited:
                        time.sleep(1)  # let the panic's backtrace reach the log
                        status = "failed"
                        break
                    if boot_at is None and now - t0 > boot_timeout:
                        status, reason = "failed", f"timeout: no boot record within {boot_timeout:.0f} s"
                        break
                    if boot_at is not None and end_at is None and now - t0 - boot_at > run_timeout:
                        status, reason = "failed", f"timeout: experiment ran past {run_timeout:.0f} s"
                        break
                    if not chunk:
                        time.sleep(poll_s)
                if pending:
                    lineno += 1
                    rec.parse_line(pending.decode("utf-8", errors="replace"), lineno, parsed)
        except KeyboardInterrupt:
            _stop(proc)
            return Outcome("aborted", "interrupted (Ctrl-C)", time.monotonic() - t0, boot_at, proc.returncode, parsed)
        rc = _stop(proc)
    wall = time.monotonic() - t0
    if status is None:
        if end_at is not None:
            status, reason = "ok", ""
            if parsed.first("end").body.get("rc", 0) != 0:
                status, reason = "failed", f"{EXIT_STATUS} {parsed.first('end').body.get('rc')}"
        elif reason:
            status = "failed"
        else:
            status = "failed"
            tail = qemu_log.read_text(errors="replace").strip().splitlines()[-1:] if qemu_log.exists() else []
            reason = (f"guest stopped before its end record (QEMU exit status {rc})"
                      + (f": {tail[0][:200]}" if tail else ""))
    return Outcome(status, reason, wall, boot_at, rc, parsed)


def _stop(proc: subprocess.Popen) -> int | None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=10)
        except (subprocess.TimeoutExpired, ProcessLookupError):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
    return proc.returncode
