/* The shared L3 per socket (timing/model_memsys.c) on a blocking core, where
 * every access's stall is its latency: a line back from the L3, hand-offs
 * inside a socket and across, with the home on either side, and the rule
 * that a line held exclusive anywhere leaves every L3. Prints one figure per
 * line ("name ns") for tests/test_timing_l3.py to check against the config,
 * or "FAIL why".
 *
 *   l3_socket CONFIG
 */
#include "model_int.h"
#include <stdio.h>

static model_t *m;

static double acc(int cpu, uint64_t a, unsigned flags) {
    uint64_t *s, ps = vm_access(m, cpu, a, a, flags, VM_SYM_USER, &s);
    if (s) *s = 0;
    return ps / 1000.0;
}

/* node n's memory, offset off */
static uint64_t addr(int n, uint64_t off) {
    for (size_t g = 0; g < m->ngran; g++)
        if (m->gran_node[g] == n) return ((uint64_t)g << GRAN_SHIFT) + (16ull << 20) + off;
    return 0;
}

/* pushes line a out of cpu's L2 (and L1): 16 more lines of its L2 set */
static void evict(int cpu, uint64_t a) {
    uint64_t sets = (uint64_t)(m->cpu[cpu].l2.mask + 1) << m->line_shift;
    for (int k = 1; k <= (int)m->cpu[cpu].l2.ways; k++) acc(cpu, a + k * sets, 0);
}

int main(int argc, char **argv) {
    char err[512];
    if (argc != 2 || !(m = vm_model_new(argv[1], err, sizeof err))) {
        printf("FAIL %s\n", argc == 2 ? err : "usage");
        return 1;
    }
    if (!m->l3 || m->cpu[1].node != 0 || m->cpu[4].node != 1) {
        printf("FAIL needs an l3 and CPUs 0-1 on node 0, 4 on node 1\n");
        return 1;
    }
    uint64_t a = addr(0, 0), b = addr(1, 1 << 20), c = addr(0, 2 << 20), d = addr(0, 3 << 20), e = addr(0, 4 << 20);
    printf("memory %.2f\n", acc(0, a, 0));
    evict(0, a);
    printf("l3_hit %.2f\n", acc(0, a, 0));                  /* from the socket's L3, back into the L2 */
    printf("l3_hits %llu\n", (unsigned long long)m->cpu[0].c.l3_hits);
    printf("same_socket %.2f\n", acc(1, a, 0));             /* CPU 0 holds it (E): handed over in the socket */
    acc(4, b, VM_F_WRITE);                                  /* modified on node 1, homed there */
    printf("remote_homed_at_writer %.2f\n", acc(0, b, 0));
    acc(4, c, VM_F_WRITE);                                  /* modified on node 1, homed on node 0 */
    printf("remote_homed_at_reader %.2f\n", acc(0, c, 0));
    acc(0, d, 0);
    acc(1, d, 0);                                           /* shared by CPUs 0 and 1 */
    printf("shared_in_socket %.2f\n", acc(2, d, 0));        /* forwarded inside the socket, not from memory */
    acc(0, e, 0);
    evict(0, e);                                            /* in node 0's L3 now */
    acc(4, e, VM_F_WRITE);                                  /* held exclusive on node 1: no L3 keeps it */
    printf("after_remote_write %.2f\n", acc(0, e, 0));      /* from the owner, not from the stale L3 copy */
    printf("ok\n");
    return 0;
}
