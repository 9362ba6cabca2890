-- The experiments' SCHEMA steps as each results.py wrote them by hand before
-- analysis/kit.py declared them (commit 69e17e0040b1fce458ba3d8c97c96cee30b2f0e9,
-- `git show <commit>:experiments/<name>/results.py`, SCHEMA evaluated).
-- tests/test_kit.py creates the tables from these and from the declarations
-- and compares them. Each step starts at a line `-- step <experiment> <n>`.

-- step coreprobe 1
CREATE TABLE IF NOT EXISTS coreprobe (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    iterations INTEGER,
    reps INTEGER,
    ns_per_op REAL,
    ns_mean REAL,
    cycles_per_op REAL,
    clock_ghz REAL,
    gbps REAL,
    impl TEXT,
    cpu INTEGER,
    node INTEGER,
    pinned INTEGER,
    on_node REAL,
    skipped INTEGER NOT NULL DEFAULT 0,
    note TEXT,
    PRIMARY KEY (run_id, name)
);

-- step forkstorm 1
CREATE TABLE IF NOT EXISTS forkstorm_ticks (
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
CREATE TABLE IF NOT EXISTS forkstorm_workers (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    worker INTEGER NOT NULL,
    jobs INTEGER NOT NULL,
    PRIMARY KEY (run_id, worker)
);

-- step kvio 1
CREATE TABLE IF NOT EXISTS kvio_levels (
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

-- step memeater 1
CREATE TABLE IF NOT EXISTS chunk_times (
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
CREATE VIEW IF NOT EXISTS v_chunk_cycle AS
    SELECT run_id, cycle, COUNT(*) AS chunks, MIN(wall_ms) AS min_ms, AVG(wall_ms) AS avg_ms,
           MAX(wall_ms) AS max_ms, SUM(wall_ms) AS total_ms, SUM(majflt) AS majflt
    FROM chunk_times GROUP BY run_id, cycle;
-- the guest's own clock beside the model's time (the guest marks
-- instance = cycle << 32 | chunk)
CREATE VIEW IF NOT EXISTS v_timing_chunks AS
    SELECT p.run_id, p.instance >> 32 AS cycle, p.instance & 4294967295 AS chunk, p.cpu,
           c.wall_ms AS guest_ms, (p.end_ps - p.begin_ps) / 1e9 AS modeled_ms, p.insns, p.misses,
           p.remote, p.stall_ps / 1e9 AS stall_ms
    FROM timing_phases p LEFT JOIN chunk_times c
      ON c.run_id = p.run_id AND c.cycle = p.instance >> 32 AND c.chunk = p.instance & 4294967295
    WHERE p.phase_id = 1;

-- step memeater 2
CREATE TABLE IF NOT EXISTS memeater_cycles (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    cycle INTEGER NOT NULL,
    wall_ms REAL NOT NULL,
    swap_used_kib INTEGER,
    pswpout INTEGER,
    pswpin INTEGER,
    pgscan_kswapd INTEGER,
    pgscan_direct INTEGER,
    pgsteal_kswapd INTEGER,
    pgsteal_direct INTEGER,
    pgmajfault INTEGER,
    PRIMARY KEY (run_id, cycle)
);

-- step mlockchurn 1
CREATE TABLE IF NOT EXISTS mlockchurn_chunks (
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

-- step qsbench 1
CREATE TABLE IF NOT EXISTS qsbench_procs (
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
