"""What the guest or the run cannot take, refused by resolve() whatever a
manifest says: each figure beside its source, apart from the manifest
machinery, so the limits read in one place."""
from __future__ import annotations

import string
from pathlib import Path

from experiments.errors import ExperimentError

# The longest run: the bound --timeout and --boot-timeout have (pipeline/execute.py
# prepare); a manifest's timeout_s past it means a count or size is absurd.
MAX_TIMEOUT_S = 1e7
# The guest programs read every number with strtol into a C long (64-bit on
# x86_64 and alpha; experiments/lib/util.c vl_opt_long), which saturates
# silently past this.
GUEST_LONG_MAX = 2**63 - 1
# Processes the guest kernel can hold at once (Linux 6.1), the name
# `max_procs` in manifests: pid_max = max(PID_MAX_DEFAULT, PIDS_PER_CPU_DEFAULT
# x CPUs) (include/linux/threads.h, CONFIG_BASE_SMALL=0; kernel/pid.c
# pid_idr_init) and threads-max = RAM / (8 x THREAD_SIZE) (kernel/fork.c
# set_max_threads; THREAD_SIZE is 16 KiB on x86_64 without KASAN and on
# alpha), so 8 per MiB; fork fails with EAGAIN past either.
GUEST_PID_MAX_DEFAULT = 0x8000
GUEST_PIDS_PER_CPU = 1024
GUEST_THREADS_PER_MIB = 8
# Swap the guest can enable: swapon keeps one byte per swap page in memory
# (mm/swapfile.c: swap_map = vzalloc(maxpages)), zram 16 more (drivers/block/
# zram/zram_drv.h struct zram_table_entry: handle and flags; no
# ZRAM_MEMORY_TRACKING), so past page / bytes-per-page times guest memory the
# swap's own tables need more than all of it.
GUEST_PAGE_BYTES = {"x86_64": 4096, "alpha": 8192}
SWAP_MAP_BYTES_PER_PAGE = 1
ZRAM_TABLE_BYTES_PER_PAGE = 16


def max_procs(topo) -> int:
    """The most processes the guest kernel can hold at once (see above)."""
    return min(max(GUEST_PID_MAX_DEFAULT, GUEST_PIDS_PER_CPU * topo.cpus),
               GUEST_THREADS_PER_MIB * topo.total_memory_mib)


def max_swap_frac(guest_isa: str, swap: str) -> float:
    """The largest swap_frac whose swap tables fit the guest's memory."""
    per_page = SWAP_MAP_BYTES_PER_PAGE + (ZRAM_TABLE_BYTES_PER_PAGE if swap == "zram" else 0)
    return GUEST_PAGE_BYTES.get(guest_isa, 4096) / per_page


def check_guest(manifest: dict, topo, values: dict, names: dict, overrides: dict, source: str, mpath: Path,
                given: str) -> None:
    """What the guest cannot take whatever the manifest says (the limits above);
    resolve() calls it with the values it has so far."""
    for field_ in {f for _, f, _, _ in string.Formatter().parse(manifest["command"]) if f}:
        v = names.get(field_)
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) > GUEST_LONG_MAX:
            what = "derived value" if field_ in manifest.get("derived", {}) else "parameter"
            where = f"{source}: parameters {given}" if overrides else f"{mpath}: field '{field_}'"
            raise ExperimentError(f"{where}: expected the {what} {field_} of the guest command within "
                                  f"{GUEST_LONG_MAX} (the guest program reads it as a C long), got {v:.3g}")
    swap, frac = values.get("swap"), values.get("swap_frac")  # the core's swap (pipeline/execute.py)
    if swap in ("disk", "zram") and isinstance(frac, (int, float)) and frac > max_swap_frac(topo.guest_isa, swap):
        page = GUEST_PAGE_BYTES.get(topo.guest_isa, 4096)
        where = source if "swap_frac" in overrides else mpath
        raise ExperimentError(f"{where}: parameter 'swap_frac': expected at most "
                              f"{max_swap_frac(topo.guest_isa, swap):.4g} with swap={swap} (the guest keeps "
                              f"{page / max_swap_frac(topo.guest_isa, swap):g} byte(s) per {page}-byte swap page "
                              f"in memory: a larger swap's tables need more than all of it), got {frac!r}")
