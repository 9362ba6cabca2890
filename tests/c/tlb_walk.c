/* Address translation in the timing model (timing/model_tlb.h) on page
 * tables this harness builds in a fake guest memory: the walker reads them
 * through vm_set_mmu as the plugin reads a guest's. One scenario per run
 * (tests/test_timing_tlb.py writes the config from a topology); every figure
 * is checked against the config's own numbers. Prints "ok ..." or "FAIL why".
 *
 *   tlb_walk CONFIG walk|remote|huge|flush|reach|fetch
 */
#include "model_int.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS (1u << 20)
static uint64_t mkey[SLOTS], mval[SLOTS];  /* guest-physical 8-byte words: open addressing */
static model_t *m;
static uint64_t cr3, next_table, data_base;
static int reads;

static uint64_t *slot(uint64_t pa, int make) {
    uint32_t h = (uint32_t)((pa >> 3) * 0x9e3779b97f4a7c15ull >> 44) & (SLOTS - 1);
    while (mkey[h] && mkey[h] != pa + 1) h = (h + 1) & (SLOTS - 1);
    if (!mkey[h]) {
        if (!make) return NULL;
        mkey[h] = pa + 1;
    }
    return &mval[h];
}

static int root(void *ctx, int cpu, uint64_t *r, unsigned *flags) {
    (void)ctx, (void)cpu;
    *r = cr3;
    *flags = VM_MMU_PAGING;
    return 1;
}

static int rd(void *ctx, uint64_t pa, uint64_t *v) {
    (void)ctx;
    uint64_t *s = slot(pa, 0);
    reads++;
    *v = s ? *s : 0;
    return 1;
}

static uint64_t new_table(void) {
    uint64_t t = next_table;
    next_table += 4096;
    return t;
}

/* maps va to pa (4 KiB, or 2 MiB if huge), global if g; tables from next_table */
static void map(uint64_t va, uint64_t pa, int huge, int g) {
    uint64_t table = cr3;
    for (int level = 3; level >= (huge ? 1 : 0); level--) {
        uint64_t *e = slot(table + ((va >> (12 + 9 * level)) & 511) * 8, 1);
        if (level == (huge ? 1 : 0)) {
            *e = pa | 1 | (huge ? 0x80 : 0) | (g ? 0x100 : 0);
            return;
        }
        if (!(*e & 1)) *e = new_table() | 1;
        table = *e & PTE_ADDR;
    }
}

static uint64_t load(uint64_t va, uint64_t pa) {
    uint64_t *s, ps = vm_access(m, 0, pa, va, VM_F_USER, VM_SYM_USER, &s);
    if (s) *s = 0;
    return ps;
}

static int fail(const char *what, double got, double lo, double hi) {
    printf("FAIL %s: %.2f, expected %.2f..%.2f\n", what, got, lo, hi);
    return 1;
}
#define WITHIN(what, got, lo, hi) do { double g_ = (double)(got); if (g_ < (lo) || g_ > (hi)) return fail(what, g_, lo, hi); } while (0)

#define VA 0x7f0000000000ull
#define PAGES 4096

static counters_t *C(void) { return &m->cpu[0].c; }

static int scenario(const char *s) {
    double mem0 = m->mem_ps[0][0] / 1000.0, mem1 = m->mem_ps[0][1] / 1000.0;
    if (!strcmp(s, "walk") || !strcmp(s, "remote")) {
        /* a cold walk reads 4 entries from memory at the tables' node; the next page
         * of the same 2 MiB region finds its PDE cached and reads 1 */
        double mem = !strcmp(s, "remote") ? mem1 : mem0;
        for (int i = 0; i < 2; i++) map(VA + i * 4096ull, data_base + i * 4096ull, 0, 0);
        uint64_t t0 = C()->time_ps;
        load(VA, data_base);
        WITHIN("cold walk: entry reads", C()->walk_loads, 4, 4);
        WITHIN("cold walk: ns (4 reads from memory)", C()->walk_ps / 1000.0, 4 * mem, 4 * mem + 20);
        WITHIN("cold walk: remote reads", C()->walk_remote, !strcmp(s, "remote") ? 4 : 0, !strcmp(s, "remote") ? 4 : 0);
        /* the out-of-order core goes on: the load's line arrives after the walk and its own miss */
        WITHIN("cold access: ns until its line is there (walk + the line)", (m->cpu[0].k.fb_until - t0) / 1000.0,
               4 * mem + mem0, 4 * mem + mem0 + 30);
        load(VA + 4096, data_base + 4096);
        WITHIN("second page: walks", C()->walks, 2, 2);
        WITHIN("second page: entry reads (PDE cached)", C()->walk_loads, 5, 5);
        uint64_t d = C()->dtlb_misses;
        load(VA + 8, data_base + 8);
        WITHIN("L1 DTLB hit: misses", C()->dtlb_misses, d, d);
        printf("ok walk_ns %.1f\n", C()->walk_ps / 1000.0);
        return 0;
    }
    if (!strcmp(s, "huge")) {
        map(VA, data_base, 1, 0);
        load(VA, data_base);
        WITHIN("2 MiB leaf: entry reads", C()->walk_loads, 3, 3);
        WITHIN("2 MiB leaves", m->walk_size[1], 1, 1);
        for (int i = 1; i < 512; i++) load(VA + i * 4096ull + 64, data_base + i * 4096ull + 64);
        WITHIN("one 2 MiB entry covers 512 pages: walks", C()->walks, 1, 1);
        WITHIN("... and L1 DTLB misses", C()->dtlb_misses, 1, 1);
        printf("ok\n");
        return 0;
    }
    if (!strcmp(s, "flush")) {
        map(VA, data_base, 0, 0);
        map(VA + 4096, data_base + 4096, 0, 1);  /* global */
        map(VA + 8192, data_base + 8192, 0, 0);
        for (int i = 0; i < 3; i++) load(VA + i * 4096ull, data_base + i * 4096ull);
        WITHIN("three pages: walks", C()->walks, 3, 3);
        vm_tlb_flush(m, 0, VM_FLUSH_NONGLOBAL, 0);
        load(VA + 4096, data_base + 4096);
        WITHIN("a CR3 write keeps a global page", C()->walks, 3, 3);
        load(VA, data_base);
        WITHIN("... and drops the others", C()->walks, 4, 4);
        WITHIN("... with the paging-structure caches (a full walk)", C()->walk_loads, 4 + 1 + 1 + 4, 4 + 1 + 1 + 4);
        vm_tlb_flush(m, 0, VM_FLUSH_PAGE, VA);
        load(VA + 8192, data_base + 8192);
        WITHIN("INVLPG of another page keeps this one", C()->walks, 5, 5);  /* page 2 was not refilled after the flush */
        load(VA, data_base);
        WITHIN("INVLPG drops its page", C()->walks, 6, 6);
        vm_tlb_flush(m, 0, VM_FLUSH_ALL, 0);
        load(VA + 4096, data_base + 4096);
        WITHIN("a CR4.PGE toggle drops global pages too", C()->walks, 7, 7);
        printf("ok\n");
        return 0;
    }
    if (!strcmp(s, "reach")) {
        /* one line per page over n pages, twice; second lap's walks per page */
        int ns[] = {32, 1024, 3072};
        double per[3];
        for (int i = 0; i < PAGES; i++) map(VA + i * 4096ull, data_base + i * 4096ull, 0, 0);
        for (int k = 0; k < 3; k++) {
            for (int lap = 0; lap < 2; lap++) {
                uint64_t w0 = C()->walks;
                for (int i = 0; i < ns[k]; i++) load(VA + i * 4096ull + (i * 64 % 4096), data_base + i * 4096ull + (i * 64 % 4096));
                per[k] = (double)(C()->walks - w0) / ns[k];
            }
        }
        WITHIN("32 pages: within the L1 DTLB, walks per page", per[0], 0, 0);
        WITHIN("1024 pages: within the STLB, walks per page", per[1], 0, 0);
        WITHIN("3072 pages: past the STLB, walks per page", per[2], 0.9, 1);
        printf("ok\n");
        return 0;
    }
    if (!strcmp(s, "fetch")) {
        map(VA, data_base, 0, 0);
        uint64_t st = vm_fetch(m, 0, VA + 100, 40, VM_SYM_USER, VM_USER);
        WITHIN("first fetch: ITLB misses", C()->itlb_misses, 1, 1);
        WITHIN("first fetch: L1I misses (bytes 100..139: lines 1 and 2)", C()->l1i_misses, 2, 2);
        WITHIN("first fetch: stall ns (walk + one memory line)", st / 1000.0, 5 * mem0 * 0.98, 5 * mem0 + 30);
        st = vm_fetch(m, 0, VA + 100, 40, VM_SYM_USER, VM_USER);
        WITHIN("again: stall", st, 0, 0);
        printf("ok\n");
        return 0;
    }
    printf("FAIL unknown scenario %s\n", s);
    return 1;
}

int main(int argc, char **argv) {
    char err[512];
    if (argc != 3) return 2;
    m = vm_model_new(argv[1], err, sizeof err);
    if (!m) {
        printf("FAIL %s\n", err);
        return 1;
    }
    if (!vm_tlb_on(m)) {
        printf("FAIL no TLB in the config\n");
        return 1;
    }
    vm_mmu_t mmu = {.root = root, .read = rd};
    vm_set_mmu(m, &mmu);
    /* node 0's memory from 16 MiB holds the data; the tables on node 0 or, for "remote", node 1 */
    data_base = 16ull << 20;
    uint64_t node1 = 0;
    for (size_t g = 0; g < m->ngran; g++)
        if (m->gran_node[g] == 1) {
            node1 = (uint64_t)g << GRAN_SHIFT;
            break;
        }
    next_table = !strcmp(argv[2], "remote") ? node1 + (8ull << 20) : (64ull << 20);
    cr3 = new_table();
    return scenario(argv[2]);
}
