/* The out-of-order core's rules (timing/model_core.h) on synthetic access
 * streams, one scenario per run (tests/test_timing_core.py builds this with
 * the model and writes the config). Every figure is checked against the
 * config's own numbers (latency, fill buffers, L2 queue, window), not
 * against a recorded result. Prints "ok <figures>" or "FAIL <why>".
 *
 *   core_mlp CONFIG chase|random|stream|stores|rob|atomic|prefetch-random|node-stream|loaded|woken|unsynced|shifted
 *
 * loaded: the loaded-latency curve (as Intel MLC --loaded_latency draws it):
 * 1, 2, ... of node 0's CPUs stream at once; per count, the bandwidth they get
 * and the average latency of the lines they fetch. Prints a table, checks
 * that latency only grows and bandwidth never passes the node's.
 */
#include "model_int.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 4000
#define REGION (32ull << 20)  /* 32 MiB of node 0 (from 16 MiB on), far above any L2 */

static uint64_t lines[N + 1];
static model_t *m;

/* An access, and for a load the value it returned (the model asks for it
 * only when the load's line is still arriving, as the plugin does). */
static uint64_t acc(int cpu, uint64_t a, uint64_t value, unsigned flags) {
    uint64_t *slot, ps = vm_access(m, cpu, a, a, flags | (flags & (VM_F_WRITE | VM_F_ATOMIC) ? 0 : VM_F_WIDE),
                                   VM_SYM_USER, &slot);
    if (slot) *slot = value;
    return ps;
}

static double t_ns(void) { return (double)m->cpu[0].c.time_ps / 1000.0; }
static double lat_ns(void) { return (double)m->mem_ps[0][0] / 1000.0; }
static double cyc_ns(void) { return (double)m->cycle_ps / 1000.0; }

/* N distinct random lines of the region, a random permutation's first N */
static void random_lines(void) {
    uint64_t nl = REGION >> m->line_shift, x = 88172645463325252ull;
    for (int i = 0; i <= N; i++) {
        int dup;
        do {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            lines[i] = (1ull << 24) + ((x % nl) << m->line_shift);  /* from 16 MiB on */
            dup = 0;
            for (int j = 0; j < i && !dup; j++) dup = lines[j] == lines[i];
        } while (dup);
    }
}

static int fail(const char *what, double got, double lo, double hi) {
    printf("FAIL %s: %.2f, expected %.2f..%.2f\n", what, got, lo, hi);
    return 1;
}

static int within(const char *what, double got, double lo, double hi) {
    return got < lo || got > hi ? fail(what, got, lo, hi) : 0;
}

/* CPUs cpus[0..k) each stream their own `per` bytes from base, 16 bytes an
 * access, in turns of 64 accesses (as vCPUs take turns in quanta); returns
 * the longest time any of them took, in ns. */
static double stream_together(const int *cpus, int k, uint64_t base, uint64_t per) {
    double t0[MAX_CPUS], span = 0;
    for (int i = 0; i < k; i++) t0[i] = m->cpu[cpus[i]].c.time_ps / 1000.0;
    for (uint64_t off = 0; off < per; off += 64 * 16)
        for (int i = 0; i < k; i++)
            for (uint64_t a = base + i * per + off; a < base + i * per + off + 64 * 16; a += 16) {
                vm_insns(m, cpus[i], 1, VM_USER);
                acc(cpus[i], a, 0, VM_F_USER);
            }
    for (int i = 0; i < k; i++) {
        double d = m->cpu[cpus[i]].c.time_ps / 1000.0 - t0[i];
        if (d > span) span = d;
    }
    return span;
}

int main(int argc, char **argv) {
    char err[512];
    if (argc != 3) return 2;
    m = vm_model_new(argv[1], err, sizeof err);
    if (!m) {
        printf("FAIL %s\n", err);
        return 1;
    }
    const char *s = argv[2];
    corecfg_t k = m->core;
    counters_t *c = &m->cpu[0].c;
    random_lines();
    int bad = 0;
    if (!strcmp(s, "chase")) {
        /* each load's address is the value the previous load returned: the full latency every time */
        double t0 = t_ns();
        for (int i = 0; i < N; i++) {
            vm_insns(m, 0, 2, VM_USER);
            acc(0, lines[i], lines[i + 1], VM_F_USER);
        }
        acc(0, lines[N], 0, VM_F_USER);
        double per = (t_ns() - t0) / N, want = lat_ns() + 2 * cyc_ns();
        bad = within("ns per dependent load", per, 0.95 * want, 1.05 * want);
        printf("%s ns_per_load %.2f latency %.2f dep_stall_ns %.0f\n", bad ? "" : "ok", per, lat_ns(),
               c->dep_stall_ps / 1000.0);
    } else if (!strcmp(s, "random") || !strcmp(s, "prefetch-random")) {
        /* the same lines, addresses not from loaded values: misses overlap up to the fill buffers */
        double t0 = t_ns();
        for (int i = 0; i < N; i++) {
            vm_insns(m, 0, 4, VM_USER);
            acc(0, lines[i], 0, VM_F_USER);
        }
        double per = (t_ns() - t0) / N, bound = lat_ns() / k.fill_buffers;
        if (!strcmp(s, "random"))
            bad = within("ns per independent load", per, 0.9 * bound, 1.25 * bound + 4 * cyc_ns());
        else
            bad = within("prefetches per random load", (double)c->prefetches / N, 0, 0.01);
        printf("%s ns_per_load %.2f fill_buffer_bound %.2f prefetches %llu fb_stall_ns %.0f\n", bad ? "" : "ok", per,
               bound, (unsigned long long)c->prefetches, c->fb_stall_ps / 1000.0);
    } else if (!strcmp(s, "stream")) {
        /* 8-byte loads through consecutive lines: bounded by the L2 queue over the latency (Little's law) */
        uint64_t base = 1ull << 24, bytes = 16ull << 20;
        double t0 = t_ns();
        for (uint64_t a = base; a < base + bytes; a += 16) {
            vm_insns(m, 0, 1, VM_USER);
            acc(0, a, 0, VM_F_USER);
        }
        double gbps = (double)bytes / (t_ns() - t0);
        double little = (double)k.l2_queue * 64 / lat_ns(), demand = (double)k.fill_buffers * 64 / lat_ns();
        double lo = k.streams ? 0.75 * little : 0.75 * demand, hi = k.streams ? 1.05 * little : 1.05 * demand;
        bad = within("GB/s of a sequential read", gbps, lo, hi);
        printf("%s GBps %.2f little %.2f demand_only %.2f prefetches %llu misses %llu\n", bad ? "" : "ok", gbps,
               little, demand, (unsigned long long)c->prefetches, (unsigned long long)c->misses);
    } else if (!strcmp(s, "copy")) {
        /* a copy: loads from one buffer, stores to another a power of two (32 MiB) away, interleaved;
         * both streams must train (their trackers must not evict each other) */
        uint64_t src = 1ull << 24, dst = src + (32ull << 20), bytes = 4ull << 20;
        double t0 = t_ns();
        for (uint64_t a = 0; a < bytes; a += 16) {
            vm_insns(m, 0, 2, VM_USER);
            acc(0, src + a, 0, VM_F_USER);
            acc(0, dst + a, 0, VM_F_USER | VM_F_WRITE);
        }
        double gbps = (double)bytes / (t_ns() - t0);
        /* per copied line: a read, an RFO read, a write-back: at least two fetches per line in flight */
        double little = (double)(k.streams ? k.l2_queue : k.fill_buffers) * 64 / lat_ns() / 2;
        bad = within("GB/s copied", gbps, 0.7 * little, 1.05 * little * 2) ||
              (k.streams && c->prefetches < (bytes / 64) &&
               fail("lines prefetched (both streams)", c->prefetches, bytes / 64, 1e18));
        printf("%s GBps %.2f half_little %.2f prefetches %llu\n", bad ? "" : "ok", gbps, little,
               (unsigned long long)c->prefetches);
    } else if (!strcmp(s, "stores")) {
        /* stores to distinct random lines retire into the store buffer; their RFOs share the fill
         * buffers, so they drain at fill_buffers per latency; with a one-entry buffer each waits in full */
        double t0 = t_ns();
        for (int i = 0; i < N; i++) acc(0, lines[i], 0, VM_F_USER | VM_F_WRITE);
        double per = (t_ns() - t0) / N;
        double want = k.store_buffer == 1 ? lat_ns() : lat_ns() / k.fill_buffers;
        bad = within("ns per store", per, 0.85 * want, 1.15 * want) ||
              (!c->sb_stall_ps && fail("store-buffer stall", 0, 1, 1e18));
        printf("%s ns_per_store %.2f expected %.2f sb_stall_ns %.0f\n", bad ? "" : "ok", per, want,
               c->sb_stall_ps / 1000.0);
    } else if (!strcmp(s, "rob")) {
        /* 8 instructions per independent miss: a window of w instructions holds w / 8 misses */
        int gap = 8;
        double t0 = t_ns();
        for (int i = 0; i < N; i++) {
            vm_insns(m, 0, gap, VM_USER);
            acc(0, lines[i], 0, VM_F_USER);
        }
        double per = (t_ns() - t0) / N, inflight = (double)k.rob / gap;
        if (inflight > k.fill_buffers) inflight = k.fill_buffers;
        double want = lat_ns() / inflight;
        bad = within("ns per load with the window full", per, 0.8 * want, 1.25 * want + gap * cyc_ns()) ||
              (!c->rob_stall_ps && fail("reorder-window stall", 0, 1, 1e18));
        printf("%s ns_per_load %.2f expected %.2f rob_stall_ns %.0f\n", bad ? "" : "ok", per, want,
               c->rob_stall_ps / 1000.0);
    } else if (!strcmp(s, "atomic")) {
        /* misses in flight, then a lock operation: it waits for them, then for its own line in full */
        for (int i = 0; i < 8; i++) acc(0, lines[i], 0, VM_F_USER);
        double t0 = t_ns();
        acc(0, lines[100], 0, VM_F_USER | VM_F_ATOMIC);
        double took = t_ns() - t0;
        bad = within("ns of a lock operation behind misses", took, 1.5 * lat_ns(), 2.3 * lat_ns()) ||
              (!c->fence_stall_ps && fail("fence stall", 0, 1, 1e18));
        printf("%s atomic_ns %.2f latency %.2f\n", bad ? "" : "ok", took, lat_ns());
    } else if (!strcmp(s, "node-stream")) {
        /* every CPU of node 0 streams its own 4 MiB, in turns of 64 loads (as vCPUs take turns in
         * quanta): together they get at most the node's memory bandwidth */
        int ncpu = 0, cpus[MAX_CPUS];
        for (int i = 0; i < m->ncpus; i++)
            if (m->cpu[i].node == 0) cpus[ncpu++] = i;
        uint64_t per = 4ull << 20;
        double span = stream_together(cpus, ncpu, 1ull << 24, per);
        double gbps = (double)(per * ncpu) / span, cap = (double)(64 * 1000) / m->mem_service_ps;
        double one = (k.streams ? k.l2_queue : k.fill_buffers) * 64 / lat_ns();
        double want = ncpu * one < cap ? ncpu * one : cap;
        bad = within("GB/s of a node's CPUs streaming together", gbps, 0.85 * want, 1.02 * cap);
        printf("%s GBps %.2f cpus %d memory_GBps %.2f expected %.2f\n", bad ? "" : "ok", gbps, ncpu, cap, want);
    } else if (!strcmp(s, "woken") || !strcmp(s, "unsynced")) {
        /* CPU 0 has run 1 ms; CPU 1 was halted and wakes at the machine's time (the engine's clock,
         * vm_sync_time): streaming together they share the node's bandwidth. Without the sync
         * (unsynced) CPU 1's requests would sit 1 ms in the model's past, beside nobody's. */
        int cpus[2] = {0, 1};
        vm_insns(m, 0, (uint32_t)(1000000000ull / m->cycle_ps), VM_USER);
        if (!strcmp(s, "woken")) vm_sync_time(m, 1, m->cpu[0].c.time_ps);
        uint64_t per = 4ull << 20;
        double span = stream_together(cpus, 2, 1ull << 24, per), cap = (double)(64 * 1000) / m->mem_service_ps;
        double gbps = (double)(per * 2) / span;
        /* the config's memory must be slower than the two CPUs can pull (the test sets it so) */
        bad = !strcmp(s, "woken") ? within("GB/s of a woken CPU and a running one", gbps, 0.85 * cap, 1.02 * cap)
                                  : within("GB/s of two CPUs 1 ms apart in the model", gbps, 1.05 * cap, 1e9);
        printf("%s GBps %.2f memory_GBps %.2f unpriced_ns %.0f\n", bad ? "" : "ok", gbps, cap,
               m->cpu[1].c.unpriced_ps / 1000.0);
    } else if (!strcmp(s, "shifted")) {
        /* CPU 0's model clock ran 1 ms ahead of its vCPU's during a functional warm-up (what it did
         * not charge) while CPU 1's did not; moved back (vm_shift_time), with its miss in flight, the
         * two stream together and share the node's bandwidth */
        int cpus[2] = {0, 1};
        uint64_t ahead = 1000000000ull;
        vm_insns(m, 0, (uint32_t)(ahead / m->cycle_ps), VM_USER);
        acc(0, (1ull << 24) + (REGION >> 1), 0, VM_F_USER);  /* a miss in flight on CPU 0 */
        uint64_t now = m->cpu[0].c.time_ps, ready = m->cpu[0].k.fb_until;
        vm_shift_time(m, 0, ahead);
        bad = (ready <= now && fail("a miss in flight before the shift", (double)ready, (double)now, 1e18)) ||
              (m->cpu[0].c.time_ps != now - ahead && fail("CPU 0's clock moved back", (double)m->cpu[0].c.time_ps,
                                                          (double)(now - ahead), (double)(now - ahead))) ||
              (m->cpu[0].k.fb_until != ready - ahead && fail("its miss in flight moved back",
                                                             (double)m->cpu[0].k.fb_until, (double)(ready - ahead),
                                                             (double)(ready - ahead)));
        uint64_t per = 4ull << 20;
        double span = stream_together(cpus, 2, 1ull << 24, per), cap = (double)(64 * 1000) / m->mem_service_ps;
        double gbps = (double)(per * 2) / span;
        bad = bad || within("GB/s of two CPUs back in one time", gbps, 0.85 * cap, 1.02 * cap);
        printf("%s GBps %.2f memory_GBps %.2f\n", bad ? "" : "ok", gbps, cap);
    } else if (!strcmp(s, "loaded")) {
        int ncpu = 0, cpus[MAX_CPUS];
        for (int i = 0; i < m->ncpus; i++)
            if (m->cpu[i].node == 0) cpus[ncpu++] = i;
        double cap = (double)(64 * 1000) / m->mem_service_ps, last_lat = 0;
        uint64_t per = 2ull << 20, base = 1ull << 24;
        printf("cpus GBps avg_latency_ns\n");
        for (int k = 1; k <= ncpu && !bad; k++) {
            vm_model_free(m);
            m = vm_model_new(argv[1], err, sizeof err);
            double span = stream_together(cpus, k, base, per);
            double gbps = (double)(per * k) / span, lat = (double)m->hop_ps[0] / m->hop_n[0] / 1000.0;
            printf("%d %.2f %.1f\n", k, gbps, lat);
            bad = (lat < 0.999 * last_lat && fail("latency falls with load", lat, last_lat, 1e9)) ||
                  within("GB/s under load", gbps, 0, 1.02 * cap);
            last_lat = lat;
        }
        if (!bad) printf("ok loaded curve of %d CPUs, memory_GBps %.2f\n", ncpu, cap);
    } else {
        printf("FAIL unknown scenario %s\n", s);
        bad = 1;
    }
    vm_model_free(m);
    return bad;
}
