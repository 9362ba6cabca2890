/* vmlab timing model: the memory side of the core, shared by the access
 * stream's pricing (model_access.c) and the dataflow core (model_exec.c):
 * lines in flight, fill buffers, the reorder window's oldest miss, the L1
 * miss and its translation. Static inline: the per-access path stays free
 * of calls (model_core.h says what each rule is). */
#ifndef VMLAB_MODEL_MLP_H
#define VMLAB_MODEL_MLP_H

#include "model_int.h"

/* --- the core: outstanding misses, store buffer, streamer (model_core.h) ----------- */
static inline size_t infl_slot(uint64_t line) { return (size_t)((line ^ (line >> 8)) & (INFL_SLOTS - 1)); }

/* When the line arrives, if it is still arriving at now; else 0. */
static inline uint64_t infl_ready(const core_t *k, uint64_t line, uint64_t now) {
    const infl_t *e = &k->infl[infl_slot(line)];
    return e->line == line && e->ready_ps > now ? e->ready_ps : 0;
}

static inline void infl_set(core_t *k, uint64_t line, uint64_t ready) {
    infl_t *e = &k->infl[infl_slot(line)];
    e->line = line;
    e->ready_ps = ready;
}

/* Index of the entry of a[0..n) that frees first. */
static inline uint32_t first_free(const uint64_t *a, uint32_t n) {
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (a[i] < a[best]) best = i;
    return best;
}

/* (a) The latest ready time of a pending value this address was computed from. */
static inline uint64_t dep_ready(const core_t *k, uint64_t vaddr, uint64_t now) {
    if (k->pv_until <= now) return 0;
    uint64_t r = 0;
    for (int i = 0; i < PV_SLOTS; i++)
        if (k->pv[i].ready_ps > now && vaddr - k->pv[i].value + DEP_WINDOW < 2 * DEP_WINDOW && k->pv[i].ready_ps > r)
            r = k->pv[i].ready_ps;
    return r;
}

/* A load returned value, which the core has only at ready: remember it if
 * it could be an address (x86-64 and Alpha canonical user or kernel range). */
static inline void pv_note(core_t *k, uint64_t value, uint64_t ready) {
    if (value < 4096 || (value >= (1ull << 47) && value < 0xffff800000000000ull)) return;
    pendval_t *e = &k->pv[k->pv_next++ % PV_SLOTS];
    e->value = value;
    e->ready_ps = ready;
    if (ready > k->pv_until) k->pv_until = ready;
}

/* (c) The time the oldest load miss that has a full reorder window behind it
 * arrives (0: none). */
static inline uint64_t rob_ready(const model_t *m, core_t *k, uint64_t insns, uint64_t now) {
    if (k->fb_until <= now || insns < k->rob_next) return 0;  /* the common case: no scan */
    uint64_t r = 0, next = UINT64_MAX;
    for (uint32_t i = 0; i < m->core.fill_buffers; i++) {
        if (k->fb_ready[i] <= now || k->fb_insn[i] == NO_ROB) continue;
        if (insns - k->fb_insn[i] >= m->core.rob) {
            if (k->fb_ready[i] > r) r = k->fb_ready[i];
        } else if (k->fb_insn[i] + m->core.rob < next) {
            next = k->fb_insn[i] + m->core.rob;
        }
    }
    k->rob_next = next;  /* the misses still short of a full window; a new miss can only lower it */
    return r;
}

/* Stall p until t (if later), charged to sym/kind and to the cause's counter. */
static inline void wait_until(model_t *m, cpu_t *p, uint64_t t, uint64_t *cause, uint32_t sym, int kind) {
    if (t <= p->c.time_ps) return;
    uint64_t d = t - p->c.time_ps;
    *cause += d;
    charge(m, p, d, sym, kind);
}

/* t moved d earlier, 0 staying 0 (an empty entry): vm_shift_time. */
static inline uint64_t back(uint64_t t, uint64_t d) { return t > d ? t - d : 0; }

/* The L2 streamer, trained by an L1 miss to line at now (model_access.c). */
void stream_train(model_t *m, int c, uint64_t line, uint64_t now) __attribute__((visibility("hidden")));

/* An L1 miss (or a write to a line held shared): an L2 hit answered from
 * `issue`, or a transaction at the line's home directory, counted, started
 * at `miss_issue` (when an L2 queue entry is free). Returns when the data is
 * there; *l2hit says which it was. */
static inline uint64_t l1_miss(model_t *m, cpu_t *p, int c, uint64_t pa, uint64_t line, unsigned flags, uint32_t sym,
                               int kind, uint64_t issue, uint64_t miss_issue, int *l2hit) {
    int excl = (flags & (VM_F_WRITE | VM_F_ATOMIC)) != 0;
    int j = c_find(&p->l2, line);
    int st2 = j >= 0 ? (int)(c_set(&p->l2, line)[j] & 3) : S_INV;
    *l2hit = j >= 0 && (!excl || st2 >= S_E);
    if (*l2hit) {
        refill_l1(p, line, j, excl ? S_M : st2, st2);
        p->c.l2_hits++;
        return issue + m->l2_ps;
    }
    m->now_ps = miss_issue;
    txn_t t = {.p = p, .c = c, .me = p->node, .home = m->gran_node[pa >> GRAN_SHIFT], .excl = excl, .st2 = st2,
               .line = line};
    vm_transact(m, &t, dir_index(m, pa), j, 1);
    count_miss(m, p, t.home, t.hops, t.lat, sym, kind);
    if (flags & VM_F_ATOMIC) count_lock(m, p, t.hops, t.lat, sym);
    p->c.mem_ps += t.lat;
    return miss_issue + t.lat;
}

/* When vaddr's translation is there, from now: at once on a first-level TLB
 * hit (model_tlb.c), and without a lookup for the page the last access used. */
static inline uint64_t translate(model_t *m, cpu_t *p, int c, uint64_t vaddr, uint64_t now, uint32_t sym, int kind) {
    if (!m->tlb.on || (vaddr >> 12) == p->tlb.last_dpage) return now;
    uint64_t frame, x = model_translate(m, c, vaddr, 0, now, sym, kind, &frame);
    if (frame != UINT64_MAX) p->tlb.last_dpage = vaddr >> 12;
    return x;
}

#endif
