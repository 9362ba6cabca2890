/*
 * Facts the guest programs, the timing plugin and the host's Python share,
 * written once. C uses these macros; protocol/facts.py reads this file
 * with a small regex reader, so every fact stays a plain #define: a string
 * literal, an integer literal, or an X-macro list of X(...) entries whose
 * arguments are integers, identifiers or string literals.
 */
#ifndef VMLAB_FACTS_H
#define VMLAB_FACTS_H

/* Every record is one console line: this tag, then a JSON object
 * (experiments/lib/json.c writes it, analysis/records.py finds it). */
#define VMLAB_TAG "@@VMLAB "

/* Phase markers for the timing model (timing/plugin.c): on x86 the marker
 * is `xchg %bx,%bx` with rax = VMLAB_PHASE_MAGIC << 8 | op ('VML'),
 * rdi = phase id, rsi = instance. */
#define VMLAB_PHASE_MAGIC 0x564d4c
/* Marker ops: 1 a phase begins, 2 it ends, 3 the experiment begins (a
 * booted run's model starts pricing here: `vmlab-probe snapshot before`). */
#define VMLAB_OP_PRICE 3

/* The guest's phases: X(id, C name, host name). The C name gives
 * VL_PHASE_<name> (vmlab.h); the host stores the name beside the id
 * (timing_phases.phase) and joins phases by id. */
#define VMLAB_PHASES(X) \
	X(1, MEMEATER_CHUNK, "memeater.chunk") \
	X(2, LATPROBE_CHASE, "latprobe.chase") \
	X(3, LATPROBE_PINGPONG, "latprobe.pingpong")

/* What reclaim did: the /proc/vmstat counters every reproducer reports per
 * phase (VL_RECLAIM, vl_reclaim_delta), in this order. */
#define VMLAB_RECLAIM_COUNTERS(X) \
	X(pgscan_kswapd) X(pgscan_direct) X(pgsteal_kswapd) X(pgsteal_direct) X(pswpin) X(pswpout) \
	X(pgmajfault) X(pgfault) X(pgpgin) X(pgpgout) X(allocstall_normal) X(allocstall_dma32) X(oom_kill)

#endif
