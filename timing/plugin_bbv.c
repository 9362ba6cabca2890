/* vmlab timing plugin: basic-block vectors for SimPoint, in its .bb format
 * (`T:id:count ...`, one line per interval; ids from 1; count = the block's
 * executions x its instructions).
 *
 * bbv.cpuN.bb   per vCPU, every `interval` of that vCPU's own instructions.
 * bbv.global.bb machine-wide, every `interval` instructions of all vCPUs
 *               together (global slices, as LoopPoint cuts them): one line
 *               per slice, each vCPU's vector concatenated into it (block
 *               b of vCPU v is id (b - 1) x ncpus + v + 1), so a slice where
 *               two vCPUs run the same code differs from one where one runs it
 *               twice. Blocks holding a spin-wait hint (x86 PAUSE: the kernel's
 *               spin locks, cpu_relax loops) are left out of the vectors and of
 *               the slice's length: how long a vCPU spins depends on the timing
 *               of the others, so counting it would make a slice under one
 *               timing model look unlike the same slice under another.
 * bbv.global.slices  per slice, where it ends in a form that survives a
 *               change of timing: each vCPU's instruction count at its end, and
 *               a marker (the vCPU whose block crossed the boundary, that
 *               block's pc and how many times that vCPU had run it), as
 *               LoopPoint's (pc, count) region bounds; and the spin and dropped
 *               instructions; in a detailed run, every vCPU's modeled clock
 *               at its end too (what the slice cost, for an estimate's error);
 *               then, in every mode, the machine's time at the boundary
 *               (the engine's clock of the vCPU crossing it: `machine_ps`,
 *               0 at the run's end) and the machine's idle time in the slice
 *               (`idle_ps`: every vCPU halted, x86 HLT, from the last one's
 *               halt to the first one's wake-up), which no vector sees and
 *               which a sampled estimate takes from the profile itself; and,
 *               with memory counts on, the slice's non-spin loads and stores
 *               that miss a small cache filter (per vCPU, direct-mapped,
 *               FILTER_LINES lines: not the model's caches, which fast mode
 *               does not run) by hops from the vCPU's node to the line's home
 *               node (`miss_hopH`): how much of its data comes from memory,
 *               and from how far, which the blocks do not say (latprobe's
 *               chase runs the same blocks over a cached, a local and a
 *               remote buffer at 2, 81 and 141 ns a load).
 * bbv.stops    (regions) the stop the plugin asked for at a slice boundary:
 *               the boundary, the slice instructions it came late by (a
 *               modelled disk request kept the machine from stopping), each
 *               vCPU's instruction count; the host saves the machine there.
 * A slice's line stays under SimPoint 3.2's 1 MiB line limit: if its blocks
 * would not fit, the ones with the fewest instructions are dropped (counted
 * in the slices file).
 */
#include "plugin_bbv.h"

#include <glib.h>
#include <qemu-plugin.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINE_MAX_BYTES ((1 << 20) - 64)   /* SimPoint 3.2 aborts on a line of 1 MiB or more */

typedef struct {
    uint64_t *cnt;      /* per id: instructions this interval */
    uint32_t cap;
    uint32_t *touched;
    uint32_t ntouched, tcap;
    uint64_t insns;     /* this interval */
    FILE *f;
} vec_t;

static char dir[4096];
static uint64_t interval;
static int ncpus, on;
static vec_t *percpu;
static GMutex lock;                     /* translation-time table only */
static GHashTable *ids;
static uint32_t next_id = 1;
/* machine-wide slices (one vCPU runs at a time: no lock) */
static int global;
static vec_t g;
static FILE *gslices;
static uint64_t gslice, gspin, *cpu_insns;
static uint64_t **execs;                /* per vCPU: executions of each block so far */
static uint32_t *execs_cap;
static uint64_t (*clock_of)(int cpu);
static uint64_t *start_clock;           /* detailed: each vCPU's clock when the first block ran */
static uint64_t stop_after;             /* regions: the machine stops at this slice boundary (0: never) */
/* regions: non-spin instructions of the first slice run before this run's
 * start (a checkpoint the machine could only stop for that late: a disk
 * request was outstanding), so that its boundaries stay the profile's */
static uint64_t first_done;
/* Checkpoint points (a sampled run's profile, checkpoint segments and
 * regions): the first block at or after each boundary at which the machine
 * could be stopped (no modelled disk request outstanding) is where a
 * checkpoint of it would be taken; at the block after it every vCPU's TLB is
 * reset (qemu_plugin_tlb_reset), as a machine restored from that checkpoint
 * starts, and a run's first block resets them too. So the profile and the
 * machines restored from its checkpoints go on alike: a restored machine's
 * empty TLBs otherwise made page walks set accessed bits the profile's
 * cached entries did not, and reclaim chose otherwise (the fork storm's
 * checkpoint chain on 8 vCPUs left the profile within 3 slices). */
static int points, point_pending, reset_next;
/* The open slice's start boundary: how many of its non-spin instructions
 * ran before its checkpoint point (-1: none yet; 0 at a run's start, itself
 * a checkpoint), written as the slice's `point_late` so the host can choose
 * boundaries where a checkpoint comes within its slice (a busy disk can
 * keep the machine from being saved for seconds of guest time). */
static int64_t point_late;
/* regions: the stop ends the run and saves nothing (never refused) */
static int stop_for_exit;
static int stop_pending;
static void (*at_boundary)(uint64_t b, uint64_t insns);
/* machine idle: which vCPUs sit in HLT, since when all of them (UINT64_MAX:
 * not since any known time, as at the run's start) */
static uint8_t *halted;
static int nhalted;
static uint64_t idle_since = UINT64_MAX, gidle;
/* filter misses by hop class this slice (bbv_set_mem) */
#define FILTER_LINES (1u << 15)          /* 2 MiB of 64-byte lines: about an L2's reach */
static int nhops, line_shift;
static uint64_t ghop[BBV_MAX_HOPS];
static uint64_t *filter;                /* per vCPU: FILTER_LINES line tags (line + 1; 0: empty) */
static int (*hop_of)(int cpu, uint64_t paddr);

void bbv_set_clock(uint64_t (*clock)(int cpu)) { clock_of = clock; }

static void grow(uint64_t **a, uint32_t *cap, uint32_t need) {
    if (need < *cap) return;
    uint32_t n = *cap ? *cap : 4096;
    while (n <= need) n *= 2;
    *a = realloc(*a, n * sizeof(uint64_t));
    memset(*a + *cap, 0, (n - *cap) * sizeof(uint64_t));
    *cap = n;
}

static void add(vec_t *v, uint32_t id, uint64_t n) {
    grow(&v->cnt, &v->cap, id);
    if (!v->cnt[id]) {
        if (v->ntouched == v->tcap) {
            v->tcap = v->tcap ? 2 * v->tcap : 1024;
            v->touched = realloc(v->touched, v->tcap * sizeof(uint32_t));
        }
        v->touched[v->ntouched++] = id;
    }
    v->cnt[id] += n;
    v->insns += n;
}

static const uint64_t *sort_cnt;
static int by_count_desc(const void *a, const void *b) {
    uint64_t x = sort_cnt[*(const uint32_t *)a], y = sort_cnt[*(const uint32_t *)b];
    return x < y ? 1 : x > y ? -1 : (int)(*(const uint32_t *)a) - (int)(*(const uint32_t *)b);
}

/* Writes v's interval as one line (under the limit); returns the instructions left out. */
static uint64_t flush(vec_t *v, const char *name) {
    uint64_t dropped = 0;
    if (!v->f) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, name);
        v->f = fopen(path, "w");
    }
    /* about 24 bytes per ":id:count ": sort by count only when the line could be too long */
    if ((uint64_t)v->ntouched * 24 > LINE_MAX_BYTES) {
        sort_cnt = v->cnt;
        qsort(v->touched, v->ntouched, sizeof(uint32_t), by_count_desc);
    }
    char tok[48];
    size_t len = 1;
    if (v->f) fputc('T', v->f);
    for (uint32_t i = 0; i < v->ntouched; i++) {
        uint32_t id = v->touched[i];
        int k = snprintf(tok, sizeof tok, ":%u:%" PRIu64 " ", id, v->cnt[id]);
        if (len + (size_t)k + 1 < LINE_MAX_BYTES) {
            if (v->f) fputs(tok, v->f);
            len += (size_t)k;
        } else {
            dropped += v->cnt[id];
        }
        v->cnt[id] = 0;
    }
    if (v->f) fputc('\n', v->f);
    v->ntouched = 0;
    v->insns = 0;
    return dropped;
}

/* A table file in the vectors' directory: its header, then each vCPU's
 * instruction count column (and, with clocks, each one's modeled clock). */
static FILE *table(const char *name, const char *head, int clocks, int machine) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) return NULL;
    fputs(head, f);
    for (int c = 0; c < ncpus; c++) fprintf(f, " insns_cpu%d", c);
    for (int c = 0; clocks && c < ncpus; c++) fprintf(f, " time_ps_cpu%d", c);
    if (machine) fputs(" machine_ps idle_ps", f);
    for (int h = 0; machine && h < nhops; h++) fprintf(f, " miss_hop%d", h);
    if (machine && points) fputs(" point_late", f);
    fputc('\n', f);
    return f;
}

static uint64_t machine_insns(void) {
    uint64_t n = 0;
    for (int c = 0; c < ncpus; c++) n += cpu_insns[c];
    return n;
}

static void global_flush(unsigned vcpu, uint64_t pc, uint64_t count) {
    uint64_t insns = g.insns, dropped = flush(&g, "bbv.global.bb");
    if (!gslices) {
        gslices = table("bbv.global.slices", "# slice insns spin_insns dropped_insns marker_cpu marker_pc marker_count",
                        clock_of != NULL, 1);
        if (gslices && start_clock) {  /* where the first slice's clocks started (a restored run's are not 0) */
            fprintf(gslices, "# start");
            for (int c = 0; c < ncpus; c++) fprintf(gslices, " %" PRIu64, start_clock[c]);
            fputc('\n', gslices);
        }
    }
    if (gslices) {
        fprintf(gslices, "%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %u 0x%" PRIx64 " %" PRIu64, gslice, insns,
                gspin, dropped, vcpu, pc, count);
        for (int c = 0; c < ncpus; c++) fprintf(gslices, " %" PRIu64, cpu_insns[c]);
        for (int c = 0; clock_of && c < ncpus; c++) fprintf(gslices, " %" PRIu64, clock_of(c));
        /* at exit no vCPU runs: its clock reads 0 (unknown) */
        fprintf(gslices, " %" PRIu64 " %" PRIu64, qemu_plugin_vcpu_clock_ps(), gidle);
        for (int h = 0; h < nhops; h++) fprintf(gslices, " %" PRIu64, ghop[h]);
        if (points) fprintf(gslices, " %" PRId64, point_late);
        fputc('\n', gslices);
    }
    gslice++;
    gspin = 0;
    gidle = 0;
    memset(ghop, 0, sizeof ghop);
    if (at_boundary) at_boundary(gslice, machine_insns());
    if (gslice == stop_after) stop_pending = 1;
    point_pending = points;
    point_late = -1;
}

void bbv_set_points(int on) {
    points = on;
    point_late = 0;
    reset_next = on;  /* a run's first block: a restored machine's TLBs start empty */
}

void bbv_set_first_done(uint64_t n) { first_done = n; }

void bbv_set_stop_for_exit(int on) { stop_for_exit = on; }

void bbv_set_stop(uint64_t after, void (*boundary)(uint64_t b, uint64_t insns)) {
    stop_after = after;
    at_boundary = boundary;
}

/* The current block is the last before the stop: it was counted in the slice
 * that just ended (or, late, in the one now open: g.insns says how far in). */
static int try_stop(void) {
    if (stop_for_exit) qemu_plugin_machine_stop_for_exit();
    else if (!qemu_plugin_machine_stop()) return 0;  /* a modelled disk request is outstanding: next block */
    FILE *f = table("bbv.stops", "# boundary late_insns", 0, 0);
    if (f) {
        fprintf(f, "%" PRIu64 " %" PRIu64, stop_after, g.insns);
        for (int c = 0; c < ncpus; c++) fprintf(f, " %" PRIu64, cpu_insns[c]);
        fputc('\n', f);
        fclose(f);  /* the host reads it while the machine is stopped */
    }
    stop_pending = 0;
    return 1;
}

/* A boundary's stop, or its checkpoint point, at the first block it may be. */
static void at_point(void) {
    /* a checkpoint could not be saved here: the next block (a region's
     * final stop saves nothing and never waits) */
    if (!(stop_pending && stop_for_exit) && !qemu_plugin_machine_can_stop()) return;
    if (stop_pending && !try_stop()) return;
    if (point_pending) {
        reset_next = 1;
        point_late = (int64_t)g.insns;
    }
    point_pending = 0;
}

void bbv_init(const char *d, uint64_t iv, int n, int glob) {
    snprintf(dir, sizeof dir, "%s", d);
    interval = iv;
    ncpus = n;
    on = dir[0] && interval;
    if (!on) return;
    percpu = calloc(ncpus, sizeof(vec_t));
    ids = g_hash_table_new(g_int64_hash, g_int64_equal);
    global = glob;
    if (global) {
        cpu_insns = calloc(ncpus, sizeof(uint64_t));
        execs = calloc(ncpus, sizeof(uint64_t *));
        execs_cap = calloc(ncpus, sizeof(uint32_t));
        /* A restored machine's vCPUs start as halted: one that was idle at
         * the save stays so until it wakes, one that was running is seen
         * running at its first block (within a quantum of the start). */
        halted = malloc(ncpus);
        memset(halted, 1, ncpus);
        nhalted = ncpus;
    }
}

void bbv_set_mem(int classes, unsigned line_bytes, int (*hop)(int cpu, uint64_t paddr)) {
    nhops = classes < BBV_MAX_HOPS ? classes : BBV_MAX_HOPS;
    line_shift = __builtin_ctz(line_bytes);
    hop_of = hop;
    filter = calloc((size_t)ncpus * FILTER_LINES, sizeof(uint64_t));
    if (!filter) nhops = 0;
}

/* most accesses hit the filter: the home node is looked up for a miss only */
void bbv_mem(unsigned vcpu, uint64_t paddr) {
    if (!nhops) return;
    uint64_t line = paddr >> line_shift;
    uint64_t *tag = &filter[(size_t)vcpu * FILTER_LINES + ((line ^ (line >> 15)) & (FILTER_LINES - 1))];
    if (*tag == line + 1) return;
    *tag = line + 1;
    int hop = hop_of((int)vcpu, paddr);
    if (hop >= 0 && hop < nhops) ghop[hop]++;
}

/* vcpu's block starts at engine clock `now`; halting: it ends in a HLT. A
 * vCPU that halted and runs again was woken: if every vCPU was halted, the
 * machine was idle from the last one's halt until now. */
static void halt_event(unsigned vcpu, int halting, uint64_t now) {
    if (halted[vcpu]) {
        if (nhalted == ncpus && now > idle_since) gidle += now - idle_since;
        halted[vcpu] = 0;
        nhalted--;
    }
    if (halting) {
        halted[vcpu] = 1;
        if (++nhalted == ncpus) idle_since = now;
    }
}

int bbv_on(void) { return on; }

uint32_t bbv_block_id(uint64_t pc, size_t n) {
    uint64_t key = pc ^ ((uint64_t)n << 56);
    g_mutex_lock(&lock);
    gpointer v = g_hash_table_lookup(ids, &key);
    if (!v) {
        uint64_t *k = g_new(uint64_t, 1);
        *k = key;
        v = GUINT_TO_POINTER(next_id++);
        g_hash_table_insert(ids, k, v);
    }
    g_mutex_unlock(&lock);
    return GPOINTER_TO_UINT(v);
}

void bbv_exec(unsigned vcpu, uint32_t bb, uint32_t n, uint64_t pc, int spin, int halt) {
    vec_t *v = &percpu[vcpu];  /* grown by this vCPU's own thread only */
    add(v, bb, n);
    if (v->insns >= interval) {
        char name[64];
        snprintf(name, sizeof name, "bbv.cpu%u.bb", vcpu);
        flush(v, name);
    }
    if (!global) return;
    if (reset_next) {  /* the block after a checkpoint point: as a restored machine */
        reset_next = 0;
        qemu_plugin_tlb_reset();
    }
    /* the engine's clock is read only where a vCPU halts or wakes */
    if (halt || halted[vcpu]) halt_event(vcpu, halt, qemu_plugin_vcpu_clock_ps());
    if (clock_of && !start_clock) {
        start_clock = calloc(ncpus, sizeof(uint64_t));
        for (int c = 0; c < ncpus; c++) start_clock[c] = clock_of(c);
    }
    cpu_insns[vcpu] += n;
    grow(&execs[vcpu], &execs_cap[vcpu], bb);
    uint64_t count = ++execs[vcpu][bb];
    if (spin) {
        gspin += n;
        if (stop_pending || point_pending) at_point();
        return;
    }
    add(&g, (bb - 1) * (uint32_t)ncpus + vcpu + 1, n);
    if (g.insns + first_done >= interval) {
        first_done = 0;
        global_flush(vcpu, pc, count);
    }
    if (stop_pending || point_pending) at_point();
}

void bbv_close(void) {
    if (!on) return;
    for (int c = 0; c < ncpus; c++) {
        if (percpu[c].ntouched) {
            char name[64];
            snprintf(name, sizeof name, "bbv.cpu%d.bb", c);
            flush(&percpu[c], name);
        }
        if (percpu[c].f) fclose(percpu[c].f);
    }
    if (global) {
        if (g.ntouched) global_flush((unsigned)ncpus, 0, 0);  /* the run's end: no block crossed it */
        if (g.f) fclose(g.f);
        if (gslices) fclose(gslices);
    }
}
