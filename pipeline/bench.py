"""Benchmark of the engine and the timing plugin (a script that prints
figures, not a test): runs one fixed guest and workload per mode, in one
session, and prints guest MIPS (instructions / wall second of QEMU), the
ratio to our QEMU with the model off, QEMU's peak RSS and the model's state.

    ./run.py bench [--topology gs1280-8] [--exp memeater] [--param ...]
                   [--modes debian,off,fast,detailed-nostalls,detailed]

Modes: debian = Debian's own QEMU binary with upstream -icount (no per-vCPU
clocks, no plugin); off = our QEMU, per-vCPU clocks, no plugin; fast,
detailed-nostalls (every access priced, the guest does not feel it) and
detailed (stalls charged to the vCPU clocks) load the plugin. Instruction
counts come from our QEMU's per-vCPU report. Our QEMU's modes restore the
machine's snapshot (the build step takes it first) and count what they ran
after it (the report's whole-life counts less the snapshot's); Debian's
binary boots (it has neither the clocks' vmstate nor the snapshot port) and
reports no counts, so it is compared with `off` by wall time after boot or
restore (the same experiment, though idle periods are timed differently). With stalls charged the guest's timing
changes, so its instruction count can differ from the others'.

A driver over the whole pipeline (each mode is a `./run.py` run of its
own), so it lives in pipeline/, not in the timing stage it measures.
"""
from __future__ import annotations

import argparse
import resource
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MODES = {"debian": ["--engine", "debian", "--timing", "off"], "off": ["--timing", "off"],
         "fast": ["--timing", "fast"], "detailed-nostalls": ["--timing", "detailed", "--no-stalls"],
         "detailed": ["--timing", "detailed"],
         # the profile's own cost (timing/plugin_prof.c): the same run without it
         "detailed-noprofile": ["--timing", "detailed", "--no-profile"]}


def snapshot_insns(topology: str, key: str) -> int:
    import engine
    import topologies
    from pipeline.execute import cache_dir
    from pipeline.spec import RunSpec
    snaps, why = engine.get("vmlab").snapshots(RunSpec(topology=topology), topologies.load(topology))
    if snaps is None:
        raise SystemExit(f"bench: {why}")
    meta = snaps.meta(cache_dir(), key)
    if "vcpu_insns" not in meta:
        raise SystemExit(f"bench: snapshot {key[:12]} has no instruction counts; `./run.py snapshots --prune` "
                         f"and run again")
    return sum(meta["vcpu_insns"])


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="./run.py bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--topology", "-t", default="gs1280-8", help="machine (default gs1280-8)")
    p.add_argument("--exp", "-e", default="memeater", help="experiment (default memeater)")
    p.add_argument("--param", "-p", default="chunks=8,cycles=2,swap=none",
                   help="the experiment's parameters, comma-separated (default chunks=8,cycles=2,swap=none)")
    p.add_argument("--modes", default=",".join(MODES),
                   help=f"modes to run, comma-separated, of {', '.join(MODES)} (default all)")
    p.add_argument("--keep", metavar="DIR", help="keep the runs' database and logs here")
    return p


def main(argv, repo: Path = REPO) -> int:
    a = parser().parse_args(argv)
    modes = a.modes.split(",")
    bad = [m for m in modes if m not in MODES]
    if bad:
        print(f"error: --modes: expected some of {', '.join(MODES)}, got {', '.join(bad)}", file=sys.stderr)
        return 2
    work = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="vmlab-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    dbp = work / "bench.db"
    # build everything first so no mode pays for a build
    subprocess.run([sys.executable, str(repo / "run.py"), "build", "-t", a.topology, "-e", a.exp,
                    "--timing", "detailed"], check=True, stdout=subprocess.DEVNULL)
    ids, cpu_s = {}, {}
    for mode in modes:
        print(f"bench: {a.topology} / {a.exp} ({a.param}), timing {mode} ...", flush=True)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        r = subprocess.run([sys.executable, str(repo / "run.py"), "-t", a.topology, "-e", a.exp, "-p", a.param,
                            *MODES[mode], "--db", str(dbp), "--runs-dir", str(work / "runs")],
                           capture_output=True, text=True)
        if r.returncode:
            print(r.stdout[-2000:] + r.stderr[-2000:], file=sys.stderr)
            return 1
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        # CPU seconds of the run and its QEMU: on a shared host they depend far less on the other
        # load than wall time does, so the CPU-time ratio is the one to compare across modes
        cpu_s[mode] = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        con = sqlite3.connect(dbp)
        ids[mode] = con.execute("SELECT MAX(id) FROM runs").fetchone()[0]
    con = sqlite3.connect(dbp)
    con.row_factory = sqlite3.Row
    rows = {}
    for mode, rid in ids.items():
        run = con.execute("SELECT wall_s, boot_wall_s, qemu_maxrss_kib, snapshot_key FROM runs WHERE id = ?",
                          (rid,)).fetchone()
        insns = con.execute("SELECT SUM(insns) FROM vcpu_clocks WHERE run_id = ?", (rid,)).fetchone()[0]
        if run["snapshot_key"] and insns:
            # vCPU counts are whole-life: a restored run executed them less the snapshot's
            insns -= snapshot_insns(a.topology, run["snapshot_key"])
        state = con.execute("SELECT state_bytes FROM timing_run WHERE run_id = ?", (rid,)).fetchone()
        rows[mode] = dict(wall=run["wall_s"], boot=run["boot_wall_s"], rss=run["qemu_maxrss_kib"], insns=insns,
                          state=state[0] if state else None, cpu=cpu_s[mode])
    base = rows.get("off")
    print(f"\n{a.topology}, {a.exp} ({a.param}); QEMU under -icount, vCPUs round-robin on one host core")
    print(f"{'mode':<18} {'instructions':>15} {'wall s':>8} {'guest MIPS':>11} {'speed vs off':>12} "
          f"{'CPU s':>7} {'vs off (CPU)':>12} {'QEMU peak RSS':>14} {'model state':>12}")
    for mode, r in rows.items():
        mips = f"{r['insns'] / r['wall'] / 1e6:>11.1f}" if r["insns"] else f"{'-':>11}"
        if base and r["insns"] and base["insns"]:
            ratio = f"{(r['insns'] / r['wall']) / (base['insns'] / base['wall']):.2f}x"
        elif base:  # Debian's binary boots: compare the time after boot (restore) with off's
            ratio = f"{(base['wall'] - (base['boot'] or 0)) / (r['wall'] - (r['boot'] or 0)):.2f}x wall"
        else:
            ratio = "-"
        cratio = (f"{(r['insns'] / r['cpu']) / (base['insns'] / base['cpu']):.2f}x"
                  if base and r["insns"] and base["insns"] and r["cpu"] and base["cpu"] else "-")
        print(f"{mode:<18} {(r['insns'] or 0):>15,} {r['wall']:>8.1f} {mips} {ratio:>12} {r['cpu']:>7.1f} "
              f"{cratio:>12} {r['rss'] / 1024:>11.0f} MiB {(r['state'] or 0) / 2**20:>9.0f} MiB")
    print(f"(speed vs off = guest MIPS / off's guest MIPS, by wall and by the runs' CPU time; runs kept in {work})")
    return 0
