"""Address translation as the timing model prices it (timing/model_tlb.h):
the TLB arrays of each CPU, the second-level TLB's hit latency, the
paging-structure caches and the page walkers. The topology file's optional
[tlb] table; without one, the native core's figures below with their
sources; `model = "none"` in it turns translation off (the model before
version 3: no TLB, no walk).

An array: level ("l1d", "l1i" or "l2"), the page sizes it holds ("4k",
"2m", "1g"), entries and ways (entries / ways sets, a power of two). The
first-level data and instruction arrays are needed.
"""
from __future__ import annotations

from dataclasses import dataclass

LEVELS = ("l1d", "l1i", "l2")
SIZES = ("4k", "2m", "1g")
MAX_ARRAYS = 8      # model_tlb.h MAX_TLBS
MAX_WALKERS = 4     # MAX_WALKERS
MAX_PSC = 64        # MAX_PSC
PSC = ("pde", "pdpte", "pml4e")


@dataclass(frozen=True)
class Array:
    level: str
    sizes: tuple[str, ...]
    entries: int
    ways: int

    def line(self) -> str:
        return f"tlb {self.level} {','.join(self.sizes)} {self.entries} {self.ways}"

    def describe(self) -> str:
        assoc = "fully associative" if self.ways == self.entries else f"{self.ways}-way"
        sizes = "+".join(s.upper().replace("K", " KiB").replace("M", " MiB").replace("G", " GiB") for s in self.sizes)
        return f"{self.level} {sizes} {self.entries} entries {assoc}"


@dataclass(frozen=True)
class Tlb:
    arrays: tuple[Array, ...] = ()
    l2_latency_cycles: int = 0
    psc: tuple[int, int, int] = (0, 0, 0)   # pde, pdpte, pml4e entries
    walkers: int = 1
    source: str = ""

    @property
    def on(self) -> bool:
        return bool(self.arrays)

    def config_lines(self) -> list[str]:
        """The timing model's config lines (timing/model_tlb.c model_tlb_parse)."""
        if not self.on:
            return []
        return [*(a.line() for a in self.arrays), f"tlb_l2_cycles {self.l2_latency_cycles}",
                *(f"psc {n} {e}" for n, e in zip(PSC, self.psc)), f"walkers {self.walkers}"]

    def describe(self) -> str:
        if not self.on:
            return "no TLB (translation not priced)"
        psc = ", ".join(f"{n.upper()} {e}" for n, e in zip(PSC, self.psc) if e) or "none"
        return ("; ".join(a.describe() for a in self.arrays)
                + (f"; second-level hit {self.l2_latency_cycles} cycles"
                   if any(a.level == "l2" for a in self.arrays) else "")
                + f"; paging-structure caches: {psc}; {self.walkers} page walker{'s' if self.walkers > 1 else ''}")


# Skylake-SP / Cascade Lake-SP (the x86 shapes)
SKYLAKE_SP = Tlb(
    arrays=(Array("l1d", ("4k",), 64, 4), Array("l1d", ("2m",), 32, 4), Array("l1d", ("1g",), 4, 4),
            Array("l1i", ("4k",), 128, 8), Array("l1i", ("2m",), 8, 8),
            Array("l2", ("4k", "2m"), 1536, 12), Array("l2", ("1g",), 16, 4)),
    l2_latency_cycles=9, psc=(32, 4, 2), walkers=2,
    source="Skylake-SP/Cascade Lake-SP: L1 DTLB 64 x 4 KiB (4-way), 32 x 2 MiB, 4 x 1 GiB; L1 ITLB 128 x 4 KiB "
           "(8-way), 8 x 2 MiB; STLB 1536 entries, 12-way, shared by 4 KiB and 2 MiB pages, 16 x 1 GiB (Intel "
           "Optimization Reference Manual, Skylake Server TLB table; cpuid dump and AnandTech, shared/probes/"
           "hardware-anchors.md B; the 2 MiB L1 and 1 GiB STLB rows unconfirmed there); 2 page walkers (same "
           "manual, Skylake). Not published, estimates: STLB hit 9 cycles, paging-structure caches of 32 PDE, 4 "
           "PDPTE and 2 PML4E entries (hardware-anchors.md B: no authoritative source)")
# The EV7's core is the 21264's: one fully associative DTB and ITB, filled by PALcode
EV7 = Tlb(
    arrays=(Array("l1d", ("4k", "2m", "1g"), 128, 128), Array("l1i", ("4k", "2m", "1g"), 128, 128)),
    l2_latency_cycles=0, psc=(0, 0, 0), walkers=1,
    source="Alpha 21264/21364 core: 128-entry fully associative DTB and ITB, every page size through granularity "
           "hints, no second-level TLB (Compaq, Alpha 21264 Microprocessor Hardware Reference Manual; R. Kessler, "
           "IEEE Micro 1999). Its PALcode fill is priced as the x86 guest's hardware walk with no paging-structure "
           "caches, one walk at a time: the PALcode trap itself is not priced")
NATIVE = {"x86_64": SKYLAKE_SP, "alpha": EV7}


def parse(r, path, native_isa: str, error) -> Tlb:
    """The [tlb] table through the topology's reader r, over the native
    core's figures; error(path, field, expected) builds the one-line error."""
    base = NATIVE.get(native_isa, SKYLAKE_SP)
    if r.get("tlb", dict, required=False) is None:
        return base
    model = r.get("tlb.model", str, required=False, default="native", check=lambda v: v in ("native", "none"),
                  expected="'native' or 'none'")
    if model == "none":
        return Tlb()
    arrays = base.arrays
    raw = r.get("tlb.arrays", list, required=False, default=None, expected="a list of {level, sizes, entries, ways}")
    if raw is not None:
        out = []
        for i, a in enumerate(raw):
            f = f"tlb.arrays[{i}]"
            if not isinstance(a, dict) or set(a) != {"level", "sizes", "entries", "ways"}:
                raise error(path, f, "a table with level, sizes, entries and ways")
            if a["level"] not in LEVELS:
                raise error(path, f + ".level", f"one of {', '.join(LEVELS)}, got {a['level']!r}")
            if not (isinstance(a["sizes"], list) and a["sizes"] and all(s in SIZES for s in a["sizes"])):
                raise error(path, f + ".sizes", f"a list of page sizes from {', '.join(SIZES)}, got {a['sizes']!r}")
            e, w = a["entries"], a["ways"]
            if not (type(e) is int and type(w) is int and 0 < w <= e and e % w == 0
                    and (e // w) & (e // w - 1) == 0):
                raise error(path, f + ".entries", f"entries a multiple of ways with a power-of-two number of sets, "
                                                  f"got {e!r} entries, {w!r} ways")
            out.append(Array(a["level"], tuple(a["sizes"]), e, w))
        if len(out) > MAX_ARRAYS:
            raise error(path, "tlb.arrays", f"at most {MAX_ARRAYS} arrays, got {len(out)}")
        for lv in ("l1d", "l1i"):
            if not any(a.level == lv for a in out):
                raise error(path, "tlb.arrays", f"an array of level {lv!r}")
        arrays = tuple(out)
    cyc = r.get("tlb.l2_latency_cycles", int, required=False, default=base.l2_latency_cycles,
                check=lambda v: 0 <= v <= 1000, expected="a whole number of cycles from 0 to 1000")
    psc = tuple(r.get(f"tlb.paging_structure_caches.{n}", int, required=False, default=d,
                      check=lambda v: 0 <= v <= MAX_PSC, expected=f"0 to {MAX_PSC} entries")
                for n, d in zip(PSC, base.psc))
    walkers = r.get("tlb.walkers", int, required=False, default=base.walkers, check=lambda v: 1 <= v <= MAX_WALKERS,
                    expected=f"1 to {MAX_WALKERS} concurrent walks")
    src = r.get("tlb.source", str, required=False, default="", expected="a citation for the TLB's figures")
    return Tlb(arrays, cyc, psc, walkers, src or base.source)
