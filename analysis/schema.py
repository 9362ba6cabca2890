"""The results database's core schema: its tables and views as versioned
steps, each moving a database one version up (PRAGMA user_version).
analysis/db.py's migrate() applies them, then each experiment's own steps
(its results.py SCHEMA, versioned in schema_parts)."""
from __future__ import annotations

# Each entry moves the core schema one version up; never edit a released
# entry. (Entries 1, 2, 3 and 5 once also created experiments' tables and
# views: chunk_times, v_chunk_cycle, v_timing_chunks, mlockchurn_chunks,
# kvio_levels, forkstorm_*, qsbench_procs. Those now live in each
# experiment's results.py SCHEMA with the same DDL and IF NOT EXISTS, so
# databases made before and after the move end up the same.)
MIGRATIONS = [
    # 1: runs and what hangs off them
    """
    CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        status TEXT NOT NULL CHECK (status IN ('running', 'ok', 'failed', 'aborted')),
        reason TEXT,
        started_at TEXT NOT NULL,
        ended_at TEXT,
        wall_s REAL,
        boot_wall_s REAL,
        host TEXT NOT NULL,
        pid INTEGER,
        vmlab_version TEXT,
        topology TEXT NOT NULL,
        topology_sha256 TEXT NOT NULL,
        topology_toml TEXT NOT NULL,
        topology_shape TEXT NOT NULL,
        nodes INTEGER NOT NULL,
        cpus INTEGER NOT NULL,
        memory_mib_per_node INTEGER NOT NULL,
        scale REAL NOT NULL,
        native_isa TEXT NOT NULL,
        guest_isa TEXT NOT NULL,
        experiment TEXT NOT NULL,
        params_json TEXT NOT NULL,
        kernel_arch TEXT NOT NULL,
        kernel_release TEXT,
        kernel_source TEXT,
        patch_set TEXT NOT NULL,
        kernel_flavor TEXT NOT NULL,
        kernel_config_sha256 TEXT,
        kernel_sha256 TEXT,
        initramfs_sha256 TEXT,
        engine TEXT NOT NULL,
        engine_version TEXT NOT NULL,
        qemu_mode TEXT NOT NULL,
        timing_mode TEXT NOT NULL,
        seed INTEGER NOT NULL,
        command_line TEXT NOT NULL,
        log_path TEXT,
        log_sha256 TEXT,
        limitations TEXT NOT NULL,
        ingest_errors INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE records (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        lineno INTEGER NOT NULL,
        type TEXT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (run_id, lineno)
    );
    CREATE TABLE guest_nodes (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        node INTEGER NOT NULL,
        cpus TEXT NOT NULL,
        mem_total_kib INTEGER,
        hmat_read_latency_ns INTEGER,
        PRIMARY KEY (run_id, node)
    );
    CREATE TABLE guest_distances (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        src INTEGER NOT NULL,
        dst INTEGER NOT NULL,
        distance INTEGER NOT NULL,
        expected INTEGER NOT NULL,
        hops INTEGER NOT NULL,
        PRIMARY KEY (run_id, src, dst)
    );
    CREATE TABLE node_free (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        cycle INTEGER,
        chunk INTEGER,
        node INTEGER NOT NULL,
        free_kib INTEGER NOT NULL,
        PRIMARY KEY (run_id, seq, node)
    );
    CREATE TABLE node_mem (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        phase TEXT NOT NULL,
        node INTEGER NOT NULL,
        field TEXT NOT NULL,
        kib INTEGER NOT NULL,
        PRIMARY KEY (run_id, phase, node, field)
    );
    CREATE TABLE node_stat (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        phase TEXT NOT NULL,
        node INTEGER NOT NULL,
        counter TEXT NOT NULL,
        value INTEGER NOT NULL,
        PRIMARY KEY (run_id, phase, node, counter)
    );
    CREATE TABLE vmstat (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        phase TEXT NOT NULL,
        counter TEXT NOT NULL,
        value INTEGER NOT NULL,
        PRIMARY KEY (run_id, phase, counter)
    );
    CREATE TABLE kswapd (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        phase TEXT NOT NULL,
        node INTEGER NOT NULL,
        cpu_s REAL NOT NULL,
        PRIMARY KEY (run_id, phase, node)
    );
    CREATE TABLE metrics (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        value REAL,
        text TEXT,
        unit TEXT,
        PRIMARY KEY (run_id, name)
    );
    """,
    # 2: views for the common cross-run questions
    """
    CREATE VIEW v_vmstat_delta AS
        SELECT a.run_id, a.counter, a.value - b.value AS delta
        FROM vmstat a JOIN vmstat b ON a.run_id = b.run_id AND a.counter = b.counter
        WHERE a.phase = 'after' AND b.phase = 'before';
    CREATE VIEW v_node_mem_delta AS
        SELECT a.run_id, a.node, a.field, b.kib AS before_kib, a.kib AS after_kib, a.kib - b.kib AS delta_kib
        FROM node_mem a JOIN node_mem b ON a.run_id = b.run_id AND a.node = b.node AND a.field = b.field
        WHERE a.phase = 'after' AND b.phase = 'before';
    CREATE VIEW v_node_stat_delta AS
        SELECT a.run_id, a.node, a.counter, a.value - b.value AS delta
        FROM node_stat a JOIN node_stat b ON a.run_id = b.run_id AND a.node = b.node AND a.counter = b.counter
        WHERE a.phase = 'after' AND b.phase = 'before';
    CREATE VIEW v_runs AS
        SELECT id, status, topology, topology_shape, nodes, experiment, patch_set, kernel_flavor,
               kernel_release, qemu_mode, timing_mode, scale, started_at, wall_s, reason
        FROM runs;
    """,
    # 3: the timing model's results (timing/; analysis/timing.py ingests them)
    """
    ALTER TABLE runs ADD COLUMN timing_plugin TEXT;
    ALTER TABLE runs ADD COLUMN qemu_maxrss_kib INTEGER;
    CREATE TABLE timing_run (
        run_id INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
        mode TEXT NOT NULL, cycle_ps INTEGER, l2_ps INTEGER, ctrl_ps INTEGER, half_hop_ps INTEGER,
        state_bytes INTEGER, windows INTEGER, unmapped INTEGER, address_map TEXT
    );
    CREATE TABLE timing_cpu (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        cpu INTEGER NOT NULL, node INTEGER NOT NULL,
        insns INTEGER, time_ps INTEGER, stall_ps INTEGER, loads INTEGER, stores INTEGER, atomics INTEGER,
        l1_hits INTEGER, l2_hits INTEGER, misses INTEGER, remote INTEGER, c2c INTEGER, upgrades INTEGER,
        invals INTEGER, writebacks INTEGER, lock_xfers INTEGER, lock_ps INTEGER, io INTEGER, mem_ps INTEGER,
        PRIMARY KEY (run_id, cpu)
    );
    CREATE TABLE timing_kind (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        kind TEXT NOT NULL, insns INTEGER, accesses INTEGER, misses INTEGER, remote INTEGER, stall_ps INTEGER,
        PRIMARY KEY (run_id, kind)
    );
    CREATE TABLE timing_matrix (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        cpu_node INTEGER NOT NULL, home_node INTEGER NOT NULL, misses INTEGER NOT NULL, lat_ps INTEGER NOT NULL,
        PRIMARY KEY (run_id, cpu_node, home_node)
    );
    CREATE TABLE timing_hops (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        hops INTEGER NOT NULL, misses INTEGER, lat_ps INTEGER, c2c INTEGER, lock_xfers INTEGER, lock_ps INTEGER,
        PRIMARY KEY (run_id, hops)
    );
    CREATE TABLE timing_latency_hist (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        hops INTEGER NOT NULL, bin_ns INTEGER NOT NULL, count INTEGER NOT NULL,
        PRIMARY KEY (run_id, hops, bin_ns)
    );
    CREATE TABLE timing_symbols (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        symbol TEXT NOT NULL, accesses INTEGER, misses INTEGER, remote INTEGER, stall_ps INTEGER,
        lock_xfers INTEGER,
        PRIMARY KEY (run_id, symbol)
    );
    CREATE TABLE timing_resources (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        kind TEXT NOT NULL, src INTEGER NOT NULL, dst INTEGER NOT NULL, busy_ps INTEGER NOT NULL,
        PRIMARY KEY (run_id, kind, src, dst)
    );
    CREATE TABLE timing_phases (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        cpu INTEGER NOT NULL, phase_id INTEGER NOT NULL, phase TEXT, instance INTEGER NOT NULL,
        begin_ps INTEGER, end_ps INTEGER, insns INTEGER, loads INTEGER, stores INTEGER, atomics INTEGER,
        misses INTEGER, remote INTEGER, stall_ps INTEGER, mem_ps INTEGER, lock_xfers INTEGER, lock_ps INTEGER,
        PRIMARY KEY (run_id, cpu, phase_id, instance)
    );
    """,
    # 4: kernel comparisons (`./run.py --kernel a,b`): which runs form one, in order
    """
    CREATE TABLE compare_sets (
        id INTEGER PRIMARY KEY,
        created_at TEXT NOT NULL,
        label TEXT
    );
    CREATE TABLE compare_runs (
        compare_id INTEGER NOT NULL REFERENCES compare_sets(id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        PRIMARY KEY (compare_id, position)
    );
    CREATE VIEW v_compare AS
        SELECT c.compare_id, c.position, r.id AS run_id, r.patch_set, r.kernel_flavor, r.topology, r.experiment,
               r.status, r.wall_s
        FROM compare_runs c JOIN runs r ON r.id = c.run_id;
    """,
    # 5: records any reproducer may send (analysis/ingest.py): sanity
    # verdicts, kswapd CPU samples, lock_stat classes
    """
    CREATE TABLE repro_sanity (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        experiment TEXT NOT NULL,
        check_name TEXT NOT NULL,
        ok INTEGER NOT NULL,
        value REAL,
        expect TEXT,
        PRIMARY KEY (run_id, check_name)
    );
    CREATE TABLE repro_kswapd_samples (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        t_ms REAL NOT NULL,
        node INTEGER NOT NULL,
        cpu_s REAL NOT NULL,
        PRIMARY KEY (run_id, seq, node)
    );
    CREATE TABLE repro_lockstat (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        phase TEXT NOT NULL,
        rank INTEGER NOT NULL,
        class TEXT NOT NULL,
        contentions INTEGER,
        con_bounces INTEGER,
        wait_total_us REAL,
        wait_max_us REAL,
        acquisitions INTEGER,
        hold_total_us REAL,
        PRIMARY KEY (run_id, phase, rank)
    );
    """,
    # 6: per-vCPU guest time (our QEMU's series): how the run's clock was
    # kept, and each vCPU's own instructions, stall and clock at exit.
    """
    ALTER TABLE runs ADD COLUMN clock_model TEXT;
    ALTER TABLE runs ADD COLUMN quantum_ns INTEGER;
    ALTER TABLE runs ADD COLUMN disk_model TEXT;
    CREATE TABLE vcpu_clocks (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        cpu INTEGER NOT NULL,
        insns INTEGER NOT NULL,
        stall_ps INTEGER NOT NULL,
        clock_ps INTEGER NOT NULL,
        PRIMARY KEY (run_id, cpu)
    );
    """,
    # 7: experiments own their tables (experiments/<name>/results.py SCHEMA),
    # each versioned here on its own
    """
    CREATE TABLE schema_parts (
        part TEXT PRIMARY KEY,
        version INTEGER NOT NULL
    );
    """,
    # 8: studies (pipeline/study.py): a study file expanded into runs, each
    # keyed by a hash of what defines it (runs.run_key, also set on single
    # runs), so a study resumes; where each run executed.
    """
    ALTER TABLE runs ADD COLUMN run_key TEXT;
    CREATE INDEX runs_by_key ON runs (run_key, status);
    CREATE TABLE studies (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        path TEXT,
        sha256 TEXT NOT NULL,
        toml TEXT NOT NULL,
        created_at TEXT NOT NULL,
        UNIQUE (name, sha256)
    );
    CREATE TABLE study_runs (
        study_id INTEGER NOT NULL REFERENCES studies(id) ON DELETE CASCADE,
        key TEXT NOT NULL,
        position INTEGER NOT NULL,
        axes_json TEXT NOT NULL,
        spec_json TEXT NOT NULL,
        status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'ok', 'failed', 'aborted', 'lost')),
        run_id INTEGER REFERENCES runs(id) ON DELETE SET NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        executed_on TEXT,
        updated_at TEXT,
        PRIMARY KEY (study_id, key)
    );
    CREATE VIEW v_study_runs AS
        SELECT s.study_id, s.position, s.key, s.status, s.attempts, s.executed_on, s.run_id, s.axes_json,
               r.topology, r.experiment, r.patch_set, r.timing_mode, r.wall_s, r.reason
        FROM study_runs s LEFT JOIN runs r ON r.id = s.run_id;
    """,
    # 9: timing model 2 (memory-level parallelism): prefetches issued, and the
    # core's stalls by cause (timing/model_core.h); 0 on runs of model 1
    """
    ALTER TABLE timing_cpu ADD COLUMN prefetches INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE timing_cpu ADD COLUMN dep_stall_ps INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE timing_cpu ADD COLUMN fb_stall_ps INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE timing_cpu ADD COLUMN rob_stall_ps INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE timing_cpu ADD COLUMN sb_stall_ps INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE timing_cpu ADD COLUMN fence_stall_ps INTEGER NOT NULL DEFAULT 0;
    """,
    # 10: the engine's time the timing model does not price (x86 PAUSE beyond
    # a cycle, a halted vCPU's jump to the machine's time), which its clocks
    # now follow (vm_sync_time)
    """
    ALTER TABLE timing_cpu ADD COLUMN unpriced_ps INTEGER NOT NULL DEFAULT 0;
    """,
    # 11: how the run started: booted, or restored from a snapshot taken
    # after boot (engine/snapshot.py), and that snapshot's key
    """
    ALTER TABLE runs ADD COLUMN start TEXT NOT NULL DEFAULT 'booted';
    ALTER TABLE runs ADD COLUMN snapshot_key TEXT;
    """,
    # 12: timing model 3: TLBs, page walks and instruction fetch (timing/model_tlb.h), a shared L3:
    # per CPU the translation and fetch counters; per run the walks' entry reads by
    # where they were served (l1, l2, memory at a hop distance) and the leaves' sizes
    """
    ALTER TABLE timing_cpu ADD COLUMN dtlb_misses INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE timing_cpu ADD COLUMN itlb_misses INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE timing_cpu ADD COLUMN walks INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE timing_cpu ADD COLUMN walk_ps INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE timing_cpu ADD COLUMN walk_loads INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE timing_cpu ADD COLUMN walk_remote INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE timing_cpu ADD COLUMN tlb_flushes INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE timing_cpu ADD COLUMN l1i_misses INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE timing_cpu ADD COLUMN fetch_stall_ps INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE timing_cpu ADD COLUMN l3_hits INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE timing_walks (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        served TEXT NOT NULL CHECK (served IN ('l1', 'l2', 'memory')),
        hops INTEGER,
        loads INTEGER NOT NULL,
        lat_ps INTEGER NOT NULL
    );
    CREATE INDEX timing_walks_run ON timing_walks(run_id);
    """,
    # 13: simulation points picked from a run's basic-block vectors (sampling/simpoint.py)
    """
    CREATE TABLE simpoint_picks (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        vectors TEXT NOT NULL,
        max_k INTEGER NOT NULL,
        k INTEGER NOT NULL,
        seed INTEGER NOT NULL,
        cluster INTEGER NOT NULL,
        interval INTEGER NOT NULL,
        weight REAL NOT NULL,
        PRIMARY KEY (run_id, vectors, max_k, seed, cluster)
    );
    """,
    # 14: a sampled run's regions and its estimates (pipeline/sampled.py, sampling/estimate.py)
    """
    CREATE TABLE sample_regions (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        cluster INTEGER NOT NULL,
        point INTEGER NOT NULL,
        weight REAL NOT NULL,
        boundary INTEGER NOT NULL,
        warmup_slices INTEGER NOT NULL,
        late_insns INTEGER,
        detailed_insns INTEGER NOT NULL,
        elapsed_ps REAL NOT NULL,
        cpu_time_ps REAL NOT NULL,
        checkpoint_bytes INTEGER,
        wall_s REAL NOT NULL,
        PRIMARY KEY (run_id, cluster)
    );
    CREATE TABLE sample_estimates (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        figure TEXT NOT NULL,
        estimated REAL NOT NULL,
        actual REAL,
        error_pct REAL,
        check_run_id INTEGER REFERENCES runs(id),
        PRIMARY KEY (run_id, figure)
    );
    """,
    # 15: a region's functional warm-up (pipeline/sampled.py, plugin.functional_slices): the slices
    # before its priced warm-up in which the model only warmed, and their instructions (not in detailed_insns)
    """
    ALTER TABLE sample_regions ADD COLUMN functional_slices INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE sample_regions ADD COLUMN functional_insns INTEGER NOT NULL DEFAULT 0;
    """,
    # 16: the timing model's dataflow core (topologies/core.py: width, execution units, branch
    # prediction): per CPU its branches, their mispredicts and the time those cost, and the
    # instructions it could not decode (priced as one-cycle ALU operations); 0 on runs of earlier models
    """
    ALTER TABLE timing_cpu ADD COLUMN branches INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE timing_cpu ADD COLUMN mispredicts INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE timing_cpu ADD COLUMN mispredict_ps INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE timing_cpu ADD COLUMN unknown_insns INTEGER NOT NULL DEFAULT 0;
    """,
    # 17: the profile on the guest clock (timing/plugin_prof.c; analysis/profile.py ingests it): per CPU its
    # modeled time over the run, split into symbols per phase (their columns), idle and drift; the sampled
    # call paths (the kernel's, and a user sample's symbol under its program), folded root first
    """
    CREATE TABLE profile_cpus (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        cpu INTEGER NOT NULL,
        started INTEGER NOT NULL,
        halted_at_exit INTEGER NOT NULL,
        start_ps INTEGER NOT NULL,
        clock_ps INTEGER,
        idle_ps INTEGER NOT NULL,
        drift_ps INTEGER NOT NULL,
        insns INTEGER NOT NULL,
        samples INTEGER NOT NULL,
        sample_failures INTEGER NOT NULL,
        PRIMARY KEY (run_id, cpu)
    );
    CREATE TABLE profile_symbols (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        cpu INTEGER NOT NULL,
        phase INTEGER NOT NULL,
        phase_name TEXT,
        phase_instance INTEGER,
        symbol TEXT NOT NULL,
        dso TEXT NOT NULL,
        insns INTEGER NOT NULL,
        insn_ps INTEGER NOT NULL,
        core_ps INTEGER NOT NULL,
        mem_ps INTEGER NOT NULL,
        lock_ps INTEGER NOT NULL,
        fetch_ps INTEGER NOT NULL,
        pause_ps INTEGER NOT NULL,
        pauses INTEGER NOT NULL,
        time_ps INTEGER NOT NULL,
        PRIMARY KEY (run_id, cpu, phase, symbol, dso)
    );
    CREATE INDEX profile_symbols_by_symbol ON profile_symbols (run_id, symbol);
    CREATE INDEX profile_symbols_by_phase ON profile_symbols (run_id, phase);
    CREATE TABLE profile_stacks (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        cpu INTEGER NOT NULL,
        phase INTEGER NOT NULL,
        phase_name TEXT,
        stack TEXT NOT NULL,
        ps INTEGER NOT NULL,
        samples INTEGER NOT NULL,
        PRIMARY KEY (run_id, cpu, phase, stack)
    );
    CREATE INDEX profile_stacks_by_phase ON profile_stacks (run_id, phase);
    CREATE VIEW v_profile AS
        SELECT s.run_id, s.symbol, s.dso, SUM(s.insns) AS insns, SUM(s.time_ps) AS time_ps,
               SUM(s.insn_ps) AS insn_ps, SUM(s.core_ps) AS core_ps, SUM(s.mem_ps) AS mem_ps,
               SUM(s.lock_ps) AS lock_ps, SUM(s.fetch_ps) AS fetch_ps, SUM(s.pause_ps) AS pause_ps,
               SUM(s.pauses) AS pauses,
               100.0 * SUM(s.time_ps) / NULLIF((SELECT SUM(x.time_ps) FROM profile_symbols x
                                                WHERE x.run_id = s.run_id)
                                               + (SELECT SUM(c.idle_ps + c.drift_ps) FROM profile_cpus c
                                                  WHERE c.run_id = s.run_id), 0) AS share_pct
        FROM profile_symbols s GROUP BY s.run_id, s.symbol, s.dso;
    """,
]
SCHEMA_VERSION = len(MIGRATIONS)
