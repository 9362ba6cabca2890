/*
 * vmlab per-vCPU clocks: whether a slice that ended early goes on, free of
 * QEMU state like vmlab-sched.h and vmlab-pause.h, so that vmlab can test it
 * outside QEMU. accel/tcg/icount-common.c feeds it the vCPUs' clocks.
 */
#ifndef VMLAB_RESUME_H
#define VMLAB_RESUME_H

#include "qemu/vmlab-sched.h"

/*
 * Whether the vCPU picked last (@last, its slice ending at @target_ps) goes
 * on with the same slice. A slice also ends early at moments the host
 * chooses: RCU's force-quiescent kick, a timer notification from the main
 * loop, queued work. Picking again there would let the host decide which
 * vCPU runs next, so a slice cut short goes on to its target as long as
 * nothing the guest did changed the picture: the same vCPUs are active as
 * when it was picked (@was_active), it is active, and it is below
 * @target_ps (the caller has already capped the target at the next timer).
 * Anything else (a vCPU woken by an IPI or interrupt, a halt, a target
 * reached, a stall past it) is a guest event: pick afresh. So is a PAUSE
 * that ended its slice because another vCPU is behind: the caller forgets
 * @last there (a resumed spinner would spin on to its target instead of
 * yielding, an exit and a resume at every turn of its loop).
 */
static inline bool vl_sched_resume(const VlSchedCpu *c, int n,
                                   const bool *was_active, int was_n,
                                   int last, int64_t target_ps)
{
    if (last < 0 || last >= n || n != was_n) {
        return false;
    }
    for (int i = 0; i < n; i++) {
        if (c[i].active != was_active[i]) {
            return false;
        }
    }
    return c[last].active && c[last].clock_ps < target_ps;
}

#endif
