"""What `./run.py browse` tells Datasette about the results database: what
each table and view holds, what the main columns mean, and canned queries
for the common questions. The core's tables are described here; each
experiment's are described where they are declared, in its own results.py
(analysis/kit.py), and read from there (tables(), views()).
tests/test_browse.py checks every table and view of a new database is
described and every canned query runs."""
from __future__ import annotations

from analysis import experiment_results
from analysis.kit import Table, View

TABLES = {
    # the run and its provenance
    "runs": ("One row per run: how it was produced (topology and its hash, experiment and parameters, kernel and "
             "patch set, engine and its patch series, clock model, timing mode, scale, seed), its status and its "
             "limitations.", {
        "status": "ok, failed (panic, timeout, a failed check), aborted (Ctrl-C or a lost worker) or running",
        "reason": "why a run failed or was aborted",
        "topology_sha256": "hash of the topology file's text: runs with the same hash ran on the same machine",
        "topology_shape": "the interconnect, e.g. '4x8 torus' or '2 sockets'",
        "scale": "memory per node of the simulated machine over the real one's (runs keep shape, not size)",
        "params_json": "every experiment parameter, the sizes derived from the topology, and the guest command",
        "patch_set": "the kernel's patch set from images/patches/ (vanilla = Linux 6.1 as Debian ships it; "
                     "set@6.12: the set on Linux 6.12)",
        "kernel_flavor": "config flavor: default, lockstat (LOCK_STAT on) or mglru (the multi-generational LRU on)",
        "engine_version": "QEMU 10.0.2 and the hash of vmlab's patch series, or Debian's binary",
        "clock_model": "how guest time was kept: per-vCPU clocks, ps per instruction, quantum, stalls charged",
        "timing_mode": "timing model: off, fast (counts) or detailed (every access priced on the topology)",
        "disk_model": "the disk model swap and data disks completed in (guest time), if any; it ends 'the default: "
                      "the topology names no disk model' when the topology named none (topologies/disks.py)",
        "limitations": "what this run does not model, stated per run",
        "run_key": "hash of what defines the run (pipeline/spec.py): studies skip a key already ok",
        "wall_s": "host wall seconds of the experiment (not guest time)",
        "host": "the machine the run executed on",
    }),
    "records": ("Every tagged record the guest printed, verbatim (JSON body), so any figure can be re-derived.", {}),
    "metrics": ("Key figures of a run, by name, with unit: the experiment's own and the guest's settings (guest.*).",
                {"name": "figure name, e.g. memeater.swap_peak_mib or qsbench.elapsed_s", "value": "numeric value",
                 "text": "the value as text when it is not a number", "unit": "unit of value"}),
    "guest_nodes": ("The NUMA nodes the guest kernel saw: its CPUs, memory and HMAT latency.", {}),
    "guest_distances": ("SLIT distances the guest read, beside the ones the topology implies and the hop count.",
                        {"distance": "what the guest read from /sys", "expected": "10 x latency ratio from the "
                         "topology", "hops": "hops between the two nodes on the interconnect"}),
    "node_free": ("Free memory of every node after each chunk (memeater): shows nodes filling in hop order.",
                  {"seq": "sample number over the run", "free_kib": "MemFree of the node, KiB"}),
    "node_mem": ("Per-node meminfo fields at the before / peak / after snapshots.", {}),
    "node_stat": ("Per-node NUMA and reclaim counters (numastat, pages written out) at each snapshot.", {}),
    "vmstat": ("/proc/vmstat counters at each snapshot (before, peak, after).",
               {"phase": "before, peak or after", "counter": "a /proc/vmstat name, e.g. pswpout, pgscan_kswapd"}),
    "kswapd": ("CPU seconds each node's kswapd used, at each snapshot.", {"cpu_s": "kswapd's CPU time, s"}),
    "repro_sanity": ("Each reproducer's sanity checks: did the run do what it is for.", {}),
    "repro_kswapd_samples": ("kswapd CPU time sampled over the run, per node: a storm shows as a flat 100 %.", {}),
    "repro_lockstat": ("The most contended lock classes (lockstat flavor kernels), per phase.",
                       {"class": "lock class, e.g. &anon_vma->rwsem or ptlock_ptr(page)",
                        "contentions": "times a CPU waited for it", "wait_total_us": "total wait, us"}),
    "vcpu_clocks": ("Each vCPU's own clock at exit: its instructions, the stalls the timing model charged, and "
                    "its guest time.", {"clock_ps": "the vCPU's guest time, ps", "stall_ps": "modeled stalls, ps"}),
    "compare_sets": ("Kernel comparisons (`./run.py --kernel a,b`): one row each.", {}),
    "compare_runs": ("The runs of each kernel comparison, in column order (the first is the baseline).", {}),
    "schema_parts": ("Schema version of each experiment's own tables.", {}),
    "studies": ("Study files that ran into this database (studies/*.toml): name, file text and its hash.", {}),
    "study_runs": ("Every run a study asked for: its key, the axes that vary, its status, attempts and where it "
                   "executed.", {"key": "run key (runs.run_key)", "axes_json": "the study axes of this run",
                                 "executed_on": "host and pool (local pool or the Dask worker's address)",
                                 "attempts": "tries, counting runs whose worker was lost"}),
}
# (the experiments' own tables come here: each declares its tables in its
# results.py, analysis/kit.py; see experiment_tables())
MODEL_TABLES = {
    # the timing model (--timing fast|detailed)
    "timing_run": ("The timing model's settings for a run.", {}),
    "timing_cpu": ("Per CPU: instructions, modeled time and stalls, hits, misses, remote accesses, "
                   "cache-to-cache and lock-line transfers.", {}),
    "timing_kind": ("Modeled accesses and stalls by kind (user, kernel, ...).", {}),
    "timing_matrix": ("Misses by CPU node x home node, with modeled latency: where remote memory is paid.",
                      {"cpu_node": "node of the CPU that missed", "home_node": "node owning the memory"}),
    "timing_hops": ("Misses, lock transfers and their modeled latency by hop count.",
                    {"hops": "hops between the CPU's node and the home node", "lat_ps": "total modeled ps"}),
    "timing_latency_hist": ("Histogram of modeled miss latency per hop count.", {}),
    "simpoint_picks": ("Simulation points picked from a run's basic-block vectors (./run.py simpoint RUN: SimPoint "
                       "3.2's algorithm, our implementation): per cluster the interval nearest its centroid and the "
                       "cluster's weight.",
                       {"vectors": "the vector file: global (machine-wide slices) or cpuN",
                        "interval": "the simulation point: an interval (a line of the file) from 0",
                        "weight": "the cluster's share of the intervals"}),
    "sample_regions": ("A --timing sampled run's regions (pipeline/sampled.py): per simulation point the checkpoint "
                       "it was restored from, its warm-up and measured slice under the detailed model, and what the "
                       "measured slice cost.",
                       {"point": "the simulation point: a machine-wide slice of the profile, from 0",
                        "weight": "its cluster's share of the profile's slices",
                        "boundary": "the slice boundary of the checkpoint it started from (0: the snapshot after boot)",
                        "warmup_slices": "slices run before the measured one (point - boundary), the functional "
                                         "ones included",
                        "functional_slices": "the first of those, in which the model only warmed (caches, TLBs, "
                                             "directory, streams) and charged nothing (--sample-functional)",
                        "functional_insns": "instructions of the functional slices (not in detailed_insns)",
                        "late_insns": "instructions past the boundary the checkpoint was taken at (a modelled disk "
                                      "request was outstanding there)",
                        "detailed_insns": "instructions the region ran priced by the detailed model, its priced "
                                          "warm-up included",
                        "elapsed_ps": "the measured slice's modeled time: the latest vCPU clock's advance",
                        "cpu_time_ps": "the measured slice's modeled time summed over the vCPUs",
                        "checkpoint_bytes": "the checkpoint's saved state (its RAM and devices), bytes",
                        "wall_s": "the region run's wall time"}),
    "sample_estimates": ("A --timing sampled run's estimates of the whole run's modeled figures "
                         "(sampling/estimate.py: slices x the weighted regions' figures), and after "
                         "./run.py sample-check the full detailed run's value and the error.",
                         {"figure": "elapsed_ps (busy_ps from the regions per instruction + idle_ps, the "
                                    "machine's idle time as the profile measured it), "
                                    "elapsed_ps.per_insn (all of it per instruction), cpu_time_ps, "
                                    "total.<counter> (summed over CPUs), "
                                    "cpuN.stall_ps, remote_share, symbol.<name>.stall_ps or .stall_share",
                          "actual": "the full detailed run's value (NULL before sample-check, or if it has none)",
                          "error_pct": "100 x (estimated - actual) / actual",
                          "check_run_id": "the full detailed run it was checked against"}),
    "timing_walks": ("Page-walk entry reads (timing model 3) by where they were served: the walking CPU's L1 or L2, "
                     "or memory at a hop distance from it (the page-table page's home node, or its owner's cache).",
                     {"served": "l1, l2 or memory", "hops": "hops to where a memory read was served (NULL for l1/l2)",
                      "loads": "entry reads", "lat_ps": "their summed latency, ps"}),
    "timing_symbols": ("Modeled accesses, misses and stall by kernel symbol (System.map).", {}),
    "timing_resources": ("Busy time of each modeled link and memory controller.", {}),
    "timing_phases": ("Per phase a guest program marked (begin/end ids): modeled time, misses, stalls.", {}),
    # the profile on the guest clock (timing/plugin_prof.c, analysis/profile.py; ./run.py profile RUN)
    "profile_cpus": ("The profile's CPUs: each vCPU's modeled time over the run (clock_ps - start_ps) is its "
                     "symbols' time (profile_symbols) + idle_ps + drift_ps.",
                     {"started": "0 if the vCPU ran no instruction under the profile (start_ps = clock_ps then)",
                      "halted_at_exit": "1 if the vCPU was in HLT when QEMU exited (its last stretch is idle)",
                      "start_ps": "the vCPU's clock when the profile started it (the restore, or its first "
                                  "instruction)",
                      "clock_ps": "the vCPU's clock at exit (vcpu_clocks.clock_ps; NULL if QEMU did not report it)",
                      "idle_ps": "halted time (HLT until the next wake-up, and the last stretch if it ended halted)",
                      "drift_ps": "the clock's advance no column explains (signed; expected 0)",
                      "insns": "instructions the profile attributed (the sum of its symbols' insns)",
                      "samples": "call paths sampled (detailed mode; a user-mode sample is its symbol alone)",
                      "sample_failures": "samples whose kernel stack could not be read (kept as the leaf alone)"}),
    "profile_symbols": ("Where each CPU's modeled time went, per symbol (kernel: System.map; the guest programs': "
                        "their symbol tables) and phase: time_ps = insn_ps + core_ps + mem_ps + lock_ps + fetch_ps + "
                        "pause_ps.",
                        {"phase": "index of the phase instance (0: outside every phase)",
                         "phase_name": "the phase's name (VMLAB_PHASES), NULL outside every phase",
                         "phase_instance": "the instance the program gave its marker",
                         "dso": "[kernel], a program's name, [user] (user code outside every known symbol) or "
                                "[boot] (before the kernel's first instruction)",
                         "insn_ps": "the instructions at the engine's time per instruction (the core's best case)",
                         "core_ps": "the core's charges beyond that (dataflow, branch mispredictions)",
                         "mem_ps": "data-access stalls, page walks included",
                         "lock_ps": "lock hand-offs: an atomic access waiting for the line's last change by "
                                    "another vCPU",
                         "fetch_ps": "instruction fetch stalls", "pause_ps": "x86 PAUSE's extra latency",
                         "pauses": "PAUSE instructions", "time_ps": "the symbol's time: the five columns' sum"}),
    "profile_stacks": ("Sampled call paths (detailed mode): the kernel's, folded root first ('a;b;leaf'), and a "
                       "user sample's symbol under its program ('[memeater];memset'), each sample weighted by its "
                       "vCPU's busy time since the previous one: `./run.py profile RUN --folded`.",
                       {"stack": "the frames, root first, separated by ';'", "ps": "the samples' summed weight",
                        "samples": "how many samples took this path"}),
}
VIEWS = {
    "v_runs": "The runs in short: status, machine, experiment, kernel, modes, wall time, reason.",
    "v_vmstat_delta": "Each /proc/vmstat counter's change over a run (after - before).",
    "v_node_mem_delta": "Each node's meminfo change over a run.",
    "v_node_stat_delta": "Each node's NUMA and reclaim counter change over a run.",
    "v_compare": "Kernel comparisons with their runs' patch sets and status.",
}
# (the experiments' views come here)
LATER_VIEWS = {
    "v_study_runs": "Study runs with their run's machine, experiment, kernel and outcome.",
    "v_profile": "The profile per run and symbol over all CPUs and phases, with its share of the CPUs' time "
                 "(share_pct: of the symbols' time + idle + drift).",
}

QUERIES = {
    "latest_runs": ("Latest runs", "The 50 latest runs with status and reason.",
                    "SELECT id, status, topology, experiment, patch_set, timing_mode, wall_s, reason "
                    "FROM runs ORDER BY id DESC LIMIT 50"),
    "swap_and_kswapd": ("Swap and kswapd per run", "Pages swapped out and in, and kswapd CPU seconds.",
                        "SELECT r.id, r.topology, r.experiment, r.patch_set, "
                        "(SELECT delta FROM v_vmstat_delta v WHERE v.run_id = r.id AND counter = 'pswpout') "
                        "AS pswpout, "
                        "(SELECT delta FROM v_vmstat_delta v WHERE v.run_id = r.id AND counter = 'pswpin') AS pswpin, "
                        "(SELECT ROUND(SUM(a.cpu_s - b.cpu_s), 2) FROM kswapd a JOIN kswapd b ON a.run_id = b.run_id "
                        "AND a.node = b.node AND b.phase = 'before' WHERE a.run_id = r.id AND a.phase = 'after') "
                        "AS kswapd_s FROM runs r WHERE r.status = 'ok' ORDER BY r.id DESC"),
    "memeater_ms_by_hops": ("memeater: ms per chunk by hop distance",
                            "First-cycle guest ms per chunk, by hops from the CPU's node (node 0 for CPU 0).",
                            "SELECT c.run_id, r.topology, d.hops, COUNT(*) AS chunks, ROUND(AVG(c.wall_ms), 2) AS "
                            "avg_ms, ROUND(MAX(c.wall_ms), 2) AS max_ms FROM chunk_times c JOIN runs r ON r.id = "
                            "c.run_id JOIN guest_distances d ON d.run_id = c.run_id AND d.src = 0 AND d.dst = "
                            "c.main_node WHERE c.cycle = 0 GROUP BY c.run_id, d.hops ORDER BY c.run_id, d.hops"),
    "latency_by_hops": ("Modeled latency and remote share by hops",
                        "The timing model's misses, average miss latency and lock-transfer cost per hop count.",
                        "SELECT h.run_id, r.topology, h.hops, h.misses, ROUND(h.lat_ps / 1000.0 / "
                        "NULLIF(h.misses, 0), 1) AS ns_per_miss, h.lock_xfers, ROUND(h.lock_ps / 1000.0 / "
                        "NULLIF(h.lock_xfers, 0), 1) AS ns_per_lock_xfer FROM timing_hops h JOIN runs r ON r.id = "
                        "h.run_id ORDER BY h.run_id, h.hops"),
    "lock_contention": ("Lock contention", "The most contended lock classes per run (lockstat flavor).",
                        "SELECT l.run_id, r.experiment, r.patch_set, r.cpus, l.class, l.contentions, "
                        "l.wait_total_us FROM repro_lockstat l JOIN runs r ON r.id = l.run_id WHERE l.rank < 5 "
                        "ORDER BY l.run_id, l.rank"),
    "compare_figures": ("Kernel comparison figures", "Metrics of the runs of one comparison, kernel by kernel.",
                        "SELECT c.compare_id, c.position, r.patch_set, m.name, m.value, m.unit FROM compare_runs c "
                        "JOIN runs r ON r.id = c.run_id JOIN metrics m ON m.run_id = r.id WHERE m.value IS NOT NULL "
                        "AND c.compare_id = (SELECT MAX(id) FROM compare_sets) ORDER BY m.name, c.position"),
    "profile_top": ("Profile: top symbols", "Each run's ten symbols with the most CPU time (./run.py profile RUN).",
                    "SELECT run_id, symbol, dso, ROUND(share_pct, 2) AS share_pct, ROUND(time_ps / 1e9, 3) AS ms, "
                    "insns, ROUND(pause_ps / 1e9, 3) AS pause_ms, ROUND(mem_ps / 1e9, 3) AS mem_ms, "
                    "ROUND(lock_ps / 1e9, 3) AS lock_ms FROM "
                    "(SELECT *, ROW_NUMBER() OVER (PARTITION BY run_id ORDER BY time_ps DESC) AS n FROM v_profile) "
                    "WHERE n <= 10 ORDER BY run_id DESC, time_ps DESC"),
    "study_progress": ("Study progress", "Runs of each study by status, and where they executed.",
                       "SELECT s.study_id, st.name, s.status, COUNT(*) AS runs, GROUP_CONCAT(DISTINCT s.executed_on) "
                       "AS executed_on FROM study_runs s JOIN studies st ON st.id = s.study_id "
                       "GROUP BY s.study_id, s.status ORDER BY s.study_id, s.status"),
}


# The order the experiments' tables have been listed in (docs/reference/
# schema.md is generated in this order); an experiment not named here comes
# after these, by name.
def experiment_tables() -> list[Table | View]:
    """Every experiment's declared tables and views (its results.py TABLES)."""
    names = sorted(experiment_results.all_results())
    return [t for n in names for t in experiment_results.results(n).TABLES]


def tables() -> dict[str, tuple[str, dict[str, str]]]:
    """table -> (what it holds, {column: what it means}), the core's and the experiments'."""
    mine = {t.name: (t.doc, t.descriptions()) for t in experiment_tables() if isinstance(t, Table)}
    return {**TABLES, **mine, **MODEL_TABLES}


def views() -> dict[str, str]:
    """view -> what it shows, the core's and the experiments'."""
    return {**VIEWS, **{v.name: v.doc for v in experiment_tables() if isinstance(v, View)}, **LATER_VIEWS}


def metadata(db_name: str) -> dict:
    tables_ = {name: {"description": d, **({"columns": cols} if cols else {})}
               for name, (d, cols) in tables().items()}
    tables_.update({name: {"description": d} for name, d in views().items()})
    return {
        "title": "vmlab results",
        "description": ("Runs of Linux memory-management reproducers on simulated NUMA machines (vmlab). "
                        "Read-only. Every figure hangs off a run (runs.id); start from v_runs or a canned query."),
        "databases": {db_name: {
            "tables": tables_,
            "queries": {k: {"title": t, "description": d, "sql": sql} for k, (t, d, sql) in QUERIES.items()},
        }},
    }
