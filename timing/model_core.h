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
 * far as L2 queue entries allow (a prefetch waits for one for at most a miss's
 * latency to its home: model_access.c stream_train). A demand
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

#include "model.h"

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

/* The dataflow core (model_exec.c) */
#define MAX_WIDTH 16
#define MAX_UNITS 16
#define PORT_SLOTS 256     /* each class's issue calendar: cycles, direct-mapped by cycle number */
#define FWD_SLOTS 64       /* stores still in the store buffer, by 8-byte address: store-to-load forwarding */
#define MAX_RAS 64
#define LOCAL_HIST 1024    /* the tournament predictor's local part (the 21264's: 1024 10-bit histories) */
enum { BP_GSHARE = 0, BP_TOURNAMENT = 1 };

/* The core's configuration (model-wide: every CPU is the same core). */
typedef struct {
    int ooo;               /* 0: blocking, every miss stalls its full latency (the model before MLP) */
    uint32_t fill_buffers, l2_queue, rob, store_buffer, streams, pf_distance;
    /* the dataflow core: on with a `width` line (and every class's `exec` line) */
    int dataflow;
    uint32_t width, units[VM_X_CLASSES], exec_seen;
    uint64_t lat_ps[VM_X_CLASSES], busy_ps[VM_X_CLASSES], busy_cycles[VM_X_CLASSES];
    uint64_t mispredict_ps, index_extra_ps, insn_ps, cycle_inv;  /* cycle_inv: 2^64 / cycle_ps, rounded up */
    uint32_t mispredict_cycles, index_extra_cycles;
    int predictor;         /* BP_GSHARE or BP_TOURNAMENT */
    uint32_t bp_entries, bp_history, btb, ras;
} corecfg_t;

typedef struct {
    uint64_t cyc;
    uint32_t used;
} portslot_t;

typedef struct {
    uint64_t addr, data_ready, drain;
} fwd_t;

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
    /* the dataflow core (model_exec.c) */
    uint64_t reg_ready[VM_NREG];  /* when each architectural register's value is there */
    uint64_t *rob_ret;     /* retire time of each instruction in the window, by its slot */
    uint32_t rob_i, frac;  /* the next instruction's window slot; dispatch's sub-ps remainder */
    uint64_t seq, last_retire;
    uint64_t unit_free[VM_X_CLASSES][MAX_UNITS];  /* unpipelined units (busy > 1 cycle); with one unit, its
                                                   * recent reservations as (start, end) pairs */
    portslot_t port[VM_X_CLASSES][PORT_SLOTS];
    uint64_t full_from[VM_X_CLASSES], full_to[VM_X_CLASSES];  /* a run of full cycles (unit_issue) */
    uint64_t unit_floor[VM_X_CLASSES];  /* one unit: no start before the end of a reservation it forgot */
    fwd_t fwd[FWD_SLOTS];
    const vm_block_t *blk; /* the block executing, and the next of its instructions to execute */
    uint32_t next, executed;  /* executed: of the block before it (vm_core_executed) */
    uint64_t last_addr_ready, last_complete;  /* of the last instruction executed: its second access,
                                               * a block's ending branch's resolution */
    /* branch prediction */
    uint64_t ghist;
    uint8_t *pht, *choice, *lpht;
    uint16_t *lhist;
    uint64_t *btb_tag, *btb_target;
    uint64_t ras[MAX_RAS];
    uint32_t ras_top;
} core_t;

#endif
