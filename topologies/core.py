"""The core a topology's CPUs have, as the timing model needs it
(timing/model_core.h): how many misses it keeps in flight, how far it runs
past the oldest, its store buffer and its L2 streamer; and its pipeline: how
many instructions it dispatches a cycle, each class of instruction's latency,
execution units and issue occupancy, and its branch prediction (direction
predictor, BTB, return stack) with what a mispredict costs. The topology
file's optional [core] table and its [core.exec] table; without them, the
figures of the machine's native core (native_isa) below, with their sources.
A [core.exec] table that names some classes keeps the native figures of the
others.

Limits: the miss-parallelism figures are the model's fixed arrays
(model_core.h MAX_*; a test reads them from there); the pipeline's are the
ranges PIPELINE_LIMITS and EXEC_LIMITS say, the ones timing/model_config.c
accepts (width, units and return stack: model_core.h's MAX_WIDTH, MAX_UNITS,
MAX_RAS, tested too). A figure past them, zero where
one is needed, a float, a string or a bool is refused with the field named.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

MODELS = ("out-of-order", "blocking")
PREDICTORS = ("gshare", "tournament")
# field -> (lowest, highest): the highest is model_core.h's array size
LIMITS = {
    "fill_buffers": (1, 64),        # MAX_FB
    "l2_queue": (1, 128),           # MAX_SQ
    "reorder_window": (1, 4096),    # MAX_ROB
    "store_buffer": (1, 256),       # MAX_SB
    "prefetch_streams": (0, 64),    # MAX_STREAMS (0: no streamer)
    "prefetch_distance": (0, 63),   # MAX_PF_DIST: lines ahead within a 4 KiB page
}
# The pipeline's figures: field -> (lowest, highest, power of two only)
PIPELINE_LIMITS = {
    "width": (1, 16, False),                      # instructions dispatched per cycle
    "mispredict_cycles": (1, 100, False),         # a mispredicted branch's redirect, cycles
    "load_index_extra_cycles": (0, 10, False),    # an indexed address's extra L1 load-to-use cycles
    "predictor_entries": (16, 1 << 20, True),     # the direction predictor's (global) counters
    "history_bits": (0, 30, False),               # global history bits
    "btb_entries": (1, 65536, True),              # branch target buffer
    "return_stack": (1, 64, False),               # return address stack
}
# The classes of instruction the model prices, in the order of its config's exec lines
# (timing/model.h VM_EXEC_CLASSES, which a test compares with this)
CLASSES = ("alu", "mul", "div32", "div64", "fpadd", "fpmul", "fpdiv", "vec", "load", "store", "branch", "serial")
# [latency_cycles, units, busy_cycles]: each figure's name and (lowest, highest)
EXEC_FIGURES = ("latency_cycles", "units", "busy_cycles")
EXEC_LIMITS = {"latency_cycles": (1, 1000), "units": (1, 16), "busy_cycles": (1, 1000)}


class Exec(NamedTuple):
    """One class of instruction: its latency (a load's: the L1 load-to-use),
    how many of its units may start one a cycle, and the cycles each occupies
    its unit (1: pipelined; the reciprocal throughput of an unpipelined one)."""
    latency: int
    units: int
    busy: int


def _table(**kw) -> tuple[tuple[str, Exec], ...]:
    assert set(kw) == set(CLASSES), set(CLASSES) ^ set(kw)
    return tuple((c, Exec(*kw[c])) for c in CLASSES)


# Skylake-SP's execution figures (SKYLAKE_SP below says where they are from)
SKYLAKE_EXEC = _table(alu=(1, 4, 1), mul=(3, 1, 1), div32=(26, 1, 6), div64=(35, 1, 21), fpadd=(4, 2, 1),
                      fpmul=(4, 2, 1), fpdiv=(14, 1, 4), vec=(1, 3, 1), load=(4, 2, 1), store=(1, 1, 1),
                      branch=(1, 2, 1), serial=(33, 1, 33))


@dataclass(frozen=True)
class Core:
    model: str = "out-of-order"
    fill_buffers: int = 12
    l2_queue: int = 16
    reorder_window: int = 224
    store_buffer: int = 56
    prefetch_streams: int = 32
    prefetch_distance: int = 20
    source: str = ""
    width: int = 4
    mispredict_cycles: int = 17
    load_index_extra_cycles: int = 1
    predictor: str = "gshare"
    predictor_entries: int = 65536
    history_bits: int = 16
    btb_entries: int = 4096
    return_stack: int = 16
    # (class, Exec) for every class of CLASSES, in that order
    exec_table: tuple[tuple[str, Exec], ...] = SKYLAKE_EXEC

    def exec_of(self, cls: str) -> Exec:
        return dict(self.exec_table)[cls]

    def insn_ps(self, cycle_ps: int) -> int:
        """The engine's time per instruction: the core's best case, `width`
        instructions a cycle (at least 1 ps)."""
        return max(1, cycle_ps // self.width)

    def config_lines(self, cycle_ps: int) -> list[str]:
        """The timing model's config lines (timing/model_config.c parse_core and
        parse_exec), every class's exec line among them; cycle_ps: the topology's
        cycle (Topology.cycle_ps), for insn_ps."""
        return [f"core {'ooo' if self.model == 'out-of-order' else 'blocking'}",
                f"fill_buffers {self.fill_buffers}", f"l2_queue {self.l2_queue}", f"rob {self.reorder_window}",
                f"store_buffer {self.store_buffer}", f"prefetch_streams {self.prefetch_streams}",
                f"prefetch_distance {self.prefetch_distance}",
                f"width {self.width}",
                *(f"exec {c} {e.latency} {e.units} {e.busy}" for c, e in self.exec_table),
                f"mispredict {self.mispredict_cycles}", f"load_index_extra {self.load_index_extra_cycles}",
                f"predictor {self.predictor} {self.predictor_entries} {self.history_bits}",
                f"btb {self.btb_entries}", f"ras {self.return_stack}", f"insn_ps {self.insn_ps(cycle_ps)}"]

    def describe(self) -> str:
        pipe = (f"{self.width}-wide dispatch, {self.mispredict_cycles}-cycle mispredict penalty, {self.predictor} "
                f"predictor ({self.predictor_entries} entries, {self.history_bits} history bits, "
                f"{self.btb_entries}-entry BTB, {self.return_stack}-entry return stack)")
        if self.model == "blocking":
            return f"blocking core (every miss stalls its full latency, one after another), {pipe}"
        pf = (f"L2 streamer {self.prefetch_streams} streams x {self.prefetch_distance} lines"
              if self.prefetch_streams and self.prefetch_distance else "no hardware prefetch")
        return (f"out-of-order core: {pipe}, {self.fill_buffers} fill buffers, {self.l2_queue} L2 queue entries, "
                f"{self.reorder_window}-instruction window, {self.store_buffer}-entry store buffer, {pf}")


# The native cores' figures. Skylake-SP / Cascade Lake-SP (the x86 shapes).
# Execution: [latency_cycles, units, busy_cycles] from uops.info and Agner
# Fog's instruction tables (Skylake-X), ports from the Intel Optimization
# Reference Manual (Skylake microarchitecture):
#   alu    ADD/AND/... r64: 1 cycle on 4 ports (p0156)
#   mul    IMUL r64,r64: 3 cycles, port 1 only, pipelined
#   div32  DIV r32: 26 cycles, reciprocal throughput 6 (one divider)
#   div64  DIV r64: 35-88 cycles latency, 21-83 reciprocal throughput
#          (operand-dependent): the fast end, [35, 1, 21]
#   fpadd  ADDSD: 4 cycles, 2 ports (p01)      fpmul  MULSD: 4 cycles, p01
#   fpdiv  DIVSD: 13-14 cycles, reciprocal throughput 4
#   vec    integer SIMD and moves (PADDQ, MOVDQA r,r): 1 cycle, 3 ports (p015)
#   load   L1 load-to-use 4 cycles for base+displacement, 5 with an index
#          register (load_index_extra_cycles 1), 2 load ports (p23)
#   store  1 store-data port (p4) a cycle
#   branch 1 cycle, 2 branch ports (p0, p6)
#   serial full serialisation as MFENCE: ~33 cycles (Agner Fog), blocking
# Mispredict 17 cycles (Agner Fog's microarchitecture guide: 15-20 on
# Skylake). Predictor: Intel does not publish it; a gshare of 65536 2-bit
# counters and 16 history bits, a 4096-entry BTB and a 16-entry return stack
# stand for it (Agner Fog's microarchitecture guide; Optimization Manual:
# "16-entry return stack buffer").
SKYLAKE_SP = Core(
    fill_buffers=12, l2_queue=16, reorder_window=224, store_buffer=56, prefetch_streams=32, prefetch_distance=20,
    width=4, mispredict_cycles=17, load_index_extra_cycles=1, predictor="gshare", predictor_entries=65536,
    history_bits=16, btb_entries=4096, return_stack=16,
    exec_table=SKYLAKE_EXEC,
    source="Skylake-SP/Cascade Lake-SP core: 12 L1D fill buffers and a 16-entry L2 superqueue (community "
           "measurements, shared/probes/hardware-anchors.md A6), 224-entry ROB and 56-entry store buffer (Intel "
           "Optimization Reference Manual, Skylake microarchitecture), L2 streamer: 32 streams, up to 20 lines "
           "ahead within a 4 KiB page (same manual, 'Data prefetching'); 4-wide dispatch, execution ports and "
           "the 16-entry return stack buffer (same manual); latencies and reciprocal throughputs from uops.info "
           "and Agner Fog's instruction tables (Skylake-X): ALU 1, IMUL r64 3, DIV r32 26 (throughput 6), DIV r64 "
           "35-88 (throughput 21-83; the fast end taken), ADDSD/MULSD 4, DIVSD 14 (throughput 4), integer SIMD 1, "
           "L1 load-to-use 4 (5 with an index register), MFENCE-like serialisation ~33; branch mispredict 17 "
           "cycles (Agner Fog: 15-20 on Skylake); predictor unpublished: a 65536-entry gshare with 16 history "
           "bits and a 4096-entry BTB stand for it")
# The EV7's core is the 21264's (EV68). Execution from the Alpha 21264
# Hardware Reference Manual (Compaq, instruction latencies) and Kessler,
# IEEE Micro 1999: 4 integer pipes (2 of them for loads and stores), one FP
# add and one FP multiply pipe.
#   alu    1 cycle, 4 integer pipes         mul    MULQ: 7 cycles, pipelined, 1 pipe
#   div32, div64: the Alpha has no integer divide instruction; an Alpha guest
#          divides in a software routine of ordinary instructions (priced as
#          those). An x86 guest on an EV7 shape (the ISA substituted) does
#          execute DIV: it is priced as the FP-divide sequence an Alpha
#          compiler emits for an integer divide, CVTQT + DIVT + CVTTQ, 4 + 15
#          + 4 = 23 cycles with the divider busy 12: an estimate, not published
#   fpadd  ADDT: 4 cycles, 1 pipe           fpmul  MULT: 4 cycles, 1 pipe
#   fpdiv  DIVT: 15 cycles, its divider not pipelined (busy 12 of them)
#   vec    MVI (the motion-video byte/word SIMD): 3 cycles, 1 pipe
#   load   L1 load-to-use 3 cycles, 2 load pipes; no indexed addressing
#          mode (load_index_extra_cycles 0)
#   store  2 pipes                          branch 1 cycle, 2 pipes
#   serial MB (memory barrier): 10 cycles, an estimate (not published)
# Mispredict 7 cycles (HRM: "at least 7"). Predictor: the 21264's
# tournament: a global part of 4096 2-bit counters indexed by 12 bits of
# path history (these figures), a local part of 1024 10-bit histories and
# 1024 3-bit counters (fixed in the model) and a 4096-entry chooser. It has a
# line predictor, no BTB: a 1024-entry BTB approximates it. 32-entry return
# stack (HRM).
EV7 = Core(
    fill_buffers=8, l2_queue=16, reorder_window=80, store_buffer=32, prefetch_streams=0, prefetch_distance=0,
    width=4, mispredict_cycles=7, load_index_extra_cycles=0, predictor="tournament", predictor_entries=4096,
    history_bits=12, btb_entries=1024, return_stack=32,
    exec_table=_table(alu=(1, 4, 1), mul=(7, 1, 1), div32=(23, 1, 12), div64=(23, 1, 12), fpadd=(4, 1, 1),
                      fpmul=(4, 1, 1), fpdiv=(15, 1, 12), vec=(3, 1, 1), load=(3, 2, 1), store=(1, 2, 1),
                      branch=(1, 2, 1), serial=(10, 1, 10)),
    source="Alpha 21364 (EV7) = the 21264 core: 8-entry miss address file, 80 instructions in flight, 32-entry "
           "store queue, no hardware data prefetcher (software prefetch only) (R. Kessler, The Alpha 21264 "
           "Microprocessor, IEEE Micro 1999); 16 outstanding L2 misses: the 21364's miss buffer reported doubled to "
           "16 (Microprocessor Report 1998; unconfirmed, shared/probes/hardware-anchors.md C); 4-wide, 4 integer "
           "pipes (2 for loads and stores), one FP add and one FP multiply pipe, MULQ 7, ADDT/MULT 4, DIVT 15 (not "
           "pipelined), MVI 3, L1 load-to-use 3, mispredict at least 7 cycles, tournament predictor (global: 4096 "
           "counters, 12 history bits; local: 1024 10-bit histories, 1024 3-bit counters), 32-entry return stack "
           "(Compaq, Alpha 21264 Hardware Reference Manual; Kessler 1999); no integer divide instruction (an x86 "
           "guest's DIV on this shape is priced as CVTQT + DIVT + CVTTQ, 23 cycles: an estimate); MB's 10 cycles "
           "an estimate; its line predictor approximated by a "
           "1024-entry BTB")
NATIVE = {"x86_64": SKYLAKE_SP, "alpha": EV7}


def _whole(v) -> bool:
    return type(v) is int


def parse(r, path, native_isa: str, error) -> Core:
    """The [core] table through the topology's reader r (its get()), over the
    native core's figures; error(path, field, expected) builds the one-line
    error for a cross-field rule."""
    base = NATIVE.get(native_isa, SKYLAKE_SP)
    if r.get("core", dict, required=False) is None:
        return base
    vals = {"model": r.get("core.model", str, required=False, default=base.model, check=lambda v: v in MODELS,
                           expected=" or ".join(repr(m) for m in MODELS))}
    for name, (lo, hi) in LIMITS.items():
        vals[name] = r.get(f"core.{name}", int, required=False, default=getattr(base, name),
                           check=lambda v, lo=lo, hi=hi: lo <= v <= hi, expected=f"a whole number from {lo} to {hi}")
    if vals["l2_queue"] < vals["fill_buffers"] and vals["model"] == "out-of-order":
        raise error(path, "core.l2_queue", f"at least core.fill_buffers = {vals['fill_buffers']} (every L1 miss "
                                           f"that misses the L2 holds an entry of each), got {vals['l2_queue']}")
    if bool(vals["prefetch_streams"]) != bool(vals["prefetch_distance"]):
        raise error(path, "core.prefetch_distance",
                    "0 exactly when core.prefetch_streams is 0 (no streamer), got "
                    f"{vals['prefetch_distance']} with {vals['prefetch_streams']} streams")
    for name, (lo, hi, pow2) in PIPELINE_LIMITS.items():
        vals[name] = r.get(f"core.{name}", int, required=False, default=getattr(base, name),
                           check=lambda v, lo=lo, hi=hi, p=pow2: lo <= v <= hi and not (p and v & (v - 1)),
                           expected=f"a {'power of two' if pow2 else 'whole number'} from {lo} to {hi}")
    vals["predictor"] = r.get("core.predictor", str, required=False, default=base.predictor,
                              check=lambda v: v in PREDICTORS, expected=" or ".join(repr(p) for p in PREDICTORS))
    vals["exec_table"] = _parse_exec(r, path, base, error)
    src = r.get("core.source", str, required=False, default="", expected="a citation for the core's figures")
    return Core(**vals, source=src or base.source)


def _parse_exec(r, path, base: Core, error) -> tuple[tuple[str, Exec], ...]:
    """[core.exec]: class = [latency_cycles, units, busy_cycles], over the
    native core's figure for every class it does not name."""
    shape = "[latency_cycles, units, busy_cycles]"
    tab = r.get("core.exec", dict, required=False, default={},
                expected=f"a table of instruction class = {shape}, e.g. div64 = [35, 1, 21]")
    for cls in tab:
        if cls not in CLASSES:
            raise error(path, f"core.exec.{cls}", f"one of the known classes {', '.join(CLASSES)}; got an unknown "
                                                  f"class {cls!r}")
    out = dict(base.exec_table)
    for cls in CLASSES:
        if cls not in tab:
            continue
        field = f"core.exec.{cls}"
        v = r.get(field, list, check=lambda v: len(v) == 3, expected=f"a list of three whole numbers {shape}")
        for name, x in zip(EXEC_FIGURES, v):
            lo, hi = EXEC_LIMITS[name]
            if not (_whole(x) and lo <= x <= hi):
                raise error(path, field, f"{shape} with {name} a whole number from {lo} to {hi}, got {x!r}")
        out[cls] = Exec(*v)
    return tuple((c, out[c]) for c in CLASSES)
