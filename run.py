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
scons-wrapper/ (images/) -> configs/ (QEMU) -> analysis/ (SQLite, summary).
"""
import argparse
import hashlib
import os
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent
sys.path.insert(0, str(REPO))

from bootstrap import bootstrap  # noqa: E402  (standard library only)

COMMANDS = ("run", "list", "show", "query", "compare", "build", "test", "bench", "study", "report", "browse")


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
               "  ./run.py build [options]      build the kernel and initramfs only\n"
               "  ./run.py test [PYTEST ARGS]   the test suite (what CI runs)\n"
               "  ./run.py bench                the timing model's speed: guest MIPS per mode, QEMU peak RSS\n"
               "  ./run.py study FILE           run a study's matrix (local pool or --dask ADDRESS), then report\n"
               "  ./run.py report --study N     an HTML report of plots and tables (report/study-N/index.html)\n"
               "  ./run.py browse               Datasette on the results database, read-only\n"
               "each takes --help.")
    add_run_options(p)
    return p


def add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--topology", "-t", default="gs1280-32",
                   help="machine: a name from topologies/ (see `list`) or a path to a TOML file (default gs1280-32)")
    import experiments
    from images import kernel
    p.add_argument("--exp", "-e", default="memeater",
                   help=f"experiment: a folder of experiments/, one of {', '.join(experiments.available())} "
                        "(default memeater)")
    p.add_argument("--param", "-p", action="append", default=[], metavar="NAME=VALUE",
                   help="override an experiment parameter; repeat, or separate with commas (see `list`)")
    p.add_argument("--kernel", default="vanilla",
                   help=f"patch set from images/patches/: {', '.join(kernel.patchsets())} (default vanilla, the "
                        "empty set); several, comma-separated (e.g. vanilla,zone-reclaim-auto), run the experiment "
                        "once per kernel and print a comparison")
    p.add_argument("--flavor", default="default", choices=list(kernel.FLAVORS),
                   help="kernel config flavor: lockstat adds LOCK_STAT (slower; never mix flavors in a comparison)")
    p.add_argument("--qemu-mode", default="icount", choices=["icount", "mttcg"],
                   help="icount: deterministic per-vCPU guest clocks (each vCPU's instructions at the topology's "
                        "clock plus the model's stalls), pinned RTC (default); "
                        "mttcg: multi-threaded TCG, guest time from the host, not repeatable")
    p.add_argument("--quantum-ns", type=float, default=1000,
                   help="icount: vCPUs interleave furthest-behind-first, each running until it is this many guest "
                        "ns past the next (default 1000; smaller is more exact for lock hand-offs and slower)")
    p.add_argument("--engine", default="vmlab", choices=["vmlab", "debian"],
                   help="vmlab: our QEMU (Debian's 10.0.2 source + configs/qemu-patches, default); debian: Debian's "
                        "own binary with upstream -icount (one clock for all vCPUs), for comparison (--timing off)")
    p.add_argument("--disk", default=None, metavar="MODEL",
                   help="disk model for swap and data disks, from topologies/disks.toml (default: the topology's); "
                        "'host' leaves them host-timed")
    p.add_argument("--no-stalls", action="store_true",
                   help="--timing detailed: price accesses but do not charge the stalls to the guest's clocks")
    p.add_argument("--timing", default="off", choices=["off", "fast", "detailed"],
                   help="memory-system timing model (a QEMU plugin, timing/): off = plain QEMU (default); "
                        "fast = instruction counts and basic-block vectors; detailed = every data access priced "
                        "on the topology (caches, directory, hops, queueing; needs --qemu-mode icount)")
    p.add_argument("--no-hmat", action="store_true", help="do not give the guest an ACPI HMAT table")
    p.add_argument("--timeout", type=float, default=None,
                   help="wall seconds the experiment may run after boot (default: from the manifest)")
    p.add_argument("--boot-timeout", type=float, default=None,
                   help="wall seconds to reach the guest's first record (default: from the CPU count)")
    p.add_argument("--kernel-append", default="", metavar="ARGS",
                   help="extra kernel command-line arguments (recorded in the run row)")
    p.add_argument("--seed", type=int, default=0, help="seed recorded with the run and passed to the guest")
    p.add_argument("--db", default="results.db", help="SQLite results database (default ./results.db)")
    p.add_argument("--runs-dir", default=None, help="where run logs go (default: runs/ beside the database)")


def cache_dir() -> Path:
    return bootstrap.cache_dir()


def fail(msg: str, code: int = 2) -> "NoReturn":
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(code)


# --- run -----------------------------------------------------------------------
def cmd_run(args) -> int:
    import experiments
    import topologies
    from analysis import compare, db
    from configs import qemu, qemu_build
    from images import kernel
    from topologies import disks
    import timing

    # Everything that can be wrong with the input is checked before the
    # database is touched: bad input leaves no trace there.
    try:
        topo = topologies.load(args.topology)
        exp = experiments.load(args.exp)
        plan = exp.resolve(topo, experiments.parse_overrides(args.param))
        sets = [k.strip() for k in args.kernel.split(",")]
        if "" in sets or len(set(sets)) != len(sets):
            raise kernel.BuildError(f"--kernel: expected patch set names separated by commas, each once, "
                                    f"got {args.kernel!r}")
        variants = [kernel.Variant(topo.guest_isa, args.flavor, k) for k in sets]
        for v in variants:
            kernel.check_variant(v)
        qemu_build.series()  # every patch the series names is there
        args.quantum_ns = qemu.check_quantum(args.quantum_ns)
        if args.timeout is not None and not 0 < args.timeout < 1e7:
            raise qemu.EngineError(f"--timeout: expected a positive number of seconds, got {args.timeout:g}")
        args.disk_model = None
        disk_name = args.disk or topo.disk
        if disk_name and disk_name != "host" and args.engine == "vmlab" and args.qemu_mode == "icount":
            args.disk_model = disks.get(disk_name, where="--disk" if args.disk else f"{topo.path}: field 'disk.model'")
        elif args.disk and args.disk != "host":
            disks.get(args.disk)  # a misspelt name is still an error
        if args.engine == "debian" and args.timing != "off":
            raise qemu.EngineError("--engine debian: runs with --timing off only (the timing plugin is built "
                                   "against our QEMU's plugin API)")
        if args.timing != "off":
            timing.check(topo, args.timing, args.qemu_mode)
    except (topologies.TopologyError, experiments.ExperimentError, kernel.BuildError, qemu.EngineError,
            qemu_build.EngineBuildError, timing.TimingError, disks.DiskError) as e:
        fail(str(e))

    # Several kernels: build what is missing first, so the runs follow each
    # other with the same topology, parameters and seed.
    built = [build_images(v, topo.guest_isa, exp.name, timing=args.timing != "off") for v in variants]
    # Read the guest userland once: every kernel of a comparison boots the
    # same bytes, even if a build elsewhere replaces the cached archive.
    userland = built[0].userland
    dbpath = Path(args.db).resolve()
    con = db.connect(dbpath)
    cid = compare.start(con, f"{exp.name} on {topo.name}: {args.kernel}") if len(variants) > 1 else None
    results = []
    for i, (v, b) in enumerate(zip(variants, built)):
        if cid:
            print(f"\n=== kernel {i + 1}/{len(variants)}: {v.patchset} (comparison {cid}) ===", flush=True)
        run_id, status = run_one(args, con, dbpath, topo, exp, plan, v, b, userland, quiet=bool(cid))
        results.append((run_id, status))
        if cid:
            compare.add_run(con, cid, i, run_id)
        if status == "aborted":
            break
    if cid:
        print()
        print(compare.render(con, [r for r, _ in results]), end="")
        print(f"(comparison {cid}; again with `./run.py compare --set {cid}`; one run: `./run.py show RUN`)")
    worst = max(({"ok": 0, "failed": 1}.get(st, 130) for _, st in results), default=130)
    return worst


def run_one(args, con, dbpath, topo, exp, plan, variant, built, userland, quiet=False) -> tuple[int, str]:
    """Boot one kernel, run the experiment, store the run; (run id, status)."""
    from analysis import db, records, summary
    from analysis.rows import insert
    from analysis.runrow import RunEnd, RunStart
    from configs import qemu, qemu_build
    from images import initramfs, kernel
    import timing

    kmeta = kernel.load_meta(built.kernel_dir)
    host = socket.gethostname()
    db.reap_stale(con, host)
    runs_root = Path(args.runs_dir).resolve() if args.runs_dir else dbpath.parent / "runs"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    rdir = runs_root / f"{stamp}-{topo.name}-{exp.name}-{variant.patchset}-{os.getpid()}"
    rdir.mkdir(parents=True)

    swap_mib = round(plan.params["swap_frac"] * topo.total_memory_mib) if plan.params["swap"] != "none" else 0
    swap_img = None
    if swap_mib > 0 and plan.params["swap"] == "disk":
        swap_img = rdir / "swap.img"
        with open(swap_img, "wb") as f:
            f.truncate(swap_mib << 20)  # sparse: costs disk only as the guest swaps
    swap_dev = "/dev/vda" if swap_img else (f"zram:{swap_mib}" if swap_mib else "")
    # A data disk for experiments that declare one (disk_mib): ext2 made and
    # mounted on /data by /init, the next virtio-blk after swap.
    data_img = None
    if plan.all_values.get("disk_mib", 0) > 0:
        data_img = rdir / "data.img"
        with open(data_img, "wb") as f:
            f.truncate(int(plan.all_values["disk_mib"]) << 20)
    data_dev = ("/dev/vdb" if swap_img else "/dev/vda") if data_img else ""
    conf = (f"VMLAB_EXP={exp.name}\nVMLAB_CMD={sh_quote(plan.command)}\n"
            f"VMLAB_SWAP={swap_dev}\nVMLAB_DATA={data_dev}\nVMLAB_SEED={args.seed}\n")
    knobs = "".join(f"{name} {path} {value}\n" for name, path, value in plan.knobs())
    initrd = rdir / "initramfs.cpio"
    initrd.write_bytes(userland + initramfs.run_archive({"run.conf": conf, "knobs": knobs}))

    plugin = timing_out = None
    if args.timing != "off":
        timing_out = rdir / "timing.json"
        conf_path = rdir / "timing.conf"
        conf_path.write_text(timing.config_text(topo, args.timing, timing_out, symbols=built.kernel_dir / "System.map",
                                                bbv_dir=rdir if args.timing == "fast" else None,
                                                qemu_mode=args.qemu_mode, stalls=not args.no_stalls))
        plugin = (built.plugin, conf_path)
    ours = args.engine == "vmlab"
    binary = (built.qemu_dir / "bin" if ours else Path("/usr/bin")) / qemu_build.TARGETS[topo.guest_isa]
    cmd = qemu.command_line(topo, built.kernel_dir / "kernel", initrd, binary=binary, mode=args.qemu_mode,
                            quantum_ns=args.quantum_ns, swap_image=swap_img, data_image=data_img,
                            append=args.kernel_append, hmat=not args.no_hmat, plugin=plugin, vcpu_clocks=ours,
                            disk=args.disk_model if (swap_img or data_img) else None)
    stalls = args.timing == "detailed" and not args.no_stalls and args.qemu_mode == "icount"
    qver = qemu_build.label() if ours else f"Debian's {binary} (qemu-system {qemu_build.debian_version()})"
    console, qlog = rdir / "console.log", rdir / "qemu.log"
    boot_to = args.boot_timeout or qemu.boot_timeout_s(topo, args.qemu_mode, args.timing)
    run_to = args.timeout or plan.timeout_s * qemu.TIMING_SLOWDOWN[args.timing]  # manifests time the model off
    row = RunStart(
        started_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"), host=host, vmlab_version=vmlab_version(),
        topology=topo.name, topology_sha256=topo.sha256, topology_toml=topo.text,
        topology_shape=topo.shape(), nodes=topo.nodes, cpus=topo.cpus,
        memory_mib_per_node=topo.memory_mib, scale=topo.scale, native_isa=topo.native_isa,
        guest_isa=topo.guest_isa, experiment=exp.name,
        params_json=summary.dumps({**plan.all_values, "command": plan.command}),
        kernel_arch=variant.arch, kernel_release=kmeta["release"], kernel_source=kmeta["source_package"],
        patch_set=variant.patchset, kernel_flavor=variant.flavor,
        kernel_config_sha256=kmeta["config_sha256"], kernel_sha256=kmeta["kernel_sha256"],
        initramfs_sha256=hashlib.sha256(userland).hexdigest(), engine="qemu-tcg", engine_version=qver,
        qemu_mode=args.qemu_mode, timing_mode=args.timing, seed=args.seed,
        clock_model=qemu.clock_model(topo, args.qemu_mode, args.quantum_ns, stalls, vcpu_clocks=ours),
        quantum_ns=args.quantum_ns if args.qemu_mode == "icount" and ours else None,
        disk_model=args.disk_model.label() if args.disk_model and (swap_img or data_img) else None,
        timing_plugin=(f"vmlab_timing sha256 {initramfs.sha256(built.plugin)[:12]}, built against "
                       f"{qver}" if built.plugin else None),
        command_line=" ".join(sh_quote(c) for c in cmd), log_path=str(console),
        limitations=summary.limitations(topo, args.qemu_mode, args.timing, swap_dev, data_dev, stalls,
                                        disk_modeled=args.disk_model is not None),
    )
    run_id = db.start_run(con, row)
    print(f"run {run_id}: {topo.name} ({topo.shape()}, {topo.cpus} CPUs, {topo.memory_mib} MiB/node), "
          f"kernel {variant.patchset}, {exp.name} {plan.command!r}, {qver}, {row.clock_model}; "
          f"console {console}",
          flush=True)

    outcome = None
    try:
        with summary.LiveProgress(exp, plan, topo) as prog:
            outcome = qemu.supervise(cmd, console, qlog, boot_to, run_to, on_record=prog.record, on_tick=prog.tick)
    except KeyboardInterrupt:
        pass
    finally:
        for img in (swap_img, data_img):
            if img is not None:
                img.unlink(missing_ok=True)
        status = outcome.status if outcome else "aborted"
        fields = RunEnd(
            status=status, reason=outcome.reason if outcome else "interrupted (Ctrl-C)",
            ended_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            wall_s=round(outcome.wall_s, 1) if outcome else None,
            boot_wall_s=round(outcome.boot_wall_s, 1) if outcome and outcome.boot_wall_s else None,
            log_sha256=initramfs.sha256(console) if console.exists() else None,
            # the largest child's peak RSS: QEMU (the build's children are far smaller)
            qemu_maxrss_kib=resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
        )
        parsed = outcome.parsed if outcome else records.parse_bytes(console.read_bytes() if console.exists() else b"")
        clocks = qemu.vcpu_clocks(qlog)
        extras = [lambda c: insert(c, "vcpu_clocks", [{"run_id": run_id, "cpu": cpu, "insns": n, "stall_ps": st,
                                                       "clock_ps": ps} for cpu, n, st, ps in clocks])]
        if timing_out is not None and timing_out.exists():
            from analysis import timing as timing_db
            res = timing.load_results(timing_out)
            ok, line = timing.map_matches_srat(topo, console.read_text(errors="replace")) \
                if topo.guest_isa == "x86_64" else (True, "one node, no ACPI SRAT on this guest ISA to check")
            extras.append(lambda c: timing_db.ingest(c, run_id, res, ("" if ok else "MISMATCH: ") + line))
            if not ok:
                print(f"warning: timing address map: {line}", file=sys.stderr)
        elif timing_out is not None:
            print(f"warning: the timing plugin wrote no results ({timing_out}); see {qlog}", file=sys.stderr)
        db.finish_run(con, run_id, fields, parsed, topo, extra=lambda c: [f(c) for f in extras])
    if status == "failed" and plugin is not None and outcome and outcome.boot_wall_s is None and qlog.exists():
        bad = [ln for ln in qlog.read_text(errors="replace").splitlines() if "plugin" in ln.lower()]
        if bad:  # QEMU refused the plugin: say why and what fixes it
            print(f"error: the timing plugin did not load: {bad[-1].strip()[:300]}; rebuild it against the "
                  f"installed QEMU with `./run.py build --timing {args.timing}` (QEMU 10.x from bookworm-backports)",
                  file=sys.stderr)
    for err in parsed.errors[:5]:
        print(f"warning: {console}: {err}", file=sys.stderr)
    if quiet:
        print(f"run {run_id}: {status}" + (f" ({fields.reason})" if fields.reason else ""), flush=True)
    else:
        print(summary.render(con, run_id))
    return run_id, status


def build_images(variant, arch: str, exp: str, timing: bool = False):
    from images import kernel
    import importlib.util
    spec = importlib.util.spec_from_file_location("scons_wrapper", REPO / "scons-wrapper" / "wrapper.py")
    wrapper = importlib.util.module_from_spec(spec)
    sys.modules["scons_wrapper"] = wrapper  # its dataclasses look their module up
    spec.loader.exec_module(wrapper)
    try:
        return wrapper.build(cache_dir(), variant, arch, exp, timing=timing)
    except (RuntimeError, kernel.BuildError) as e:
        fail(str(e), getattr(e, "status", 1))


def sh_quote(s: str) -> str:
    import shlex
    return shlex.quote(str(s))


def vmlab_version() -> str:
    r = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"], capture_output=True, text=True)
    return r.stdout.strip() or "unknown"


# --- other commands ------------------------------------------------------------
def cmd_list(argv) -> int:
    import experiments
    import topologies
    argparse.ArgumentParser(prog="./run.py list", description="List topologies, experiments and parameters.").parse_args(argv)
    print("topologies (topologies/*.toml, or --topology PATH):")
    for name in topologies.available():
        t = topologies.load(name)
        print(f"  {name:<12} {t.shape():<22} {t.nodes:>2} nodes x {t.cpus_per_node} CPU, {t.memory_mib:>4} MiB/node, "
              f"guest {t.guest_isa}{' (native ' + t.native_isa + ')' if t.native_isa != t.guest_isa else ''}, "
              f"max {t.max_hops()} hops")
        print(f"  {'':<12} {t.description}")
    print("\nexperiments (experiments/<name>/manifest.toml):")
    for name in experiments.available():
        e = experiments.load(name)
        print(f"  {name}: {e.summary}")
        for p in e.params.values():
            print(f"      --param {p.name + '=' + str(p.default):<22} {p.help}")
    return 0


def cmd_show(argv) -> int:
    from analysis import db, summary
    p = argparse.ArgumentParser(prog="./run.py show", description="Print the summary of a stored run.")
    p.add_argument("run_id", nargs="?", type=int, help="run id (default: the latest run)")
    p.add_argument("--db", default="results.db")
    a = p.parse_args(argv)
    try:
        con = db.connect(a.db, readonly=True)
    except db.SchemaError as e:
        fail(str(e))
    rid = a.run_id or (con.execute("SELECT MAX(id) FROM runs").fetchone()[0])
    if not rid or not con.execute("SELECT 1 FROM runs WHERE id = ?", (rid,)).fetchone():
        fail(f"{a.db}: no run {a.run_id or ''}".strip())
    print(summary.render(con, rid))
    return 0


def cmd_query(argv) -> int:
    import sqlite3
    from analysis import db, summary
    tables = ""
    if {"-h", "--help"} & set(argv):  # only --help lists the tables: a query opens the database once
        pre = argparse.ArgumentParser(add_help=False)
        pre.add_argument("--db", default="results.db")
        tables = _schema_help(pre.parse_known_args(argv)[0].db)
    p = argparse.ArgumentParser(prog="./run.py query",
                                description="Run read-only SQL on the results database. " + tables)
    p.add_argument("sql", nargs="?", default="SELECT * FROM v_runs ORDER BY id DESC LIMIT 20")
    p.add_argument("--csv", action="store_true", help="print CSV instead of a table")
    p.add_argument("--parquet", metavar="FILE", help="write the result to a Parquet file (pyarrow) for pandas")
    p.add_argument("--db", default="results.db")
    a = p.parse_args(argv)
    try:
        con = db.connect(a.db, readonly=True)
        cols, rows = db.query(con, a.sql)
    except (db.SchemaError, sqlite3.Error) as e:
        fail(f"{a.db}: {e}")
    if a.parquet:
        from analysis import export
        try:
            n = export.parquet(cols, rows, a.parquet)
        except export.ExportError as e:
            fail(str(e))
        print(f"{a.parquet}: {n} rows, {len(cols)} columns")
        return 0
    print(summary.csv_text(cols, rows) if a.csv else summary.table(cols, rows), end="")
    return 0


def _schema_help(path: str) -> str:
    """The tables and views, read from the database (or, before the first
    run, from the schema this vmlab would create)."""
    import sqlite3
    from analysis import db
    try:
        con = db.connect(path, readonly=True) if Path(path).exists() else db.connect(":memory:")
        kinds = db.tables(con)
    except (db.SchemaError, sqlite3.Error) as e:
        return f"({path}: {e})"
    names = lambda t: ", ".join(n for k, n in kinds if k == t)
    return (f"Tables in {path if Path(path).exists() else 'a new database'}: {names('table')}. "
            f"Views: {names('view')}. Columns: ./run.py query \"PRAGMA table_info(NAME)\".")


def cmd_compare(argv) -> int:
    from analysis import compare, db
    p = argparse.ArgumentParser(prog="./run.py compare", description=(
        "Print runs side by side, one row per figure, with the % difference against the first run "
        "(like mmtests' compare-kernels). Default: the latest stored comparison."))
    p.add_argument("runs", nargs="*", type=int, help="run ids; the first is the baseline")
    p.add_argument("--set", type=int, dest="set_id", help="a stored comparison (from `./run.py --kernel a,b`)")
    p.add_argument("--all", action="store_true", help="also print figures that are zero in every run")
    p.add_argument("--db", default="results.db")
    a = p.parse_args(argv)
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
    import experiments
    import topologies
    from images import kernel
    p = argparse.ArgumentParser(prog="./run.py build", description="Build the kernel and initramfs a run needs.")
    add_run_options(p)
    a = p.parse_args(argv)
    try:
        topo = topologies.load(a.topology)
        experiments.load(a.exp)
        vs = [kernel.Variant(topo.guest_isa, a.flavor, k.strip()) for k in a.kernel.split(",")]
        for v in vs:
            kernel.check_variant(v)
    except (topologies.TopologyError, experiments.ExperimentError, kernel.BuildError) as e:
        fail(str(e))
    for v in vs:
        b = build_images(v, topo.guest_isa, a.exp, timing=a.timing != "off")
        print(f"kernel:    {b.kernel_dir}\ninitramfs: {b.initramfs}" + (f"\nplugin:    {b.plugin}" if b.plugin else ""))
    return 0


def cmd_test(argv) -> int:
    # All tests, the slow end-to-end ones included (they boot guests).
    return subprocess.call([sys.executable, "-m", "pytest", *argv], cwd=REPO)


def cmd_bench(argv) -> int:
    from timing import bench
    return bench.main(argv, REPO)


def cmd_report(argv) -> int:
    from analysis import report
    return report.main(argv)


def cmd_browse(argv) -> int:
    from analysis import browse
    return browse.main(argv)


def cmd_study(argv) -> int:
    from pipeline import studycli
    return studycli.main(argv)


def main(argv: list[str]) -> int:
    if argv[:1] in ([], ["run"], ["-h"], ["--help"]) and {"-h", "--help"} & set(argv):
        run_parser().print_help()  # help needs nothing installed
        return 0
    bootstrap.ensure(argv, str(Path(__file__).resolve()))
    if argv and argv[0] in COMMANDS and argv[0] != "run":
        return {"list": cmd_list, "show": cmd_show, "query": cmd_query, "compare": cmd_compare, "build": cmd_build,
                "test": cmd_test, "bench": cmd_bench, "report": cmd_report, "browse": cmd_browse,
                "study": cmd_study}[argv[0]](argv[1:])
    if argv and argv[0] == "run":
        argv = argv[1:]
    return cmd_run(run_parser().parse_args(argv))


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:  # outside a run (a run records itself as aborted)
        print("interrupted", file=sys.stderr)
        sys.exit(130)
