/*
 * vmlab per-vCPU clocks: the scheduler's arithmetic, free of QEMU state so
 * that it can be tested on its own (vmlab's tests/test_vcpu_sched.py builds
 * this very file out of the patch). accel/tcg/icount-common.c feeds it the
 * vCPUs' clocks and the next timer.
 */
#ifndef VMLAB_SCHED_H
#define VMLAB_SCHED_H

#include <stdbool.h>
#include <stdint.h>

typedef struct VlSchedCpu {
    int64_t clock_ps;   /* the vCPU's own time */
    bool active;        /* can run and is not halted (or has work) */
} VlSchedCpu;

/* a lone vCPU still yields this often, so the main loop keeps up */
#define VL_MAX_SLICE_PS (10LL * 1000 * 1000 * 1000)

/*
 * Pick the active vCPU furthest behind (the lowest index on a tie). A vCPU
 * back from halt resumes at the machine's time *g_ps; the machine's time
 * becomes the picked vCPU's (it never goes back). *second_ps is the next
 * vCPU's clock (INT64_MAX if it runs alone). Returns -1 if none is active.
 */
static inline int vl_sched_select(VlSchedCpu *c, int n, int64_t *g_ps,
                                  int64_t *second_ps)
{
    int best = -1;
    int64_t second = INT64_MAX;

    for (int i = 0; i < n; i++) {
        if (!c[i].active) {
            continue;
        }
        if (c[i].clock_ps < *g_ps) {
            c[i].clock_ps = *g_ps;
        }
        if (best < 0 || c[i].clock_ps < c[best].clock_ps) {
            if (best >= 0) {
                second = c[best].clock_ps;
            }
            best = i;
        } else if (c[i].clock_ps < second) {
            second = c[i].clock_ps;
        }
    }
    if (best >= 0 && c[best].clock_ps > *g_ps) {
        *g_ps = c[best].clock_ps;
    }
    *second_ps = second;
    return best;
}

/*
 * Where the picked vCPU's slice ends: a quantum past the next vCPU, or at
 * the next timer (deadline_ns from the machine's time g_ps, <0: none).
 */
static inline int64_t vl_sched_target(int64_t g_ps, int64_t second_ps,
                                      int64_t quantum_ps, int64_t deadline_ns)
{
    int64_t target = second_ps == INT64_MAX ? g_ps + VL_MAX_SLICE_PS
                                            : second_ps + quantum_ps;

    if (deadline_ns >= 0 && deadline_ns < VL_MAX_SLICE_PS / 1000 &&
        g_ps + deadline_ns * 1000 < target) {
        target = g_ps + deadline_ns * 1000;
    }
    return target;
}

/* Instructions to reach the target (rounded up, at least one). */
static inline int64_t vl_sched_budget(int64_t clock_ps, int64_t target_ps,
                                      int64_t cycle_ps)
{
    int64_t n = (target_ps - clock_ps + cycle_ps - 1) / cycle_ps;

    return n < 1 ? 1 : n > INT32_MAX ? INT32_MAX : n;
}

#endif
