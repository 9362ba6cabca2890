#!/bin/sh
''':'
# Started by sh when python3 may be missing (a bare Debian 12): install it, then
# run this same file with it. Python reads everything from here on.
if ! command -v python3 >/dev/null 2>&1; then
  echo "bootstrap: installing python3 (apt-get install python3 python3-venv)" >&2
  apt-get update -q >&2 && apt-get install -y -q --no-install-recommends python3 python3-venv >&2 || exit 2
fi
exec python3 "$0" "$@"
'''
"""vmlab: re-create VM pathologies on simulated NUMA machines.

./run.py --topology gs1280-32 --exp memeater    boot Linux on the machine, run the reproducer
./run.py list | show [RUN] | query SQL | build | test

The front door only walks the stages: topologies/ -> experiments/ ->
build/ (images/) -> engine/ (QEMU) -> analysis/ (SQLite, summary).
"""
import argparse
import importlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import NoReturn

REPO = Path(__file__).resolve().parent
sys.path.insert(0, str(REPO))

from bootstrap import bootstrap  # standard library only

COMMANDS = ("run", "list", "show", "query", "compare", "build", "test", "bench", "study", "seeds", "report",
            "browse", "snapshots", "simpoint", "sample-check", "profile")
# The verbs whose own module parses and runs them: its parser() and main(argv).
MODULES = {"bench": "pipeline.bench", "study": "pipeline.studycli", "seeds": "pipeline.seedscli",
           "report": "analysis.report", "browse": "analysis.browse", "query": "analysis.query",
           "simpoint": "sampling.simpoint", "sample-check": "pipeline.samplecheck", "profile": "analysis.profilecli"}


def run_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="./run.py", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Boot a real Linux kernel on a simulated NUMA machine under QEMU, run a reproducer, "
                    "store the run in SQLite and print a summary.",
        epilog="other commands:\n"
               "  ./run.py list                 topologies, experiments and their parameters\n"
               "  ./run.py show [RUN_ID]        the summary of a stored run (default: the latest)\n"
               "  ./run.py query SQL [--csv]    read-only SQL on the results database\n"
               "  ./run.py compare RUN RUN...   side-by-side figures of runs (or --set N: a stored comparison)\n"
               "  ./run.py profile RUN          where the CPUs' modeled time went, per symbol (--cpu, --phase,\n"
               "                                --callers SYMBOL, --folded), as perf report prints it\n"
               "  ./run.py build [options]      build the kernel and initramfs (and take the machine's snapshot)\n"
               "  ./run.py snapshots [--prune]  the cached snapshots after boot and their sizes; --prune deletes them\n"
               "  ./run.py test [PYTEST ARGS]   the test suite (what CI runs)\n"
               "  ./run.py bench                the timing model's speed: guest MIPS per mode, QEMU peak RSS\n"
               "  ./run.py study FILE           run a study's matrix (local pool or --dask ADDRESS), then report\n"
               "  ./run.py seeds [SEED ...]     each seed's reproducer with its kernels, then the seed's own table\n"
               "  ./run.py report --study N     an HTML report of plots and tables (report/<db>-study-N/index.html)\n"
               "  ./run.py browse               Datasette on the results database, read-only\n"
               "  ./run.py simpoint FILE.bb     simulation points and weights from basic-block vectors\n"
               "                                (SimPoint 3.2's algorithm)\n"
               "  ./run.py sample-check [opts]  a --timing sampled run and the full detailed run of the same\n"
               "                                inputs: each estimate's error\n"
               "each takes --help.")
    add_run_options(p)
    return p


def add_run_options(p: argparse.ArgumentParser) -> None:
    """A run's options; each default is RunSpec's (pipeline/spec.py), written there only."""
    import experiments
    from analysis import db
    from images import variants
    from pipeline.spec import RunSpec as D
    p.add_argument("--topology", "-t", default=D.topology,
                   help="machine: a name from topologies/ (see `list`) or a path to a TOML file "
                        f"(default {D.topology})")
    p.add_argument("--exp", "-e", default=D.experiment,
                   help=f"experiment: a folder of experiments/, one of {', '.join(experiments.available())} "
                        f"(default {D.experiment})")
    p.add_argument("--param", "-p", action="append", default=[], metavar="NAME=VALUE",
                   help="override an experiment parameter; repeat, or separate with commas (see `list`)")
    p.add_argument("--kernel", default=D.kernel,
                   help=f"patch set from images/patches/: {', '.join(variants.patchsets())} (default {D.kernel}; "
                        "vanilla is the empty set), optionally @ a kernel line: "
                        f"{', '.join(variants.LINES)} (default {variants.DEFAULT_LINE}; e.g. vanilla@6.12); several, "
                        "comma-separated (e.g. vanilla,zone-reclaim-auto or vanilla,vanilla@6.12), run "
                        "the experiment once per kernel and print a comparison")
    p.add_argument("--flavor", default=D.flavor, choices=list(variants.FLAVORS),
                   help="kernel config flavor: lockstat adds LOCK_STAT (slower; never mix flavors in a comparison); "
                        "mglru builds in the multi-generational LRU, on from boot")
    p.add_argument("--qemu-mode", default=D.qemu_mode, choices=["icount", "mttcg"],
                   help="icount: deterministic per-vCPU guest clocks (each vCPU's instructions at the topology's "
                        "clock plus the model's stalls), pinned RTC; "
                        f"mttcg: multi-threaded TCG, guest time from the host, not repeatable (default {D.qemu_mode})")
    p.add_argument("--quantum-ns", type=float, default=D.quantum_ns,
                   help="icount: vCPUs interleave furthest-behind-first, each running until it is this many guest "
                        f"ns past the next (default {D.quantum_ns:g}; smaller is more exact for lock hand-offs and "
                        "slower)")
    p.add_argument("--engine", default=D.engine, choices=["vmlab", "debian"],
                   help="vmlab: our QEMU (Debian's 10.0.2 source + engine/qemu-patches); debian: Debian's own binary "
                        "with upstream -icount (one clock for all vCPUs), for comparison (--timing off) "
                        f"(default {D.engine})")
    p.add_argument("--disk", default=D.disk, metavar="MODEL",
                   help="disk model for swap and data disks, from topologies/disks.toml (default: the topology's); "
                        "'host' leaves them host-timed")
    p.add_argument("--no-stalls", action="store_true", default=D.no_stalls,
                   help="--timing detailed: price accesses but do not charge the stalls to the guest's clocks")
    from timing import modes
    p.add_argument("--timing", default=D.timing, choices=modes.CHOICES,
                   help="memory-system timing model (a QEMU plugin, timing/): auto = detailed, the accurate machine, "
                        "wherever the engine and --qemu-mode can run it (else off, and the run says why); "
                        "off = plain QEMU, a functional run; "
                        "fast = instruction counts and basic-block vectors; detailed = every data access priced "
                        "on the topology (caches, directory, hops, queueing; needs --qemu-mode icount); "
                        "sampled = a fast profile, then only its SimPoint regions detailed, from checkpoints, "
                        f"and the whole run's modeled figures estimated from them (default {D.timing})")
    from pipeline import sampled
    sampled.add_options(p)
    p.add_argument("--slice-insns", type=int, default=D.slice_insns, metavar="N",
                   help="--timing fast|detailed: instructions per basic-block-vector interval, per vCPU and "
                        f"machine-wide (default {D.slice_insns:,}; SimPoint's classic is 10,000,000)")
    p.add_argument("--warmup-insns", type=int, default=D.warmup_insns, metavar="N",
                   help="--timing detailed, restored: leave the first N instructions after the restore (all vCPUs "
                        "together; the experiment's start ends it at the latest) out of the model's figures, so "
                        "they do not count the cold start of its caches, directory and streams; the guest's own "
                        f"figures are unchanged (default {D.warmup_insns}: the model counts from the restore)")
    p.add_argument("--no-hmat", action="store_true", default=D.no_hmat,
                   help="do not give the guest an ACPI HMAT table")
    p.add_argument("--no-profile", action="store_true", default=D.no_profile,
                   help="--timing fast|detailed|sampled: keep no profile on the guest clock (`./run.py profile`; "
                        "it changes no figure of the guest, only the plugin's own cost)")
    p.add_argument("--boot", action="store_true", default=D.boot,
                   help="boot the kernel for this run instead of restoring the machine's snapshot after boot "
                        "(the default for x86 guests on our QEMU under icount; taken once, cached)")
    p.add_argument("--timeout", type=float, default=D.timeout,
                   help="wall seconds the experiment may run after boot (default: from the manifest)")
    p.add_argument("--boot-timeout", type=float, default=D.boot_timeout,
                   help="wall seconds to reach the guest's first record (default: from the CPU count)")
    p.add_argument("--kernel-append", default=D.kernel_append, metavar="ARGS",
                   help="extra kernel command-line arguments (recorded in the run row)")
    p.add_argument("--seed", type=int, default=D.seed,
                   help="perturbation seed: any value but 0 mixes vmlab.perturb=SEED.0 into the guest kernel's "
                        "entropy (a restored guest's before its job, a booted one's on its command line): "
                        f"another run of the same deterministic machine (0: unperturbed; default {D.seed})")
    db.add_option(p)
    p.add_argument("--runs-dir", default=None, help="where run logs go (default: runs/ beside the database)")


# --- each command's parser (docs/reference/cli.md is made from them) -------------
def list_parser() -> argparse.ArgumentParser:
    return argparse.ArgumentParser(prog="./run.py list", description="List topologies, experiments and parameters.")


def show_parser() -> argparse.ArgumentParser:
    from analysis import db
    p = argparse.ArgumentParser(prog="./run.py show", description="Print the summary of a stored run.")
    p.add_argument("run_id", nargs="?", type=int, help="run id (default: the latest run)")
    db.add_option(p)
    return p


def compare_parser() -> argparse.ArgumentParser:
    from analysis import db
    p = argparse.ArgumentParser(prog="./run.py compare", description=(
        "Print runs side by side, one row per figure, with the % difference against the first run "
        "(like mmtests' compare-kernels). Default: the latest stored comparison."))
    p.add_argument("runs", nargs="*", type=int, help="run ids; the first is the baseline")
    p.add_argument("--set", type=int, dest="set_id", help="a stored comparison (from `./run.py --kernel a,b`)")
    p.add_argument("--all", action="store_true", help="also print figures that are zero in every run")
    db.add_option(p)
    return p


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="./run.py build", description="Build the kernel and initramfs a run needs.")
    add_run_options(p)
    return p


def snapshots_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="./run.py snapshots",
                                description="The machines' snapshots after boot in the cache (engine/snapshot.py): "
                                            "one per machine, kernel and engine build; a run takes a missing one.")
    p.add_argument("--prune", action="store_true", help="delete them all (each is taken again when a run needs it)")
    return p


def parser(verb: str) -> argparse.ArgumentParser | None:
    """The parser a verb of COMMANDS parses with; None for `test`, whose
    arguments all go to pytest (cmd_test)."""
    if verb in MODULES:
        return importlib.import_module(MODULES[verb]).parser()
    return {"run": run_parser, "list": list_parser, "show": show_parser, "compare": compare_parser,
            "build": build_parser, "snapshots": snapshots_parser, "test": lambda: None}[verb]()


def fail(msg: str, code: int = 2) -> NoReturn:
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(code)


# --- run -----------------------------------------------------------------------
def spec_from_args(args, kernel: str):
    import experiments
    from pipeline import sampled
    from pipeline.spec import InputError, RunSpec
    try:
        params = experiments.parse_overrides(args.param)
    except experiments.ExperimentError as e:
        raise InputError(str(e)) from None
    return RunSpec(topology=args.topology, experiment=args.exp, kernel=kernel, flavor=args.flavor,
                   qemu_mode=args.qemu_mode, quantum_ns=args.quantum_ns, engine=args.engine, disk=args.disk,
                   timing=args.timing, no_stalls=args.no_stalls, no_hmat=args.no_hmat, no_profile=args.no_profile,
                   timeout=args.timeout, boot_timeout=args.boot_timeout, kernel_append=args.kernel_append,
                   seed=args.seed, boot=args.boot, warmup_insns=args.warmup_insns,
                   slice_insns=args.slice_insns, **sampled.spec_options(args)).with_params(params)


def prepare_all(args):
    """One prepared run per kernel of --kernel; bad input exits 2 here,
    before anything is built or written."""
    from pipeline.execute import prepare
    from pipeline.spec import InputError
    sets = [k.strip() for k in args.kernel.split(",")]
    if "" in sets or len(set(sets)) != len(sets):
        fail(f"--kernel: expected patch set names separated by commas, each once, got {args.kernel!r}")
    try:
        return [prepare(spec_from_args(args, k)) for k in sets]
    except InputError as e:
        fail(str(e))


def build_all(preps):
    from pipeline.execute import BuildError, build
    try:
        return [build(p) for p in preps]
    except BuildError as e:
        fail(str(e), e.status)


def cmd_run(args) -> int:
    from pipeline import compare_kernels
    from pipeline.execute import BuildError
    from pipeline.worker import take_stop_signals
    # A run started in the background by a script has SIGINT ignored, and a
    # plain SIGTERM would end Python with QEMU (its own session) left running
    # and the row `running`: both stop the run as Ctrl-C does instead.
    take_stop_signals()
    preps = prepare_all(args)
    # Several kernels: build what is missing first, so the runs follow each
    # other with the same topology, parameters and seed.
    built = build_all(preps)
    try:
        return compare_kernels.run(preps, built, Path(args.db).resolve(), args.runs_dir, args.kernel)
    except BuildError as e:  # the job too large for its disk, a snapshot gone since the build
        fail(str(e), e.status)


# --- other commands ------------------------------------------------------------
def cmd_list(argv) -> int:
    import experiments
    import topologies
    list_parser().parse_args(argv)
    print("topologies (topologies/*.toml, or --topology PATH):")
    w = max(map(len, topologies.available()), default=12)
    for name in topologies.available():
        t = topologies.load(name)
        print(f"  {name:<{w}} {t.shape():<22} {t.nodes:>2} nodes x {t.cpus_per_node} CPU, {t.memory_mib:>4} MiB/node, "
              f"guest {t.guest_isa}{' (native ' + t.native_isa + ')' if t.native_isa != t.guest_isa else ''}, "
              f"max {t.max_hops()} hops")
        print(f"  {'':<{w}} {t.description}")

    def show(params, indent: str) -> None:
        for p in params.values():
            print(f"{indent}--param {p.name + '=' + str(p.default):<22} {p.help}")
    print("\nparameters every experiment takes (experiments/common.toml):")
    show(experiments.common_params(), "  ")
    print("\nexperiments (experiments/<name>/manifest.toml) and their own parameters:")
    for name in experiments.available():
        e = experiments.load(name)
        print(f"  {name}: {e.summary}")
        show(e.own_params(), "      ")
    return 0


def cmd_show(argv) -> int:
    from analysis import db, summary
    a = show_parser().parse_args(argv)
    try:
        con = db.connect(a.db, readonly=True)
    except db.SchemaError as e:
        fail(str(e))
    rid = a.run_id or (con.execute("SELECT MAX(id) FROM runs").fetchone()[0])
    if not rid or not con.execute("SELECT 1 FROM runs WHERE id = ?", (rid,)).fetchone():
        fail(f"{a.db}: no run {a.run_id or ''}".strip())
    print(summary.render(con, rid))
    return 0


def cmd_compare(argv) -> int:
    from analysis import compare, db
    a = compare_parser().parse_args(argv)
    try:
        con = db.connect(a.db, readonly=True)
        if a.runs and a.set_id:
            raise compare.CompareError("give run ids or --set, not both")
        if a.runs:
            ids = a.runs
        else:
            sid = a.set_id or con.execute("SELECT MAX(id) FROM compare_sets").fetchone()[0]
            if sid is None:
                raise compare.CompareError("no stored comparison; give run ids")
            ids = compare.runs_in(con, sid)
        print(compare.render(con, ids, all_rows=a.all), end="")
    except (db.SchemaError, compare.CompareError) as e:
        fail(f"{a.db}: {e}")
    return 0


def cmd_build(argv) -> int:
    for b in build_all(prepare_all(build_parser().parse_args(argv))):
        print(f"kernel:    {b.kernel_dir}\ninitramfs: {b.initramfs}" + (f"\nplugin:    {b.plugin}" if b.plugin else ""))
    return 0


def cmd_snapshots(argv) -> int:
    import json

    from engine import snapshot
    from pipeline.execute import cache_dir
    args = snapshots_parser().parse_args(argv)
    found = snapshot.sizes(cache_dir())
    for d, size in found:
        try:
            meta = json.loads((d / "meta.json").read_text())
            when, boot = meta.get("taken_at", "?"), f"booted in {meta.get('boot_wall_s', '?')} s"
        except (OSError, ValueError):
            when, boot = "?", "incomplete"
        print(f"  {d.name}  {size / 2**20:8.1f} MiB  {when}  {boot}")
    print(f"{len(found)} snapshot{'s' if len(found) != 1 else ''}, {sum(s for _, s in found) / 2**20:.1f} MiB on disk "
          f"in {cache_dir() / 'snapshots'}")
    if args.prune:
        print(f"pruned: {snapshot.prune(cache_dir()) / 2**20:.1f} MiB freed (a snapshot being taken now is kept)")
    return 0


def cmd_test(argv) -> int:
    """The test suite, slow end-to-end tests included: arguments go to pytest (`-m "not slow"`: the fast suite).
    On every core (xdist, a file per worker: most e2e tests drive one single-threaded guest); `-n 0`: one process.
    Each test's time goes to a JUnit XML file under the cache's test-reports/ (the last ten are kept), so what a
    cold suite spends its time on can be read after the run, CI's included."""
    if not any(a.startswith(("-n", "--numprocesses", "--dist", "no:xdist")) for a in argv):
        # in the order tests/conftest.py gives (builds first), not xdist's most-tests-first
        argv = ["-n", "auto", "--dist", "loadfile", "--no-loadscope-reorder", *argv]
    reports = bootstrap.cache_dir() / "test-reports"
    given = [*argv, *os.environ.get("PYTEST_ADDOPTS", "").split()]
    own = any(a.startswith(("--junitxml", "--junit-xml")) for a in given)
    if not own:
        reports.mkdir(parents=True, exist_ok=True)
        argv = [f"--junitxml={reports / time.strftime(f'junit-%Y%m%d-%H%M%S-{os.getpid()}.xml')}", *argv]
    rc = subprocess.call([sys.executable, "-m", "pytest", *argv], cwd=REPO)
    if not own:  # after the run: a --help or a bad argument writes no report and must not push one out
        for old in sorted(reports.glob("junit-*.xml"), key=lambda p: p.stat().st_mtime)[:-10]:
            old.unlink(missing_ok=True)
    return rc


def main(argv: list[str]) -> int:
    if argv[:1] in ([], ["run"], ["-h"], ["--help"]) and {"-h", "--help"} & set(argv):
        run_parser().print_help()  # help needs nothing installed
        return 0
    bootstrap.ensure(argv, str(Path(__file__).resolve()))
    if argv and argv[0] in MODULES:
        return importlib.import_module(MODULES[argv[0]]).main(argv[1:])
    if argv and argv[0] in COMMANDS and argv[0] != "run":
        return {"list": cmd_list, "show": cmd_show, "compare": cmd_compare, "build": cmd_build,
                "test": cmd_test, "snapshots": cmd_snapshots}[argv[0]](argv[1:])
    if argv and argv[0] == "run":
        argv = argv[1:]
    return cmd_run(run_parser().parse_args(argv))


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:  # outside a run (a run records itself as aborted)
        print("interrupted", file=sys.stderr)
        sys.exit(130)
