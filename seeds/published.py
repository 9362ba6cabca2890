"""The seeds' published figures, quoted from the seed documents
(../shared/seeds/): each figure with the words it comes from, parsed from
the quoted tables so every value stays as the seed wrote it. Used by the
seeds' tables (seeds/report.py)."""
from __future__ import annotations

import re
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Pub:
    values: tuple          # several: the seed's repeats, or a range it gave (shown as mean (min-max))
    unit: str
    source: str            # the seed's words, verbatim but for line breaks and runs of spaces
    raw: tuple = ()        # each figure as written in source
    note: str = ""         # how a derived figure was derived


def _minsec(t: str) -> float:
    m, s = t.split(":")
    return 60 * int(m) + float(s)


LEVELS_MB = (0, 749, 2498, 4246)  # 001: the seed's dd sizes; ours are fractions of RAM, level by level


# --- 001: the mmtests tables, verbatim; parsed below so each figure stays as written -------
MMTESTS_COLUMNS = ("vanilla", "flatten-v1r8", "limitprio-v1r8", "block-v1r8", "tidy-v1r8")
MMTESTS_OPS = """\
Ops memcachetest-0M 10932.00 ( 0.00%) 10898.00 ( -0.31%) 10903.00 ( -0.27%) 10911.00 ( -0.19%) 10916.00 ( -0.15%)
Ops memcachetest-749M 7816.00 ( 0.00%) 10715.00 ( 37.09%) 11006.00 ( 40.81%) 10903.00 ( 39.50%) 10856.00 ( 38.89%)
Ops memcachetest-2498M 3974.00 ( 0.00%) 3190.00 (-19.73%) 11623.00 (192.48%) 11142.00 (180.37%) 10930.00 (175.04%)
Ops memcachetest-4246M 2355.00 ( 0.00%) 2915.00 ( 23.78%) 12619.00 (435.84%) 11212.00 (376.09%) 10904.00 (363.01%)
Ops io-duration-0M 0.00 ( 0.00%) 0.00 ( 0.00%) 0.00 ( 0.00%) 0.00 ( 0.00%) 0.00 ( 0.00%)
Ops io-duration-749M 31.00 ( 0.00%) 16.00 ( 48.39%) 9.00 ( 70.97%) 9.00 ( 70.97%) 8.00 ( 74.19%)
Ops io-duration-2498M 89.00 ( 0.00%) 111.00 (-24.72%) 27.00 ( 69.66%) 28.00 ( 68.54%) 27.00 ( 69.66%)
Ops io-duration-4246M 182.00 ( 0.00%) 165.00 ( 9.34%) 49.00 ( 73.08%) 46.00 ( 74.73%) 45.00 ( 75.27%)
Ops swaptotal-0M 0.00 ( 0.00%) 0.00 ( 0.00%) 0.00 ( 0.00%) 0.00 ( 0.00%) 0.00 ( 0.00%)
Ops swaptotal-749M 219394.00 ( 0.00%) 162045.00 ( 26.14%) 0.00 ( 0.00%) 0.00 ( 0.00%) 16.00 ( 99.99%)
Ops swaptotal-2498M 312904.00 ( 0.00%) 389809.00 (-24.58%) 334.00 ( 99.89%) 1233.00 ( 99.61%) 8.00 (100.00%)
Ops swaptotal-4246M 471517.00 ( 0.00%) 395170.00 ( 16.19%) 0.00 ( 0.00%) 1117.00 ( 99.76%) 29.00 ( 99.99%)
Ops swapin-0M 0.00 ( 0.00%) 0.00 ( 0.00%) 0.00 ( 0.00%) 0.00 ( 0.00%) 0.00 ( 0.00%)
Ops swapin-749M 62057.00 ( 0.00%) 5954.00 ( 90.41%) 0.00 ( 0.00%) 0.00 ( 0.00%) 0.00 ( 0.00%)
Ops swapin-2498M 143617.00 ( 0.00%) 154592.00 ( -7.64%) 0.00 ( 0.00%) 0.00 ( 0.00%) 0.00 ( 0.00%)
Ops swapin-4246M 160417.00 ( 0.00%) 125904.00 ( 21.51%) 0.00 ( 0.00%) 13.00 ( 99.99%) 0.00 ( 0.00%)
Ops minorfaults-0M 1683549.00 ( 0.00%) 1685771.00 ( -0.13%) 1675398.00 ( 0.48%) 1723245.00 ( -2.36%) 1683717.00 ( -0.01%)
Ops minorfaults-749M 1788977.00 ( 0.00%) 1871737.00 ( -4.63%) 1617193.00 ( 9.60%) 1610892.00 ( 9.95%) 1682760.00 ( 5.94%)
Ops minorfaults-2498M 1836894.00 ( 0.00%) 1796566.00 ( 2.20%) 1677878.00 ( 8.66%) 1685741.00 ( 8.23%) 1609514.00 ( 12.38%)
Ops minorfaults-4246M 1797685.00 ( 0.00%) 1819832.00 ( -1.23%) 1689258.00 ( 6.03%) 1690695.00 ( 5.95%) 1684430.00 ( 6.30%)
Ops majorfaults-0M 5.00 ( 0.00%) 7.00 (-40.00%) 5.00 ( 0.00%) 24.00 (-380.00%) 9.00 (-80.00%)
Ops majorfaults-749M 10310.00 ( 0.00%) 876.00 ( 91.50%) 73.00 ( 99.29%) 63.00 ( 99.39%) 90.00 ( 99.13%)
Ops majorfaults-2498M 20809.00 ( 0.00%) 22377.00 ( -7.54%) 102.00 ( 99.51%) 110.00 ( 99.47%) 55.00 ( 99.74%)
Ops majorfaults-4246M 23228.00 ( 0.00%) 20270.00 ( 12.73%) 196.00 ( 99.16%) 222.00 ( 99.04%) 102.00 ( 99.56%)"""  # noqa: E501 (mmtests' table, verbatim)
MMTESTS_VMSTAT = """\
Page Ins 1567012 1238608 90388 103832 75684
Page Outs 12837552 15223512 12726464 13613400 12668604
Swap Ins 366362 286798 0 13 0
Swap Outs 637724 660574 334 2337 53
Direct pages scanned 0 0 0 196955 292532
Kswapd pages scanned 11763732 4389473 207629411 22337712 3885443
Kswapd pages reclaimed 1262812 1186228 1228379 971375 685338
Direct pages reclaimed 0 0 0 186053 267255
Kswapd efficiency 10% 27% 0% 4% 17%
Kswapd velocity 9111.544 3407.923 161226.742 17342.002 3009.265
Direct efficiency 100% 100% 100% 94% 91%
Direct velocity 0.000 0.000 0.000 152.907 226.565
Page writes by reclaim 2858699 1159073 42498573 21198413 3018972
Page writes file 2220975 498499 42498239 21196076 3018919
Page writes anon 637724 660574 334 2337 53"""
OPS_KEYS = {"memcachetest": ("ops", "ops/s"), "io-duration": ("io", "s"), "swaptotal": ("swaptotal", "pages"),
            "swapin": ("swapin", "pages"), "minorfaults": ("minor", "faults"), "majorfaults": ("major", "faults")}
VMSTAT_KEYS = {"Page Ins": ("pgpgin", "KiB"), "Page Outs": ("pgpgout", "KiB"), "Swap Ins": ("pswpin", "pages"),
               "Swap Outs": ("pswpout", "pages"), "Direct pages scanned": ("dscan", "pages"),
               "Kswapd pages scanned": ("kscan", "pages"), "Kswapd pages reclaimed": ("ksteal", "pages"),
               "Direct pages reclaimed": ("dsteal", "pages"), "Kswapd efficiency": ("keff", "%"),
               "Kswapd velocity": ("kvel", "pages/s"), "Direct efficiency": ("deff", "%"),
               "Direct velocity": ("dvel", "pages/s"), "Page writes by reclaim": ("writes", "pages"),
               "Page writes file": ("wfile", "pages"), "Page writes anon": ("wanon", "pages")}


def _mmtests() -> dict:
    out = {}
    for line in MMTESTS_OPS.splitlines():
        name, mb = re.match(r"Ops (\S+)-(\d+)M ", line).groups()
        key, unit = OPS_KEYS[name]
        figs = re.findall(r"(-?[\d.]+) \(\s*-?[\d.]+%\)", line)
        out[f"{key}-{LEVELS_MB.index(int(mb))}"] = {
            c: Pub((float(v),), unit, line, (v,)) for c, v in zip(MMTESTS_COLUMNS, figs)}
    for line in MMTESTS_VMSTAT.splitlines():
        name = re.match(r"([A-Za-z ]+?) -?\d", line).group(1)
        key, unit = VMSTAT_KEYS[name]
        figs = re.findall(r"-?\d+(?:\.\d+)?%?", line[len(name):])
        out[key] = {c: Pub((float(v.rstrip("%")),), unit, line, (v,)) for c, v in zip(MMTESTS_COLUMNS, figs)}
    return out


# --- 003: Lorenzo Allegrucci's runs, verbatim (tcsh's time: user, system, elapsed, CPU, major faults) ---
QSBENCH = {
    "2.4.10-ac9": """Linux-2.4.10-ac9:
lenstra:~/src/qsort> time ./qsbench -n 90000000 -p 1 -s 140175100
seed = 140175100
71.370u 2.560s 3:17.94 37.3% 0+0k 0+0io 11773pf+0w
lenstra:~/src/qsort> time ./qsbench -n 90000000 -p 1 -s 140175100
seed = 140175100
71.760u 3.170s 4:02.93 30.8% 0+0k 0+0io 15487pf+0w
lenstra:~/src/qsort> time ./qsbench -n 90000000 -p 1 -s 140175100
seed = 140175100
71.090u 3.080s 4:07.94 29.9% 0+0k 0+0io 15856pf+0w
kswapd CPU time: 0:23""",
    "2.4.10-ac9 + smooth": """Linux-2.4.10-ac9 + Rik's smooth patch:
lenstra:~/src/qsort> time ./qsbench -n 90000000 -p 1 -s 140175100
seed = 140175100
71.090u 6.260s 3:21.65 38.3% 0+0k 0+0io 12868pf+0w
lenstra:~/src/qsort> time ./qsbench -n 90000000 -p 1 -s 140175100
seed = 140175100
72.460u 6.030s 3:58.10 32.9% 0+0k 0+0io 14637pf+0w
lenstra:~/src/qsort> time ./qsbench -n 90000000 -p 1 -s 140175100
seed = 140175100
71.630u 7.400s 4:00.86 32.8% 0+0k 0+0io 14894pf+0w
kswapd CPU time: 0:21"""}


def _qsbench() -> dict:
    out: dict = {}
    for col, block in QSBENCH.items():
        runs = re.findall(r"([\d.]+)u ([\d.]+)s ([\d:.]+) ([\d.]+)% \S+ \S+ (\d+)pf", block)
        for i, (key, unit, conv) in enumerate((("user", "s", float), ("system", "s", float),
                                               ("elapsed", "s", _minsec), ("cpu", "%", float),
                                               ("majflt", "faults", int))):
            raw = tuple(r[i] for r in runs)
            out.setdefault(key, {})[col] = Pub(tuple(float(conv(x)) for x in raw), unit, block, raw)
        ks = re.search(r"kswapd CPU time: (\d+:\d+)", block).group(1)
        out.setdefault("kswapd", {})[col] = Pub((_minsec(ks),), "s", block, (ks,), "read once, after the three runs")
    # the seed had time(1)'s system time only (2.4 split it by ticks too): beside ours on the guest clock as well
    out["system_clock"] = {col: replace(p, note="time(1)'s, as in the row above")
                           for col, p in out["system"].items()}
    return out


P000_IDEAL = "If it works flawlessly it will complete its work in about 20 X 18 seconds = 6 minutes, then sleep."
P000_SLOW = ("This causes it to take about 10 minutes to complete, and kswapd usage stays at 100% when the program "
             "sleeps.")
P000_OVER = "taking about 20% more real time and 95% more cpu than it should."
P004_FOUR = "Swapping starts after four RADs are filled and the free memory of one of this RADs becomes very small."
P004_LOG = ("13:16 cycle0: 16th GB steht top<2% vsz=61.2GB "
            "14:05 cycle0: 27th GB pcpu=2.4% rss=29G kernel=87%cpu26 free=90GB")
FIX, STORM = "2.4.9 + kswapd-sleeps", "2.4.9"
TRU64, PATCHED = "Tru64 5.1B-PK4", "Tru64 patched (May 2005)"
# seed 002's PerfTop line (8 CPUs, kernel 99.7 % of samples: the share of all samples); two of 002's rows
# stand beside it (6.1's spin locks, and those with the anon_vma lock's spinning)
P002_SPIN = Pub((75.1,), "% of kernel", "3235.00 - 75.1% - ffffffff814afb21 : _spin_lock", ("75.1%",))

PUBLISHED = {
    "000": {
        "chunk_s": {FIX: Pub((18,), "s", P000_IDEAL, ("18 seconds",),
                             "the flawless pace the seed expected, not a run with the fix"),
                    STORM: Pub((30,), "s", P000_SLOW, ("10 minutes",), "derived: about 10 minutes over 20 chunks")},
        "run_s": {FIX: Pub((360,), "s", P000_IDEAL, ("6 minutes",), "the flawless run"),
                  STORM: Pub((600,), "s", P000_SLOW, ("10 minutes",))},
        "over_ideal": {STORM: Pub((20,), "%", P000_OVER, ("20% more real time",))},
        "cpu_over_ideal": {STORM: Pub((95,), "%", P000_OVER, ("95% more cpu",))},
        "kswapd_steady": {
            STORM: Pub((100,), "%", "most memory ends up on the active list and kswapd cpu utilization hits 100%.",
                       ("100%",)),
            FIX: Pub((35,), "%", "This reduced the steady-state cpu usage to about 35%, still very unimpressive but "
                                 "no longer a DoS.", ("35%",))},
        "kswapd_sleeping": {STORM: Pub((100,), "%", P000_SLOW, ("100%",)),
                            FIX: Pub((18,), "%", "cpu usage drops to about 18% when the program sleeps", ("18%",))},
        # gprof with the fix, steady state (71.62 % of it default_idle)
        "refill_inactive_scan": {FIX: Pub((7.10,), "%", "7.10 28.15 2.54 2138 1188.03 1253.38 refill_inactive_scan",
                                          ("7.10",))},
        "page_launder": {FIX: Pub((6.15,), "%", "6.15 30.35 2.20 2849 772.20 819.82 page_launder", ("6.15",))},
        "stext_lock": {FIX: Pub((5.26,), "%", "5.26 32.23 1.88 stext_lock", ("5.26",))},
    },
    "001": _mmtests(),
    "002": {
        "sys": {"no trylock (2009)": Pub((100,), "% of busy", "on large systems very high system time(100%) and lots "
                                                              "of lock contention was observed.", ("100%",))},
        "spin_lock": {"no trylock (2009)": P002_SPIN},
        "lock_spin": {"no trylock (2009)": replace(
            P002_SPIN, note="2.6.32's anon_vma lock was a spinlock: its _spin_lock counts the anon_vma lock's "
                            "spinning too")},
        "page_check_address": {"no trylock (2009)": Pub(
            (15.6,), "% of kernel", "670.00 - 15.6% - ffffffff81101a33 : page_check_address", ("15.6%",))},
    },
    "003": _qsbench(),
    "004": {
        "touched": {
            TRU64: Pub((4,), "nodes' worth", "After the 4th RAD (RAD28) is filled the number of free pages on RAD 26 "
                                             "drops below 40 pages and paging starts (4*4GB=16GB touched).",
                       ("4*4GB=16GB touched",), "derived: 16 GB over 4 GB per RAD"),
            PATCHED: Pub((22.5,), "nodes' worth", "After applying the new patch the memeater got 90GB for the first "
                                                  "time without heavy paging.", ("90GB",),
                         "derived: 90 GB over 4 GB per RAD, a lower bound (still 'swap=100 pages, 48GB free')")},
        "filled": {TRU64: Pub((4,), "nodes", P004_FOUR, ("four RADs",))},
        "free_nodes": {TRU64: Pub((28,), "nodes", P004_FOUR, ("four RADs",),
                                  "derived: the GS1280's 32 RADs less the four filled")},
        "free_pct": {TRU64: Pub((90 / 128 * 100,), "% of memory", P004_LOG, ("free=90GB",),
                                "derived: 90 of 128 GB free at the 27th GB, swapping since the 16th")},
        "cycle": {TRU64: Pub((0,), "cycle", P004_LOG, ("cycle0",), "the 16 GB run (Fig. 2)")},
        "ms_before": {TRU64: Pub((1000, 3000), "ms", "Until here every GB is written in about 1-3 seconds.",
                                 ("1-3 seconds",))},
        "ms_after": {TRU64: Pub((49 * 60e3 / 11,), "ms", P004_LOG, ("13:16", "16th GB", "14:05", "27th GB"),
                                "derived: 11 GB in the 49 minutes from 13:16 to 14:05")},
    },
}
