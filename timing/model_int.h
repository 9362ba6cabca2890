/* vmlab timing model: internal types, shared by its files and by
 * tests/c/timing_invariants.c (which checks coherence from the inside).
 * model.h is the public API. The files, by component:
 *   model_config.c   reading and checking the config
 *   model_state.c    the model's state from it (vm_model_new), freeing it
 *   model_symbols.c  the kernel's text symbols
 *   model_access.c   pricing an access stream: the L1, the core's MLP (model_core.h, model_mlp.h), counting
 *   model_exec.c     the dataflow core: instructions as the modeled core runs them
 *   model_bpred.c    its branch prediction
 *   model_memsys.c   the directory transaction of an L2 miss: network, queueing, fills
 *   model_report.c   guest phases and the results JSON
 *
 * The cache helpers are static inline here because vm_access calls them
 * on every access: as calls into another file they could not be inlined.
 */
#ifndef VMLAB_MODEL_INT_H
#define VMLAB_MODEL_INT_H

#include "model.h"
#include "model_core.h"
#include "model_tlb.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define MAX_CPUS 62           /* directory entry: 62 sharer bits + exclusive bit */
#define MAX_NODES 64
#define MAX_HOPS 16
#define HIST_BINS 128         /* miss-latency histogram: 8 ns bins, last bin open */
#define HIST_NS 8
#define GRAN_SHIFT 21         /* address map granule: 2 MiB */
#define WINDOW_MISSES 4096    /* queueing utilisation window, in L2 misses */
#define DIR_EXCL (1ull << 63)
#define IFILTER 64            /* per CPU: recently fetched code lines, direct-mapped */
#define CAL_SLOTS 512         /* bandwidth calendar per memory controller and link: 512 buckets */
#define CAL_BUCKET_PS 64000   /* of 64 ns (a horizon of 32 us, far beyond the vCPUs' quantum of skew) */
/* The results JSON's "format": 2 names every field (1 had positional arrays).
 * timing/__init__.py reads this, MAX_CPUS, GRAN_SHIFT and COUNTER_FIELDS
 * from here (protocol/facts.py): keep them plain #defines. */
#define RESULTS_FORMAT 2
/* The model's version, stored with every run (timing/__init__.py reads it):
 * 1 priced each miss in full, one after another; 2 overlaps misses
 * (model_core.h), prefetches, drains stores and caps bandwidth; 3 adds
 * TLBs, page walks and instruction fetch (model_tlb.h) and a shared L3 per
 * socket (model_memsys.c); 4 executes the instructions as the modeled core does
 * (model_exec.c: register dataflow, issue width, latencies, branch prediction). */
#define MODEL_VERSION 4

enum { S_INV = 0, S_S = 1, S_E = 2, S_M = 3 };

typedef struct {
    uint64_t *t;       /* sets * ways entries, MRU first: (line << 2) | state, 0 = empty */
    uint32_t mask, ways;
} cache_t;

/* Per-CPU counters, in the order the results JSON lists them. One list, so
 * the struct, its JSON and the host's copy (timing.COUNTERS, read from here;
 * a test checks the timing_cpu table's columns against it) cannot drift
 * apart; diff() in model_report.c relies on every field being a uint64_t. */
#define COUNTER_FIELDS(X) X(insns) X(time_ps) X(stall_ps) X(loads) X(stores) X(atomics) X(l1_hits) \
    X(l2_hits) X(misses) X(remote) X(c2c) X(upgrades) X(invals) X(writebacks) X(lock_xfers) X(lock_ps) X(io) X(mem_ps) \
    X(prefetches) X(dep_stall_ps) X(fb_stall_ps) X(rob_stall_ps) X(sb_stall_ps) X(fence_stall_ps) X(unpriced_ps) \
    X(dtlb_misses) X(itlb_misses) X(walks) X(walk_ps) X(walk_loads) X(walk_remote) X(tlb_flushes) X(l1i_misses) \
    X(fetch_stall_ps) X(l3_hits) X(branches) X(mispredicts) X(mispredict_ps) X(unknown_insns)

typedef struct {
#define X(n) uint64_t n;
    COUNTER_FIELDS(X)
#undef X
} counters_t;

typedef struct {
    uint64_t id, instance, begin_ps, end_ps;
    counters_t d;
} phase_t;

typedef struct {
    cache_t l1, l2, l1i; /* l1i: instruction fetch, when the config has one */
    uint64_t ifilter[IFILTER];  /* lines known to be in l1i (+1; 0 = none): a fetch that finds its
                                 * line here skips the lookup (model_tlb.c) */
    core_t k;
    cputlb_t tlb;       /* TLBs, paging-structure caches, walkers (model_tlb.h) */           /* outstanding misses, store buffer, streams (model_core.h) */
    int node;
    counters_t c;
    counters_t warm;    /* c at the end of the warm-up (vm_warmup_done): reported counters are c - warm */
    uint64_t kind_insns[VM_KINDS];  /* per CPU: fast mode may run vCPUs on several host threads */
    uint64_t window_start_ps;
    int ph_active;
    uint64_t ph_id, ph_inst, ph_begin_ps;
    counters_t ph_start;
    phase_t *ph;
    size_t nph, cap;
} cpu_t;

typedef struct {
    uint64_t accesses, misses, remote, stall_ps, lock_xfers;
} symstat_t;

typedef struct {
    uint64_t insns, accesses, misses, remote, stall_ps;
} kindstat_t;

struct model {
    int detailed, ncpus, nnodes, nlinks;
    char out[4096];
    double clock_ghz;
    uint32_t line_shift;
    uint64_t cycle_ps, l2_ps, ctrl_ps, half_hop_ps;
    uint64_t mem_ps[MAX_NODES][MAX_NODES];
    /* one leg a -> b without queueing: half of each crossed link's round trip
     * (hops x half_hop_ps where every link is the interconnect's) */
    uint64_t leg_ps[MAX_NODES][MAX_NODES];
    uint8_t hops[MAX_NODES][MAX_NODES];
    /* directed links and routes: route (a,b) = links[route_off .. +route_len];
     * link_half_ps: each link's leg (its round trip / 2; half_hop_ps unless a
     * link_fig line says otherwise: a CPU-less node's own link, a switch port) */
    int *link_src, *link_dst;
    uint64_t *link_half_ps;
    uint32_t route_off[MAX_NODES][MAX_NODES];
    uint8_t route_len[MAX_NODES][MAX_NODES];
    int *route_links;
    size_t nroute_links;
    /* queueing: resources 0..nnodes-1 are memory controllers, then links.
     * mem_service_ps: a line at the DRAM nodes' bandwidth; node_service_ps:
     * each node's own (a CPU-less node's device: node_bw); link_req_ps and
     * link_data_ps: a header and a data message on each link */
    uint64_t *busy_ps, *busy_total_ps, *qdelay_ps, mem_service_ps, *node_service_ps, *link_req_ps, *link_data_ps;
    uint64_t *busy_warm_ps;   /* each resource's busy time at the end of the warm-up */
    uint64_t warmup_insns, warmup_end_ps;   /* plugin.warmup_insns, and when it ended (CPU 0's model time) */
    uint64_t window_misses, windows;
    /* bandwidth: per resource, CAL_SLOTS buckets of CAL_BUCKET_PS (tag: bucket number, used: ps taken) */
    uint64_t *cal_tag;
    uint32_t *cal_used;
    uint64_t now_ps;      /* when the transaction being priced was issued */
    corecfg_t core;
    uint64_t engine_insn_ps;  /* the engine's time per instruction when not a cycle (vm_set_engine_insn_ps) */
    tlbmodel_t tlb;       /* translation (model_tlb.h): off without [tlb] lines */
    vm_mmu_t mmu;         /* how the walker reads the guest's page tables (vm_set_mmu) */
    uint64_t l1_ps, l1i_ps;  /* an L1D / L1I hit's latency (a page-table entry read that hits) */
    int fetch_on;            /* instruction fetch is priced (detailed, with an l1i) */
    /* address map: 2 MiB granules of guest-physical space */
    int16_t *gran_node;
    uint64_t *gran_off;
    size_t ngran;
    uint64_t ram_bytes;
    uint64_t *dir;
    size_t dir_lines;
    uint32_t l1_geom[3], l2_geom[3], l1i_geom[3], l3_geom[3];
    /* a shared L3 per node (socket), when the config has one: a victim cache of its CPUs' L2s
     * (non-inclusive) holding clean lines; sock_c2c_ps: a transfer between two of its CPUs' L2s */
    cache_t *l3;
    uint64_t l3_ps, sock_c2c_ps;
    cpu_t *cpu;
    /* results */
    uint64_t matrix_n[MAX_NODES][MAX_NODES], matrix_ps[MAX_NODES][MAX_NODES];
    uint64_t hop_n[MAX_HOPS], hop_ps[MAX_HOPS], hist[MAX_HOPS][HIST_BINS];
    uint64_t c2c_hops[MAX_HOPS], lock_n[MAX_HOPS], lock_ps[MAX_HOPS];
    /* page-table entry reads: L1 and L2 hits, and those that went out, by hop count */
    uint64_t walk_l1, walk_l2, walk_n[MAX_HOPS], walk_ps[MAX_HOPS], walk_size[TLB_SIZES], walk_faults;
    uint64_t unmapped;
    kindstat_t kind[VM_KINDS];
    /* symbols */
    uint64_t kernel_base;
    uint64_t *sym_addr;
    char **sym_name;
    uint32_t nsym;
    symstat_t *sym;
};

/* --- set-associative LRU caches (the per-access hot path) ------------------- */
/* Index of line in its set, or -1. */
static inline int c_find(const cache_t *c, uint64_t line) {
    const uint64_t *s = c->t + (size_t)(line & c->mask) * c->ways;
    for (uint32_t i = 0; i < c->ways; i++)
        if (s[i] && (s[i] >> 2) == line) return (int)i;
    return -1;
}

static inline uint64_t *c_set(const cache_t *c, uint64_t line) {
    return c->t + (size_t)(line & c->mask) * c->ways;
}

static inline void c_touch(cache_t *c, uint64_t line, int i) {
    uint64_t *s = c_set(c, line), e = s[i];
    memmove(s + 1, s, (size_t)i * sizeof *s);
    s[0] = e;
}

/* Inserts as MRU; returns the evicted entry (0 if none). */
static inline uint64_t c_insert(cache_t *c, uint64_t line, int state) {
    uint64_t *s = c_set(c, line), victim = s[c->ways - 1];
    memmove(s + 1, s, (size_t)(c->ways - 1) * sizeof *s);
    s[0] = (line << 2) | (uint64_t)state;
    return victim;
}

static inline void c_remove(cache_t *c, uint64_t line) {
    int i = c_find(c, line);
    if (i < 0) return;
    uint64_t *s = c_set(c, line);
    memmove(s + i, s + i + 1, (size_t)(c->ways - 1 - i) * sizeof *s);
    s[c->ways - 1] = 0;
}

static inline void c_setstate(cache_t *c, uint64_t line, int state) {
    int i = c_find(c, line);
    if (i >= 0) {
        uint64_t *s = c_set(c, line);
        s[i] = (line << 2) | (uint64_t)state;
    }
}

/* The directory entry's index of a mapped guest-physical address: its
 * offset in node RAM, in lines. */
static inline uint64_t dir_index(const model_t *m, uint64_t pa) {
    size_t g = pa >> GRAN_SHIFT;
    return (m->gran_off[g] + (pa & ((1ull << GRAN_SHIFT) - 1))) >> m->line_shift;
}

/* The line, present in L2 at way j, becomes L1's MRU and both hold it in state st. */
static inline void refill_l1(cpu_t *p, uint64_t line, int j, int st, int st2) {
    if (j) c_touch(&p->l2, line, j);
    if (st != st2) c_setstate(&p->l2, line, st);
    c_remove(&p->l1, line);
    c_insert(&p->l1, line, st);
}

/* model_exec.c: the dataflow core's per-CPU state */
int model_core_init(model_t *m, cpu_t *p) __attribute__((visibility("hidden")));
void model_core_free(cpu_t *p) __attribute__((visibility("hidden")));
size_t model_core_bytes(const model_t *m) __attribute__((visibility("hidden")));
void model_core_shift(model_t *m, cpu_t *p, uint64_t d) __attribute__((visibility("hidden")));

/* model_memsys.c (below): ends a queueing window */
void vm_close_window(model_t *m) __attribute__((visibility("hidden")));

/* --- the requester's L1 and the counters (model_access.c's hot path; model_tlb.c too) --- */
/* Hit in L1 with enough rights (the hot path): an exclusive access to an
 * E line turns it M silently. */
static inline __attribute__((always_inline)) int l1_hit(cpu_t *p, uint64_t line, int excl) {
    int i = c_find(&p->l1, line);
    if (i < 0) return 0;
    uint64_t *s = c_set(&p->l1, line);
    int st = (int)(s[i] & 3);
    if (excl && st < S_E) return 0;
    if (excl && st == S_E) {  /* silent E -> M */
        s[i] = (line << 2) | S_M;
        c_setstate(&p->l2, line, S_M);
    }
    if (i) c_touch(&p->l1, line, i);
    p->c.l1_hits++;
    return 1;
}

/* --- counting -------------------------------------------------------------------- */
static inline void count_access(model_t *m, cpu_t *p, unsigned flags, uint32_t sym, int kind) {
    m->sym[sym].accesses++;
    m->kind[kind].accesses++;
    /* a lock operation's read claims the line; its write then hits in L1 */
    if (flags & VM_F_WRITE) p->c.stores++;
    else if (flags & VM_F_ATOMIC) p->c.atomics++;
    else p->c.loads++;
}

/* A line fetched from home (the CPU-node x home-node matrix) over hops (the
 * distance it is binned by: to the home, or to the owning cache): demand
 * misses and prefetches alike are memory traffic. */
static inline void count_fetch(model_t *m, cpu_t *p, int home, int hops, uint64_t lat) {
    m->matrix_n[p->node][home]++;
    m->matrix_ps[p->node][home] += lat;
    m->hop_n[hops]++;
    m->hop_ps[hops] += lat;
    uint64_t bin = lat / (HIST_NS * 1000);
    m->hist[hops][bin < HIST_BINS ? bin : HIST_BINS - 1]++;
    if (++m->window_misses >= WINDOW_MISSES) vm_close_window(m);
}

static inline void count_miss(model_t *m, cpu_t *p, int home, int hops, uint64_t lat, uint32_t sym, int kind) {
    p->c.misses++;
    if (hops) p->c.remote++;
    m->sym[sym].misses++;
    if (hops) m->sym[sym].remote++;
    m->kind[kind].misses++;
    if (hops) m->kind[kind].remote++;
    count_fetch(m, p, home, hops, lat);
}

/* A lock operation that had to fetch or claim its line, binned by the
 * distance to where the line came from (owner or home). */
static inline void count_lock(model_t *m, cpu_t *p, int hops, uint64_t lat, uint32_t sym) {
    p->c.lock_xfers++;
    p->c.lock_ps += lat;
    m->lock_n[hops]++;
    m->lock_ps[hops] += lat;
    m->sym[sym].lock_xfers++;
}

/* lat of stall, to the CPU's clock and to its symbol and kind. */
static inline void charge(model_t *m, cpu_t *p, uint64_t lat, uint32_t sym, int kind) {
    p->c.stall_ps += lat;
    p->c.time_ps += lat;
    m->sym[sym].stall_ps += lat;
    m->kind[kind].stall_ps += lat;
}

/* An L2 miss or an upgrade, as the line's home directory handles it. */
typedef struct {
    cpu_t *p;
    int c, me, home;      /* the requester, its node, the line's home node */
    int excl, st2;        /* wants it exclusive; its L2 state before (S_S: holds the data) */
    uint64_t line, others;  /* others: the sharers besides the requester */
    uint64_t e;           /* the directory entry: as found, then the other caches' part, then final */
    uint64_t lat;
    int hops;             /* the distance the miss is binned by */
} txn_t;

/* --- the config, as model_config.c reads it for model_state.c ------------------ */
typedef struct {
    uint64_t start, end, off;  /* guest-physical [start, end) is RAM from offset off */
    int node;
} range_t;

/* What the config says that model_t does not keep as read, and where the
 * read is (for error messages). */
typedef struct {
    const char *path;
    char *err;
    size_t errlen;
    int lineno, ok;
    char sympath[4096];
    double local_ns, hop_ns, mem_bw, link_bw, sock_c2c_ns;
    double node_bw[MAX_NODES];    /* node_bw lines (-1: the DRAM's mem_bw) */
    double *link_lat, *link_bw_of; /* link_fig lines, per link (-1: hop_ns, link_bw) */
    uint32_t line_bytes;
    int have_hops;
    int *cpu_node;
    range_t ranges[2 * MAX_NODES + 8];
    int nranges;
    size_t route_cap;
} cfg_t;

static inline int is_pow2(uint64_t x) { return x && !(x & (x - 1)); }

/* --- functions shared between the model's files (none on the L1-hit path) --------- */
/* Hidden: not exported from the plugin, so calls to them bind inside it. */
#define MODEL_INTERNAL __attribute__((visibility("hidden")))

/* model_config.c: reads and checks the config at path into m and cf
 * (cf->cpu_node is the caller's to free, even on error). Returns 0, or -1
 * with err set. */
int model_read_config(model_t *m, cfg_t *cf, const char *path, char *err, size_t errlen) MODEL_INTERNAL;

/* model_config.c: err = the formatted message, if there is room for one. */
void model_seterr(char *err, size_t n, const char *fmt, ...) MODEL_INTERNAL __attribute__((format(printf, 3, 4)));

/* model_symbols.c: the kernel's text symbols from system_map ("": only the
 * reserved ones) and their counters. Returns 0, or -1 with err set. */
int model_sym_init(model_t *m, const char *system_map, char *err, size_t errlen) MODEL_INTERNAL;

/* model_memsys.c: the directory transaction t at directory entry idx, then
 * the line into the requester's caches (in place if its L2 held it at way j;
 * into L1 too if l1_too); t->lat and t->hops say what it cost. */
void vm_transact(model_t *m, txn_t *t, uint64_t idx, int j, int l1_too) MODEL_INTERNAL;

/* model_memsys.c: ends a queueing window: each controller's and link's
 * utilisation in it becomes the next window's M/D/1 delay. */
void vm_close_window(model_t *m) MODEL_INTERNAL;

/* model_tlb.c: one `tlb`, `tlb_l2_cycles`, `psc`, `walkers` config line (1 if key is one
 * of them; why set on a bad value); the per-CPU state from it (0 on failure); freeing it. */
int model_tlb_parse(model_t *m, const char *key, const char *p, char *why, size_t n) MODEL_INTERNAL;
int model_tlb_init(model_t *m, char *why, size_t n) MODEL_INTERNAL;
void model_tlb_free(model_t *m) MODEL_INTERNAL;

/* model_tlb.c: translates va for cpu c at time t (an instruction fetch if instr);
 * returns when the translation is there (t on a first-level TLB hit). *frame (if
 * not NULL): the 4 KiB frame of va, or UINT64_MAX if the walk could not tell. */
uint64_t model_translate(model_t *m, int c, uint64_t va, int instr, uint64_t t, uint32_t sym, int kind,
                         uint64_t *frame) MODEL_INTERNAL;

#endif
