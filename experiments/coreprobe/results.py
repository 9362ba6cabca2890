"""coreprobe's results: its "core" records (one per test, by the guest's own
clock) in the typed table `coreprobe`, and its part of the summary: each
figure beside the topology's own (its [core] execution figures, L1 and
memory latency, misprediction penalty: topologies/core.py) and the published
one for the machine the topology models (PUBLISHED, with sources)."""
from __future__ import annotations

from analysis import kit
from analysis.kit import RUN_ID, Column, Table
from topologies import core as core_module

QUERY_TABLE = "coreprobe"

# The tests in the order the guest runs them (coreprobe.c), the unit each
# one's figure is read in: cycles per operation, ns per load, GB/s, ns or us
TESTS = ("dep_add", "indep_add", "imul", "div32", "div64", "fpadd", "fpmul", "l1_load", "branch_predictable",
         "branch_random", "branch_mispredict", "index_chase", "pointer_chase", "scalar_sum", "syscall",
         "page_fault", "fork")
KERNEL = ("syscall", "page_fault", "fork")
MEMORY = ("index_chase", "pointer_chase")

CORE = Table("coreprobe", "coreprobe: one core's instruction latencies and throughput, L1 and memory load latency, "
             "branch misprediction penalty, scalar sum bandwidth, null syscall, page fault and fork, on the guest "
             "clock (one row per test).", (
                 RUN_ID,
                 Column("name", "TEXT", "the test (experiments/coreprobe/coreprobe.c lists them)", not_null=True),
                 Column("iterations", "INTEGER", "operations per timed pass"),
                 Column("reps", "INTEGER", "timed passes after one warm-up pass"),
                 Column("ns_per_op", "REAL", "guest ns per operation, best pass"),
                 Column("ns_mean", "REAL", "guest ns per operation, mean of the passes"),
                 Column("cycles_per_op", "REAL", "ns_per_op at the topology's clock"),
                 Column("clock_ghz", "REAL"),
                 Column("gbps", "REAL", "scalar_sum's GB/s (bytes / best pass)"),
                 Column("impl", "TEXT", "x86_64 asm, or c (portable fallback: Alpha)"),
                 Column("cpu", "INTEGER"),
                 Column("node", "INTEGER"),
                 Column("pinned", "INTEGER", "1 if the probe ran pinned to its CPU"),
                 Column("on_node", "REAL", "share of the buffer's sampled pages on the CPU's node"),
                 Column("skipped", "INTEGER", "1 if the test could not run (note says why)", not_null=True,
                        default=0),
                 Column("note", "TEXT"),
             ), key=("run_id", "name"))
TABLES = (CORE,)
SCHEMA = kit.schema(*TABLES)  # versioned: a new table or column takes the next step (analysis/kit.py)

# Published figures, per native ISA of the machine modeled: test -> (low,
# high, unit, source). Cycles for the core's tests; high None: "at least low".
PUBLISHED = {
    "x86_64": {
        "dep_add": (1, 1, "cycles", "ADD r64, r64 latency (uops.info; Agner Fog, Instruction tables: Skylake-X / "
                                    "Cascade Lake)"),
        "indep_add": (0.25, 0.25, "cycles", "4 ADD r64 per cycle on ports 0, 1, 5, 6 (uops.info)"),
        "imul": (3, 3, "cycles", "IMUL r64, r64 latency (uops.info; Agner Fog)"),
        "div32": (26, 26, "cycles", "DIV r32 latency (Agner Fog, Instruction tables, Skylake)"),
        "div64": (35, 88, "cycles", "DIV r64 latency, operand dependent (Agner Fog, Skylake); this test's "
                                    "128-bit dividends are the slow end"),
        "fpadd": (4, 4, "cycles", "ADDSD latency (uops.info)"),
        "fpmul": (4, 4, "cycles", "MULSD latency (uops.info)"),
        "l1_load": (4, 4, "cycles", "L1D load-to-use, base + displacement (5 with an index register): Intel "
                                    "Optimization Reference Manual; Agner Fog, The microarchitecture of Intel, AMD "
                                    "and VIA CPUs"),
        "branch_mispredict": (15, 20, "cycles", "branch misprediction penalty (Agner Fog, The microarchitecture "
                                                "of Intel, AMD and VIA CPUs: Skylake)"),
        "page_fault": (2900, 2900, "ns", "will-it-scale page_fault1, 16 processes on a 2-socket E5-2650 v4 "
                                         "(Broadwell 2.2 GHz, not Cascade Lake): 346,634 faults/s per process, "
                                         "~2.9 us per 4 KiB fault with zeroing and munmap amortised (Zi Yan, "
                                         "linux-mm; shared/probes/hardware-anchors.md D)"),
    },
    "alpha": {
        "dep_add": (1, 1, "cycles", "integer operate latency (Compaq, Alpha 21264 Hardware Reference Manual)"),
        "imul": (7, 7, "cycles", "MULQ latency (Alpha 21264 Hardware Reference Manual)"),
        "l1_load": (3, 3, "cycles", "integer L1D load-to-use (R. Kessler, The Alpha 21264 Microprocessor, IEEE "
                                    "Micro 1999)"),
        "branch_mispredict": (7, None, "cycles", "branch misprediction, at least 7 cycles (Kessler 1999)"),
    },
}


def configured(topo) -> dict[str, tuple[float, str, str]]:
    """What the topology itself says each test should take: test -> (value,
    unit, where from). The core's execution classes, width and
    misprediction penalty (topologies/core.py, [core] and [core.exec]), the
    L1 (the load class's latency) and the memory latency. An Alpha guest
    divides in a software routine (the ISA has no divide): its div tests
    have no class figure."""
    out: dict[str, tuple[float, str, str]] = {}
    core = topo.core
    tests = (("dep_add", "alu"), ("imul", "mul"), ("div32", "div32"), ("div64", "div64"), ("fpadd", "fpadd"),
             ("fpmul", "fpmul"))
    for test, cls in tests:
        if topo.guest_isa == "alpha" and cls.startswith("div"):
            continue
        out[test] = (float(core.exec_of(cls).latency), "cycles", f"[core.exec] {cls} latency")
    alu = core.exec_of("alu")
    # four chains of latency-bound adds, at most `units` adds and `width` instructions a cycle
    out["indep_add"] = (max(alu.latency / 4, alu.busy / alu.units, 1 / core.width), "cycles",
                        "max(alu latency / 4 chains, alu busy / units, 1 / width)")
    out["l1_load"] = (float(core.exec_of("load").latency), "cycles", "[core.exec] load latency (base register)")
    out["branch_mispredict"] = (float(core.mispredict_cycles), "cycles", "core.mispredict_cycles")
    for test in MEMORY:
        out[test] = (float(topo.local_latency_ns), "ns", "memory.local_latency_ns")
    return out


def ingest(con, run_id: int, parsed, topo) -> None:
    for r in parsed.of("core"):
        b = r.body
        note = b.get("note") or "; ".join(f"{k} {b[k]}" for k in ("pattern", "derived_from", "call", "minflt",
                                                                   "page_bytes") if k in b) or None
        CORE.insert(con, CORE.from_body(b, run_id=run_id, note=note))


def rows(con, run_id: int) -> dict[str, dict]:
    """name -> its coreprobe row (as a dict), in the probe's order (TESTS; a study's merge may store them in
    another)."""
    got = {r["name"]: dict(r) for r in con.execute("SELECT * FROM coreprobe WHERE run_id = ?", (run_id,))}
    order = {t: i for i, t in enumerate(TESTS)}
    return dict(sorted(got.items(), key=lambda kv: order.get(kv[0], len(order))))


def _value(row: dict, unit: str) -> float | None:
    """The row's figure in the unit a reference is given in."""
    if unit == "cycles":
        return row["cycles_per_op"]
    if unit == "GB/s":
        return row["gbps"]
    return row["ns_per_op"]


def _ref(v: float | None, lo: float, hi: float | None, unit: str) -> str:
    shown = f"{lo:g}" if hi == lo else f">= {lo:g}" if hi is None else f"{lo:g}-{hi:g}"
    if v is None:
        return f"{shown} {unit}"
    mid = lo if hi is None else (lo + hi) / 2
    return f"{shown} {unit} ({100 * (v - mid) / mid:+.0f} %)"


def figures(con, run_id: int, r, params: dict, w) -> None:
    got = rows(con, run_id)
    if not got:
        return
    topo, mode = kit.run_topology(con, run_id), r["timing_mode"]
    conf, pub = configured(topo), PUBLISHED.get(topo.native_isa, {})
    native = core_module.NATIVE.get(topo.native_isa)
    if native is None or (topo.core.exec_table, topo.core.width, topo.core.mispredict_cycles) != (
            native.exec_table, native.width, native.mispredict_cycles):
        pub = {}  # a core of its own: the native machine's published figures are not its
    first = next(iter(got.values()))
    ghz = next((x["clock_ghz"] for x in got.values() if x["clock_ghz"]), None)
    w(f"\ncoreprobe ({mode} timing; {topo.core.describe()}): guest clock, CPU {first['cpu']} (node "
      f"{first['node']}{'' if first['pinned'] else ', not pinned'}), cycles at "
      + (f"{ghz:g} GHz" if ghz else "an unknown clock: none"))
    w("  test                 ns/op   cycles/op   topology               published (native "
      f"{topo.native_isa})")
    for name, row in got.items():
        if row["skipped"]:
            w(f"  {name:<18} skipped: {row['note']}")
            continue
        ns, cyc = row["ns_per_op"], row["cycles_per_op"]
        fig = (f"{ns / 1e3:>8.1f} us" if name == "fork" else f"{ns:>11.3f}")
        cycs = f"{'-':>11}" if cyc is None else f"{cyc:>11,.0f}" if cyc >= 1000 else f"{cyc:>11.2f}"
        c = conf.get(name)
        ctext = _ref(_value(row, c[1]), c[0], c[0], c[1]) if c else "-"
        p = pub.get(name)
        ptext = _ref(_value(row, p[2]), p[0], p[1], p[2]) if p else "-"
        extra = ""
        if name == "indep_add" and cyc:
            extra = f"  ({1 / cyc:.2f} adds per cycle)"
        elif name == "scalar_sum" and row["gbps"] is not None:
            extra = f"  ({row['gbps']:.2f} GB/s)"
        w(f"  {name:<18} {fig} {cycs}   {ctext:<22} {ptext}{extra}")
    for name in pub:
        if name in got:
            w(f"    {name}: {pub[name][3]}")
    if not pub:
        w("    published: none shown, this core's figures are its topology's own, not a shipped machine's")


def compare_figures(con, run_id: int) -> dict[str, tuple[float, str]]:
    out = {}
    for name, row in rows(con, run_id).items():
        if row["skipped"] or row["ns_per_op"] is None:
            continue
        out[f"coreprobe.{name}.ns"] = (float(row["ns_per_op"]), "ns")
        if row["cycles_per_op"] is not None and name not in KERNEL:
            out[f"coreprobe.{name}.cycles"] = (float(row["cycles_per_op"]), "cycles")
        if row["gbps"] is not None:
            out[f"coreprobe.{name}.gbps"] = (float(row["gbps"]), "GB/s")
    return out
