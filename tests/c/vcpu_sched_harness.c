/* ctypes harness over our QEMU's scheduler arithmetic (vmlab-sched.h,
 * vmlab-pause.h and vmlab-resume.h: engine/qemu-files/include/qemu/, the
 * files the QEMU build adds to the tree; tests/test_vcpu_sched.py builds it
 * with engine/qemu-files/include on the include path). */
#include <stdint.h>
#include "qemu/vmlab-pause.h"

int pick(int64_t *clocks, const unsigned char *active, int n, int64_t *g, int64_t *second)
{
    VlSchedCpu c[64];
    if (n > 64) return -2;
    for (int i = 0; i < n; i++) {
        c[i].clock_ps = clocks[i];
        c[i].active = active[i];
    }
    int best = vl_sched_select(c, n, g, second);
    for (int i = 0; i < n; i++) clocks[i] = c[i].clock_ps;
    return best;
}

int64_t target(int64_t g, int64_t second, int64_t quantum, int64_t deadline_ns)
{
    return vl_sched_target(g, second, quantum, deadline_ns);
}

int64_t budget(int64_t clock, int64_t target_ps, int64_t cycle)
{
    return vl_sched_budget(clock, target_ps, cycle);
}

int64_t max_slice(void) { return VL_MAX_SLICE_PS; }


int pause_keeps(const int64_t *clocks, const unsigned char *active, int n, int self, int64_t mine,
                int64_t g, int64_t target_ps, int64_t *second)
{
    VlSchedCpu c[64];
    if (n > 64) return -2;
    for (int i = 0; i < n; i++) {
        c[i].clock_ps = clocks[i];
        c[i].active = active[i];
    }
    return vl_sched_pause_keeps(c, n, self, mine, g, target_ps, second);
}

/* vmlab-resume.h (the series' 0002, the scheduler): does the slice picked last go on? */
#include "qemu/vmlab-resume.h"

int resume(const int64_t *clocks, const unsigned char *active, int n, const unsigned char *was_active, int was_n,
           int last, int64_t target_ps)
{
    VlSchedCpu c[64];
    bool was[64];
    if (n > 64 || was_n > 64) return -2;
    for (int i = 0; i < n; i++) {
        c[i].clock_ps = clocks[i];
        c[i].active = active[i];
    }
    for (int i = 0; i < was_n; i++) was[i] = was_active[i];
    return vl_sched_resume(c, n, was, was_n, last, target_ps);
}
