/* vmlab timing model: the core's side of memory-level parallelism. Included
 * by model_int.h (the state) and by model_access.c (the static inline rules,
 * so the per-access path stays free of calls).
 *
 * An out-of-order core does not wait for a miss when it issues it. It waits
 * only when
 *   (a) an access needs a value a miss still in flight will return (a pointer
 *       chase: the address of this access lies within DEP_WINDOW of an 8-byte
 *       value a load returned, whose line has not arrived yet),
 *   (b) every L1D fill buffer (Intel's LFB, the EV7's miss address file) is
 *       busy when an L1 miss must issue,
 *   (c) it has issued a reorder window's worth of instructions past the
 *       oldest load miss still outstanding (the ROB is full behind it),
 *   (d) its store buffer is full of stores still waiting for their lines, or
 *   (e) it executes a lock-prefixed/atomic access: that drains the store
 *       buffer and waits for the outstanding misses, then pays its own
 *       transaction in full (x86 locked operations are full barriers).
 * L2 misses and prefetches also hold an L2 queue entry (Intel's superqueue)
 * until their line arrives; a miss that finds the queue full starts when an
 * entry frees (it waits in its fill buffer, the core goes on).
 *
 * The L2 streamer: per 4 KiB page (trackers direct-mapped by page: a new
 * page takes its slot from the one there), two L1 misses a small distance apart in
 * one direction start a stream; then each further miss in that page issues
 * prefetches for the lines up to `prefetch_distance` ahead, into the L2, as
 * far as free L2 queue entries allow (a prefetch never waits). A demand
 * access to a line still arriving waits for it like a merge into the miss.
 *
 * Time: "now" is the CPU's modeled clock (instructions at the topology's
 * clock plus the stalls charged), advanced per translation block, and moved
 * up to the engine's clock where that is ahead (vm_sync_time: a PAUSE's cost,
 * a halted vCPU's jump to the machine's time), so CPUs meet in the bandwidth
 * calendars where the guest has them.
 */
#ifndef VMLAB_MODEL_CORE_H
#define VMLAB_MODEL_CORE_H

#include <stdint.h>

#define MAX_FB 64          /* fill buffers per CPU (topology limit) */
#define MAX_SQ 128         /* L2 queue entries */
#define MAX_SB 256         /* store buffer entries */
#define MAX_STREAMS 64     /* streamer trackers */
#define MAX_PF_DIST 63     /* lines ahead, within one 4 KiB page */
#define MAX_ROB 4096       /* reorder window, instructions */
#define INFL_SLOTS 256     /* lines still arriving: direct-mapped by a hash of the line */
#define PV_SLOTS 16        /* values of loads whose line has not arrived */
#define DEP_WINDOW 4096    /* an address this close to such a value depends on it (a field of the pointed-to struct) */
#define NO_ROB UINT64_MAX  /* a fill buffer held by a store's RFO: stores retire to the store buffer */

typedef struct {
    uint64_t line, ready_ps;
} infl_t;

typedef struct {
    uint64_t value, ready_ps;
} pendval_t;

typedef struct {
    uint64_t page, used;   /* used: the tracker holds a page */
    int32_t last, ahead;   /* last line offset seen; farthest offset prefetched (-1: none) */
    int8_t dir, conf;
} stream_t;

/* The core's configuration (model-wide: every CPU is the same core). */
typedef struct {
    int ooo;               /* 0: blocking, every miss stalls its full latency (the model before MLP) */
    uint32_t fill_buffers, l2_queue, rob, store_buffer, streams, pf_distance;
} corecfg_t;

typedef struct {
    uint64_t fb_ready[MAX_FB], fb_insn[MAX_FB];
    uint64_t fb_until;     /* latest fb_ready: nothing outstanding once now passes it */
    uint64_t rob_next;     /* no load miss can fill the window before this instruction count */
    uint64_t sq_ready[MAX_SQ];
    uint64_t sb_drain[MAX_SB], sb_last;
    uint32_t sb_head, sb_n;
    infl_t infl[INFL_SLOTS];
    pendval_t pv[PV_SLOTS];
    uint32_t pv_next, staged;   /* staged: stage_value (written by the caller) joins pv at the next access */
    uint64_t stage_value, stage_ready;
    uint64_t pv_until;     /* latest pending value's ready time */
    stream_t st[MAX_STREAMS];  /* direct-mapped by page */
} core_t;

#endif
