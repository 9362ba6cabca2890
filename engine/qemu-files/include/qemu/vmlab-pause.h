/*
 * vmlab per-vCPU clocks: what a spin-wait hint (x86 PAUSE) does to the
 * schedule, free of QEMU state like vmlab-sched.h, so that vmlab tests it
 * outside QEMU (tests/test_vcpu_sched.py builds this very file out of the
 * patch). accel/tcg/icount-common.c feeds it the vCPUs' clocks.
 */
#ifndef VMLAB_PAUSE_H
#define VMLAB_PAUSE_H

#include "qemu/vmlab-sched.h"

/*
 * The running vCPU @self reached a spin-wait hint with its clock at @mine_ps
 * (its slice ends at @target_ps; @g_ps is the machine's time). Would the
 * pick (vl_sched_select) choose it again if its slice ended here? Not once
 * it reached its target, nor if another active vCPU is behind it (one woken
 * since the slice began counts at the machine's time, as the pick would
 * catch it up) or level with it and earlier in the list. If it would, the
 * nearest other's clock goes to *second_ps (INT64_MAX if it runs alone), for
 * the new target the pick would give.
 */
static inline bool vl_sched_pause_keeps(const VlSchedCpu *c, int n, int self,
                                        int64_t mine_ps, int64_t g_ps,
                                        int64_t target_ps, int64_t *second_ps)
{
    int64_t second = INT64_MAX;

    if (mine_ps >= target_ps) {
        return false;
    }
    for (int i = 0; i < n; i++) {
        int64_t t;

        if (i == self || !c[i].active) {
            continue;
        }
        t = c[i].clock_ps < g_ps ? g_ps : c[i].clock_ps;
        if (t < mine_ps || (t == mine_ps && i < self)) {
            return false;
        }
        if (t < second) {
            second = t;
        }
    }
    *second_ps = second;
    return true;
}

#endif
