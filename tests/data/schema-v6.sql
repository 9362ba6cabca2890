-- A results database as vmlab made it at schema version 6, before experiments
-- owned their tables (tests/test_db.py checks it migrates to today's schema).
PRAGMA user_version = 6;
CREATE TABLE chunk_times (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        cycle INTEGER NOT NULL,
        chunk INTEGER NOT NULL,
        wall_ms REAL NOT NULL,
        cpu_ms REAL,
        t_ms REAL,
        minflt INTEGER,
        majflt INTEGER,
        absent_pages INTEGER,
        sampled_pages INTEGER,
        main_node INTEGER,
        swap_used_kib INTEGER,
        PRIMARY KEY (run_id, cycle, chunk)
    );
CREATE TABLE compare_runs (
        compare_id INTEGER NOT NULL REFERENCES compare_sets(id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        PRIMARY KEY (compare_id, position)
    );
CREATE TABLE compare_sets (
        id INTEGER PRIMARY KEY,
        created_at TEXT NOT NULL,
        label TEXT
    );
CREATE TABLE forkstorm_ticks (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        t_ms REAL NOT NULL,
        jobs INTEGER NOT NULL,
        live_workers INTEGER,
        pswpout INTEGER,
        pgscan INTEGER,
        kswapd_s REAL,
        PRIMARY KEY (run_id, seq)
    );
CREATE TABLE forkstorm_workers (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        worker INTEGER NOT NULL,
        jobs INTEGER NOT NULL,
        PRIMARY KEY (run_id, worker)
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
CREATE TABLE guest_nodes (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        node INTEGER NOT NULL,
        cpus TEXT NOT NULL,
        mem_total_kib INTEGER,
        hmat_read_latency_ns INTEGER,
        PRIMARY KEY (run_id, node)
    );
CREATE TABLE kswapd (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        phase TEXT NOT NULL,
        node INTEGER NOT NULL,
        cpu_s REAL NOT NULL,
        PRIMARY KEY (run_id, phase, node)
    );
CREATE TABLE kvio_levels (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        level INTEGER NOT NULL,
        io_frac REAL NOT NULL,
        io_mib INTEGER NOT NULL,
        io_ok INTEGER,
        io_s REAL,
        ops INTEGER,
        elapsed_s REAL,
        ops_per_s REAL,
        kswapd_s REAL,
        pswpin INTEGER,
        pswpout INTEGER,
        pgmajfault INTEGER,
        pgfault INTEGER,
        pgscan_kswapd INTEGER,
        pgsteal_kswapd INTEGER,
        pgscan_direct INTEGER,
        pgsteal_direct INTEGER,
        kswapd_efficiency REAL,
        kswapd_velocity REAL,
        direct_efficiency REAL,
        direct_velocity REAL,
        PRIMARY KEY (run_id, level)
    );
CREATE TABLE metrics (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        value REAL,
        text TEXT,
        unit TEXT,
        PRIMARY KEY (run_id, name)
    );
CREATE TABLE mlockchurn_chunks (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        chunk INTEGER NOT NULL,
        slot INTEGER NOT NULL,
        steps INTEGER,
        ok INTEGER,
        mlock_ms REAL NOT NULL,
        step_median_ms REAL,
        step_max_ms REAL,
        wall_ms REAL,
        t_ms REAL,
        majflt INTEGER,
        minflt INTEGER,
        kswapd_s REAL,
        pgscan_kswapd INTEGER,
        pgscan_direct INTEGER,
        pgsteal_kswapd INTEGER,
        pgsteal_direct INTEGER,
        PRIMARY KEY (run_id, chunk)
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
CREATE TABLE qsbench_procs (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        proc INTEGER NOT NULL,
        elements INTEGER NOT NULL,
        fill_ms REAL,
        sort_ms REAL,
        elapsed_ms REAL,
        user_ms REAL,
        sys_ms REAL,
        majflt INTEGER,
        minflt INTEGER,
        checksum TEXT,
        unsorted INTEGER,
        PRIMARY KEY (run_id, proc)
    );
CREATE TABLE records (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        lineno INTEGER NOT NULL,
        type TEXT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (run_id, lineno)
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
CREATE TABLE repro_sanity (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        experiment TEXT NOT NULL,
        check_name TEXT NOT NULL,
        ok INTEGER NOT NULL,
        value REAL,
        expect TEXT,
        PRIMARY KEY (run_id, check_name)
    );
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
    , timing_plugin TEXT, qemu_maxrss_kib INTEGER, clock_model TEXT, quantum_ns INTEGER, disk_model TEXT);
CREATE TABLE timing_cpu (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        cpu INTEGER NOT NULL, node INTEGER NOT NULL,
        insns INTEGER, time_ps INTEGER, stall_ps INTEGER, loads INTEGER, stores INTEGER, atomics INTEGER,
        l1_hits INTEGER, l2_hits INTEGER, misses INTEGER, remote INTEGER, c2c INTEGER, upgrades INTEGER,
        invals INTEGER, writebacks INTEGER, lock_xfers INTEGER, lock_ps INTEGER, io INTEGER, mem_ps INTEGER,
        PRIMARY KEY (run_id, cpu)
    );
CREATE TABLE timing_hops (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        hops INTEGER NOT NULL, misses INTEGER, lat_ps INTEGER, c2c INTEGER, lock_xfers INTEGER, lock_ps INTEGER,
        PRIMARY KEY (run_id, hops)
    );
CREATE TABLE timing_kind (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        kind TEXT NOT NULL, insns INTEGER, accesses INTEGER, misses INTEGER, remote INTEGER, stall_ps INTEGER,
        PRIMARY KEY (run_id, kind)
    );
CREATE TABLE timing_latency_hist (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        hops INTEGER NOT NULL, bin_ns INTEGER NOT NULL, count INTEGER NOT NULL,
        PRIMARY KEY (run_id, hops, bin_ns)
    );
CREATE TABLE timing_matrix (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        cpu_node INTEGER NOT NULL, home_node INTEGER NOT NULL, misses INTEGER NOT NULL, lat_ps INTEGER NOT NULL,
        PRIMARY KEY (run_id, cpu_node, home_node)
    );
CREATE TABLE timing_phases (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        cpu INTEGER NOT NULL, phase_id INTEGER NOT NULL, phase TEXT, instance INTEGER NOT NULL,
        begin_ps INTEGER, end_ps INTEGER, insns INTEGER, loads INTEGER, stores INTEGER, atomics INTEGER,
        misses INTEGER, remote INTEGER, stall_ps INTEGER, mem_ps INTEGER, lock_xfers INTEGER, lock_ps INTEGER,
        PRIMARY KEY (run_id, cpu, phase_id, instance)
    );
CREATE TABLE timing_resources (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        kind TEXT NOT NULL, src INTEGER NOT NULL, dst INTEGER NOT NULL, busy_ps INTEGER NOT NULL,
        PRIMARY KEY (run_id, kind, src, dst)
    );
CREATE TABLE timing_run (
        run_id INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
        mode TEXT NOT NULL, cycle_ps INTEGER, l2_ps INTEGER, ctrl_ps INTEGER, half_hop_ps INTEGER,
        state_bytes INTEGER, windows INTEGER, unmapped INTEGER, address_map TEXT
    );
CREATE TABLE timing_symbols (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        symbol TEXT NOT NULL, accesses INTEGER, misses INTEGER, remote INTEGER, stall_ps INTEGER,
        lock_xfers INTEGER,
        PRIMARY KEY (run_id, symbol)
    );
CREATE TABLE vcpu_clocks (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        cpu INTEGER NOT NULL,
        insns INTEGER NOT NULL,
        stall_ps INTEGER NOT NULL,
        clock_ps INTEGER NOT NULL,
        PRIMARY KEY (run_id, cpu)
    );
CREATE TABLE vmstat (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        phase TEXT NOT NULL,
        counter TEXT NOT NULL,
        value INTEGER NOT NULL,
        PRIMARY KEY (run_id, phase, counter)
    );
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
CREATE VIEW v_chunk_cycle AS
        SELECT run_id, cycle, COUNT(*) AS chunks, MIN(wall_ms) AS min_ms, AVG(wall_ms) AS avg_ms,
               MAX(wall_ms) AS max_ms, SUM(wall_ms) AS total_ms, SUM(majflt) AS majflt
        FROM chunk_times GROUP BY run_id, cycle;
CREATE VIEW v_runs AS
        SELECT id, status, topology, topology_shape, nodes, experiment, patch_set, kernel_flavor,
               kernel_release, qemu_mode, timing_mode, scale, started_at, wall_s, reason
        FROM runs;
CREATE VIEW v_timing_chunks AS
        SELECT p.run_id, p.instance >> 32 AS cycle, p.instance & 4294967295 AS chunk, p.cpu,
               c.wall_ms AS guest_ms, (p.end_ps - p.begin_ps) / 1e9 AS modeled_ms, p.insns, p.misses,
               p.remote, p.stall_ps / 1e9 AS stall_ms
        FROM timing_phases p LEFT JOIN chunk_times c
          ON c.run_id = p.run_id AND c.cycle = p.instance >> 32 AND c.chunk = p.instance & 4294967295
        WHERE p.phase_id = 1;
CREATE VIEW v_compare AS
        SELECT c.compare_id, c.position, r.id AS run_id, r.patch_set, r.kernel_flavor, r.topology, r.experiment,
               r.status, r.wall_s
        FROM compare_runs c JOIN runs r ON r.id = c.run_id;
