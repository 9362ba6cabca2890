"""The core a topology's CPUs have, as the timing model's memory-level
parallelism needs it (timing/model_core.h): how many misses it keeps in
flight, how far it runs past the oldest, its store buffer and its L2
streamer. The topology file's optional [core] table; without one, the
figures of the machine's native core (native_isa) below, with their sources.

Limits are the model's fixed arrays (model_core.h MAX_*; a test reads them
from there): a figure past them, zero where one is needed, a float or a bool
is refused with the field named.
"""
from __future__ import annotations

from dataclasses import dataclass

MODELS = ("out-of-order", "blocking")
# field -> (lowest, highest): the highest is model_core.h's array size
LIMITS = {
    "fill_buffers": (1, 64),        # MAX_FB
    "l2_queue": (1, 128),           # MAX_SQ
    "reorder_window": (1, 4096),    # MAX_ROB
    "store_buffer": (1, 256),       # MAX_SB
    "prefetch_streams": (0, 64),    # MAX_STREAMS (0: no streamer)
    "prefetch_distance": (0, 63),   # MAX_PF_DIST: lines ahead within a 4 KiB page
}


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

    def config_lines(self) -> list[str]:
        """The timing model's config lines (timing/model_config.c parse_core)."""
        return [f"core {'ooo' if self.model == 'out-of-order' else 'blocking'}",
                f"fill_buffers {self.fill_buffers}", f"l2_queue {self.l2_queue}", f"rob {self.reorder_window}",
                f"store_buffer {self.store_buffer}", f"prefetch_streams {self.prefetch_streams}",
                f"prefetch_distance {self.prefetch_distance}"]

    def describe(self) -> str:
        if self.model == "blocking":
            return "blocking core (every miss stalls its full latency, one after another)"
        pf = (f"L2 streamer {self.prefetch_streams} streams x {self.prefetch_distance} lines"
              if self.prefetch_streams and self.prefetch_distance else "no hardware prefetch")
        return (f"out-of-order core: {self.fill_buffers} fill buffers, {self.l2_queue} L2 queue entries, "
                f"{self.reorder_window}-instruction window, {self.store_buffer}-entry store buffer, {pf}")


# The native cores' figures. Skylake-SP / Cascade Lake-SP (the x86 shapes):
SKYLAKE_SP = Core(
    fill_buffers=12, l2_queue=16, reorder_window=224, store_buffer=56, prefetch_streams=32, prefetch_distance=20,
    source="Skylake-SP/Cascade Lake-SP core: 12 L1D fill buffers and a 16-entry L2 superqueue (community "
           "measurements, shared/probes/hardware-anchors.md A6), 224-entry ROB and 56-entry store buffer (Intel "
           "Optimization Reference Manual, Skylake microarchitecture), L2 streamer: 32 streams, up to 20 lines "
           "ahead within a 4 KiB page (same manual, 'Data prefetching')")
# The EV7's core is the 21264's (EV68):
EV7 = Core(
    fill_buffers=8, l2_queue=16, reorder_window=80, store_buffer=32, prefetch_streams=0, prefetch_distance=0,
    source="Alpha 21364 (EV7) = the 21264 core: 8-entry miss address file, 80 instructions in flight, 32-entry "
           "store queue, no hardware data prefetcher (software prefetch only) (R. Kessler, The Alpha 21264 "
           "Microprocessor, IEEE Micro 1999); 16 outstanding L2 misses: the 21364's miss buffer reported doubled to "
           "16 (Microprocessor Report 1998; unconfirmed, shared/probes/hardware-anchors.md C)")
NATIVE = {"x86_64": SKYLAKE_SP, "alpha": EV7}


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
        raise error(path, "core.prefetch_distance", "0 exactly when core.prefetch_streams is 0 (no streamer), got "
                                                    f"{vals['prefetch_distance']} with {vals['prefetch_streams']} streams")
    src = r.get("core.source", str, required=False, default="", expected="a citation for the core's figures")
    return Core(**vals, source=src or base.source)
