/* The engine side of timing/plugin_bbv.c for tests/test_plugin_bbv.py: the
 * QEMU plugin calls it makes, with a machine stop the test can refuse (a
 * modelled disk request outstanding: for the next n tries, stops and
 * checkpoint points alike), TLB resets counted, and an engine clock it sets. */
#include <stdbool.h>
#include <stdint.h>

static int refuse, stops, resets;
static uint64_t now_ps;

/* a modelled disk request outstanding for this try (n tries in all) */
static bool busy(void) {
    if (refuse > 0) {
        refuse--;
        return true;
    }
    return false;
}

bool qemu_plugin_machine_stop(void) {
    if (busy()) return false;
    stops++;
    return true;
}

void qemu_plugin_machine_stop_for_exit(void) { stops++; }

bool qemu_plugin_machine_can_stop(void) { return !busy(); }

bool qemu_plugin_tlb_reset(void) {
    resets++;
    return true;
}

uint64_t qemu_plugin_vcpu_clock_ps(void) { return now_ps; }

void h_refuse(int n) { refuse = n; }
void h_clock(uint64_t ps) { now_ps = ps; }
int h_stops(void) { return stops; }
int h_resets(void) { return resets; }

/* one node per vCPU pair; line addresses below 1 GiB on node 0, above on node 1 */
int h_hop(int cpu, uint64_t paddr) { return (cpu / 2) != (paddr >= (1ull << 30)); }
