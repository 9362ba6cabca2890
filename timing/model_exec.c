/* vmlab timing model: the dataflow core (model.h, "the core"). Per CPU, a
 * scoreboard of when each architectural register is ready, a front end that
 * dispatches `width` instructions a cycle into a reorder window of `rob`
 * instructions, issue when the sources are ready and a unit of the class is
 * free, completion after the class's latency (a load: when its data arrives,
 * priced by the memory side, model_mlp.h), in-order retirement, a store
 * buffer that drains after retirement, and the block-ending branches
 * predicted (model_bpred.c).
 *
 * The CPU's clock (c.time_ps) is the dispatch clock. It moves by a cycle per
 * `width` instructions and stalls only where a real front end does: the
 * window is full behind an instruction not yet complete (a miss, a divide, a
 * chain of dependent work), a branch was mispredicted (dispatch resumes
 * `mispredict` cycles after it resolves), a barrier (a lock operation, a
 * serialising instruction) waits for everything before it, or the store
 * buffer is full. A miss therefore costs what it costs on the machine: a
 * chase through registers (`p = a[p]`, `a[b[i]]`) waits for each load,
 * independent loads overlap up to the window and the fill buffers.
 *
 * The engine charges every instruction `insn_ps` (the core's best case: the
 * plugin sets it in the engine when it starts charging, vm_set_engine_insn_ps);
 * each call returns what the dispatch clock moved beyond what the engine
 * counted, which the caller charges to the vCPU, so the guest's clock is the
 * core's.
 */
#include "model_mlp.h"

#include <stdlib.h>

int bp_resolve(model_t *m, cpu_t *p, const vm_block_t *prev, uint64_t next_pc) __attribute__((visibility("hidden")));

int vm_core_on(const model_t *m) { return m->detailed && m->core.ooo && m->core.dataflow; }
uint64_t vm_cycle_ps(const model_t *m) { return m->cycle_ps; }
uint64_t vm_insn_ps(const model_t *m) { return m->core.dataflow ? m->core.insn_ps : m->cycle_ps; }

/* When an instruction of class cls whose operands are ready at t starts: on
 * the first unit free then. Unpipelined units (busy > 1 cycle: dividers) are
 * taken in turn; pipelined ones accept `units` a cycle, kept per cycle in a
 * small calendar (a class as wide as dispatch never waits). */
static inline uint64_t unit_issue(const model_t *m, core_t *k, int cls, uint64_t t) {
    const corecfg_t *g = &m->core;
    if (g->busy_cycles[cls] > 1) {
        if (g->units[cls] == 1) {
            /* one unit (a divider): the first gap of `busy` at or after t among its recent reservations, so
             * a divide waiting for a miss does not hold back an independent one issued earlier */
            uint64_t *u = k->unit_free[cls], s = t > k->unit_floor[cls] ? t : k->unit_floor[cls], b = g->busy_ps[cls];
            for (int moved = 1; moved;) {
                moved = 0;
                for (int i = 0; i < MAX_UNITS; i += 2)
                    if (u[i + 1] && s < u[i + 1] && s + b > u[i]) s = u[i + 1], moved = 1;
            }
            int old = 0;  /* the reservation that ended first makes room; nothing starts before it ended */
            for (int i = 2; i < MAX_UNITS; i += 2)
                if (u[i + 1] < u[old + 1]) old = i;
            if (u[old + 1] > k->unit_floor[cls]) k->unit_floor[cls] = u[old + 1];
            u[old] = s;
            u[old + 1] = s + b;
            return s;
        }
        uint64_t *u = k->unit_free[cls];
        uint32_t best = 0;
        for (uint32_t i = 1; i < g->units[cls]; i++)
            if (u[i] < u[best]) best = i;
        uint64_t s = u[best] > t ? u[best] : t;
        u[best] = s + g->busy_ps[cls];
        return s;
    }
    if (g->units[cls] >= g->width) return t;
    /* t / cycle_ps by a multiply (exact but within 1e-4 of a boundary, harmless for a per-cycle count) */
    uint64_t want = (uint64_t)(((unsigned __int128)t * g->cycle_inv) >> 64), cyc = want;
    /* every cycle of [full_from, full_to) is known full: a request inside it starts past it */
    if (cyc >= k->full_from[cls] && cyc < k->full_to[cls]) cyc = k->full_to[cls];
    for (uint32_t i = 0; i < PORT_SLOTS; i++, cyc++) {
        portslot_t *s = &k->port[cls][cyc & (PORT_SLOTS - 1)];
        if (s->cyc > cyc) return cyc == want ? t : cyc * m->cycle_ps;  /* a later cycle's: not overwritten */
        if (s->cyc != cyc) {
            s->cyc = cyc;
            s->used = 1;
        } else if (s->used < g->units[cls]) {
            s->used++;
        } else {
            continue;
        }
        /* the run of full cycles this scan crossed (and this one, if now full) */
        uint64_t end = s->used >= g->units[cls] ? cyc + 1 : cyc;
        if (want <= k->full_to[cls] && want >= k->full_from[cls]) k->full_to[cls] = end > k->full_to[cls] ? end : k->full_to[cls];
        else if (end > want) k->full_from[cls] = want, k->full_to[cls] = end;
        return cyc == want ? t : cyc * m->cycle_ps;
    }
    return t;
}

/* The next instruction enters the window: once the instruction `rob` before
 * it has retired. Returns its dispatch time; the clock moves a 1/width cycle. */
static inline uint64_t dispatch(const model_t *m, cpu_t *p, core_t *k) {
    const corecfg_t *g = &m->core;
    if (k->seq >= g->rob) {
        uint64_t r = k->rob_ret[k->rob_i];
        if (r > p->c.time_ps) {
            p->c.rob_stall_ps += r - p->c.time_ps;
            p->c.time_ps = r;
        }
    }
    uint64_t d = p->c.time_ps;
    p->c.time_ps += m->cycle_ps / g->width;
    k->frac += (uint32_t)(m->cycle_ps % g->width);
    if (k->frac >= g->width) {
        k->frac -= g->width;
        p->c.time_ps++;
    }
    return d;
}

static inline void retire(const model_t *m, core_t *k, uint64_t done) {
    if (done > k->last_retire) k->last_retire = done;
    k->rob_ret[k->rob_i] = k->last_retire;
    if (++k->rob_i == m->core.rob) k->rob_i = 0;
    k->seq++;
}

/* A barrier at dispatch time d: every earlier instruction retired and every
 * store drained (a lock operation: every miss arrived, too). */
static inline uint64_t barrier(cpu_t *p, core_t *k, uint64_t d, int misses, int stores) {
    uint64_t w = k->last_retire;
    if (stores && k->sb_last > w) w = k->sb_last;
    if (misses && k->fb_until > w) w = k->fb_until;
    if (w <= d) return d;
    p->c.fence_stall_ps += w - d;
    p->c.time_ps += w - d;
    return w;
}

/* Nothing younger starts before t (a barrier's own completion). */
static inline void hold_until(cpu_t *p, uint64_t t) {
    if (t <= p->c.time_ps) return;
    p->c.fence_stall_ps += t - p->c.time_ps;
    p->c.time_ps = t;
}

static inline uint64_t ready_of(const core_t *k, const uint8_t *r, uint8_t n, uint64_t t) {
    for (uint8_t i = 0; i < n; i++)
        if (k->reg_ready[r[i]] > t) t = k->reg_ready[r[i]];
    return t;
}

static inline void write_dsts(core_t *k, const vm_insn_t *in, uint64_t t) {
    for (uint8_t i = 0; i < in->ndst; i++) k->reg_ready[in->dst[i]] = t;
}

/* The pointers an instruction steps (a stack pointer by a push or a pop, the
 * string pointers and count of a rep): each from its own value, an ALU
 * operation after dispatch d, not after the data it moves. */
static inline void step_ptrs(const model_t *m, core_t *k, const vm_insn_t *in, uint64_t d) {
    for (uint8_t i = 0; i < in->nupd; i++) {
        uint64_t *r = &k->reg_ready[in->upd[i]];
        *r = (*r > d ? *r : d) + m->core.lat_ps[VM_X_ALU];
    }
}

/* An instruction with no access of its own (or whose access went to MMIO):
 * a load without one costs an L1 hit. */
static inline void exec_plain(model_t *m, cpu_t *p, core_t *k, const vm_insn_t *in) {
    uint64_t d = dispatch(m, p, k);
    if (in->flags & VM_I_SERIAL) d = barrier(p, k, d, 0, !(in->flags & VM_I_NOSB));
    uint64_t t = ready_of(k, in->addr, in->naddr, ready_of(k, in->src, in->nsrc, d));
    uint64_t done = unit_issue(m, k, in->cls, t) + m->core.lat_ps[in->cls];
    write_dsts(k, in, done);
    step_ptrs(m, k, in, d);
    if (in->flags & VM_I_SERIAL) hold_until(p, done);
    if (in->flags & VM_I_UNKNOWN) p->c.unknown_insns++;
    k->last_complete = done;
    k->last_addr_ready = t;
    retire(m, k, done);
}

/* An L1 miss asked for at now (its translation done): a fill buffer (the one
 * that frees first), an L2 queue entry for an L2 miss, the transaction; the
 * line is in flight until it arrives, and trains the streamer. Returns when
 * it is there. */
static inline uint64_t l1_fill(model_t *m, cpu_t *p, int c, core_t *k, uint64_t pa, uint64_t line, unsigned flags,
                               uint32_t sym, int kind, uint64_t now, int load) {
    uint32_t f = first_free(k->fb_ready, m->core.fill_buffers);
    uint64_t issue = k->fb_ready[f] > now ? k->fb_ready[f] : now;
    uint32_t q = first_free(k->sq_ready, m->core.l2_queue);
    int l2hit;
    uint64_t ready = l1_miss(m, p, c, pa, line, flags, sym, kind, issue, k->sq_ready[q] > issue ? k->sq_ready[q] : issue,
                             &l2hit);
    if (!l2hit) {
        k->sq_ready[q] = ready;
    } else if (load) {  /* an L2 hit on a line a prefetch is still bringing */
        uint64_t r = infl_ready(k, line, now);
        if (r > ready) ready = r;
    }
    k->fb_ready[f] = ready;
    k->fb_insn[f] = NO_ROB;  /* the window is the core's own (rob_ret), not the access stream's count */
    if (ready > k->fb_until) k->fb_until = ready;
    infl_set(k, line, ready);
    if (m->core.streams) stream_train(m, c, line, now);
    return ready;
}

/* A load's data (or a lock operation's line) issued at now: the L1 (with
 * the lines still arriving) after the load-to-use latency, or a miss. */
static inline uint64_t mem_load(model_t *m, cpu_t *p, int c, core_t *k, uint64_t pa, uint64_t vaddr,
                                unsigned flags, uint32_t sym, int kind, uint64_t now, uint64_t l1_ps) {
    uint64_t line = pa >> m->line_shift, xlat = translate(m, p, c, vaddr, now, sym, kind);
    if (xlat > now) now = xlat;
    if (l1_hit(p, line, (flags & VM_F_ATOMIC) != 0)) {
        uint64_t r = infl_ready(k, line, now);
        return r > now + l1_ps ? r : now + l1_ps;
    }
    return l1_fill(m, p, c, k, pa, line, flags, sym, kind, now, 1);
}

/* A store's line owned (its RFO), asked for at now: when it is. */
static inline uint64_t mem_rfo(model_t *m, cpu_t *p, int c, core_t *k, uint64_t pa, uint64_t vaddr, unsigned flags,
                               uint32_t sym, int kind, uint64_t now) {
    uint64_t line = pa >> m->line_shift, xlat = translate(m, p, c, vaddr, now, sym, kind);
    if (xlat > now) now = xlat;
    if (l1_hit(p, line, 1)) {
        uint64_t r = infl_ready(k, line, now);
        return r > now ? r : now;
    }
    return l1_fill(m, p, c, k, pa, line, flags, sym, kind, now, 0);
}

/* The store buffer has an entry (the oldest drained ones leave it; a full
 * one stalls dispatch until its oldest drains). */
static inline void sb_room(const model_t *m, cpu_t *p, core_t *k) {
    while (k->sb_n && k->sb_drain[k->sb_head] <= p->c.time_ps) k->sb_head = (k->sb_head + 1) % MAX_SB, k->sb_n--;
    if (k->sb_n < m->core.store_buffer) return;
    uint64_t t = k->sb_drain[k->sb_head];
    if (t > p->c.time_ps) {
        p->c.sb_stall_ps += t - p->c.time_ps;
        p->c.time_ps = t;
    }
    k->sb_head = (k->sb_head + 1) % MAX_SB;
    k->sb_n--;
}

/* A store: its line owned from `addr_ready` on, its data at data_ready; it
 * leaves the store buffer in order, once retired and owned. */
static inline void store_out(model_t *m, cpu_t *p, int c, core_t *k, uint64_t pa, uint64_t vaddr, unsigned flags,
                             uint32_t sym, int kind, uint64_t addr_ready, uint64_t data_ready) {
    uint64_t owned = mem_rfo(m, p, c, k, pa, vaddr, flags, sym, kind, unit_issue(m, k, VM_X_STORE, addr_ready));
    uint64_t drain = owned > k->last_retire ? owned : k->last_retire;
    if (data_ready > drain) drain = data_ready;
    if (k->sb_last > drain) drain = k->sb_last;
    k->sb_drain[(k->sb_head + k->sb_n++) % MAX_SB] = drain;
    k->sb_last = drain;
    fwd_t *f = &k->fwd[(vaddr >> 3) & (FWD_SLOTS - 1)];
    f->addr = vaddr >> 3;
    f->data_ready = data_ready;
    f->drain = drain;
}

/* A load of vaddr issued at t finds its data in the store buffer: from the
 * store's data, after the load-to-use latency. 0: it does not. */
static inline uint64_t forwarded(const core_t *k, uint64_t vaddr, uint64_t t, uint64_t l1_ps) {
    const fwd_t *f = &k->fwd[(vaddr >> 3) & (FWD_SLOTS - 1)];
    if (f->addr != vaddr >> 3 || f->drain <= t) return 0;
    return (f->data_ready > t ? f->data_ready : t) + l1_ps;
}

/* The instruction in, with its (first) access. */
static void exec_access(model_t *m, cpu_t *p, int c, core_t *k, const vm_insn_t *in, uint64_t pa, uint64_t vaddr,
                        unsigned flags, uint32_t sym, int kind) {
    const corecfg_t *g = &m->core;
    int atomic = (flags & VM_F_ATOMIC) != 0, store = !atomic && (flags & VM_F_WRITE);
    count_access(m, p, flags, sym, kind);
    if (store) sb_room(m, p, k);
    uint64_t d = dispatch(m, p, k);
    if (atomic || (in->flags & VM_I_SERIAL)) d = barrier(p, k, d, atomic, atomic || !(in->flags & VM_I_NOSB));
    uint64_t a = ready_of(k, in->addr, in->naddr, d), v = ready_of(k, in->src, in->nsrc, d), done;
    if (store) {
        /* a store (mov, push, call): its destination registers (a stack pointer) from its sources */
        done = a > v ? a : v;
        write_dsts(k, in, v + g->lat_ps[VM_X_ALU]);
        step_ptrs(m, k, in, d);
        retire(m, k, done);
        store_out(m, p, c, k, pa, vaddr, flags, sym, kind, a, v);
    } else {
        uint64_t l1 = g->lat_ps[VM_X_LOAD] + (in->flags & VM_I_INDEX ? g->index_extra_ps : 0);
        uint64_t issue = unit_issue(m, k, VM_X_LOAD, a);
        uint64_t data = mem_load(m, p, c, k, pa, vaddr, flags, sym, kind, issue, l1);
        uint64_t fw = atomic ? 0 : forwarded(k, vaddr, issue, l1);
        if (fw) data = fw;
        if (in->flags & VM_I_PURELOAD) done = data;
        else done = unit_issue(m, k, in->cls, data > v ? data : v) + g->lat_ps[in->cls];
        write_dsts(k, in, done);
        step_ptrs(m, k, in, d);
        retire(m, k, done);
        if (atomic) hold_until(p, done);  /* a lock operation is a full barrier */
    }
    if (in->flags & VM_I_SERIAL) hold_until(p, done);
    k->last_complete = done;
    k->last_addr_ready = a;
}

/* A second access of the instruction executed last: a read-modify-write's
 * store (its data is the operation's result), or a second load. */
static void exec_more(model_t *m, cpu_t *p, int c, core_t *k, const vm_insn_t *in, uint64_t pa, uint64_t vaddr,
                      unsigned flags, uint32_t sym, int kind) {
    count_access(m, p, flags, sym, kind);
    if (flags & VM_F_ATOMIC) {  /* a lock operation's write: the line is held since its read */
        l1_hit(p, pa >> m->line_shift, 1);
        return;
    }
    if (flags & VM_F_WRITE) {
        sb_room(m, p, k);
        store_out(m, p, c, k, pa, vaddr, flags, sym, kind, k->last_addr_ready, k->last_complete);
        return;
    }
    uint64_t data = mem_load(m, p, c, k, pa, vaddr, flags, sym, kind, k->last_addr_ready, m->core.lat_ps[VM_X_LOAD]);
    for (uint8_t i = 0; i < in->ndst; i++)
        if (data > k->reg_ready[in->dst[i]]) k->reg_ready[in->dst[i]] = data;
    if (data > k->last_retire) {  /* the instruction retires later: its window slot says so */
        k->last_retire = data;
        k->rob_ret[(k->rob_i + m->core.rob - 1) % m->core.rob] = data;
    }
}

/* The clock's move over one call, less the engine's time for its
 * instructions: what the caller charges; counted as stall. */
static inline uint64_t settle(model_t *m, cpu_t *p, uint64_t t0, uint64_t s0, uint32_t sym, int kind) {
    uint64_t per = m->engine_insn_ps ? m->engine_insn_ps : m->core.insn_ps;  /* what the engine counts */
    uint64_t n = p->k.seq - s0, moved = p->c.time_ps - t0, base = n * per;
    p->c.insns += n;
    p->kind_insns[kind] += n;
    if (moved <= base) return 0;
    uint64_t d = moved - base;
    p->c.stall_ps += d;
    m->sym[sym].stall_ps += d;
    m->kind[kind].stall_ps += d;
    return d;
}

static inline void run_to(model_t *m, cpu_t *p, core_t *k, uint32_t to) {
    const vm_block_t *b = k->blk;
    for (; k->next < to; k->next++) exec_plain(m, p, k, &b->in[k->next]);
}

/* Where block prev stopped, its instructions from `from` on not yet executed,
 * when the next block starts at pc: at its first memory instruction whose
 * access never came if pc does not follow it (a fault there: the instruction
 * runs again in a block of its own after the handler), else at its end. */
static inline uint32_t cut_at(const vm_block_t *prev, uint32_t from, uint64_t pc) {
    if (from >= prev->n || pc == prev->next_pc) return prev->n;
    const vm_insn_t *last = &prev->in[prev->n - 1];
    if ((last->br == VM_B_COND || last->br == VM_B_JUMP || last->br == VM_B_CALL) && pc == last->target)
        return prev->n;  /* the branch ran: so did all before it */
    for (uint32_t i = from; i < prev->n; i++)
        if (prev->in[i].flags & VM_I_MEM) return i;
    return prev->n;
}

uint32_t vm_core_executed(const model_t *m, int c) { return m->cpu[c].k.executed; }

uint64_t vm_core_begin(model_t *m, int c, const vm_block_t *b) {
    cpu_t *p = &m->cpu[c];
    core_t *k = &p->k;
    uint64_t t0 = p->c.time_ps, s0 = k->seq;
    const vm_block_t *prev = k->blk;
    uint32_t sym = b->sym;
    int kind = b->kind;
    if (prev) {
        sym = prev->sym;
        kind = prev->kind;
        uint32_t end = cut_at(prev, k->next, b->pc);
        run_to(m, p, k, end);
        k->executed = end;
        if (end == prev->n && prev->n && prev->in[prev->n - 1].br != VM_B_NONE &&
            bp_resolve(m, p, prev, b->pc) == 1) {
            uint64_t resume = k->last_complete + m->core.mispredict_ps;  /* the branch: the last executed */
            if (resume > p->c.time_ps) {
                p->c.mispredict_ps += resume - p->c.time_ps;
                p->c.time_ps = resume;
            }
        }
    }
    k->blk = b;
    k->next = 0;
    return settle(m, p, t0, s0, sym, kind);
}

uint64_t vm_core_access(model_t *m, int c, uint32_t idx, uint64_t pa, uint64_t vaddr, unsigned flags, uint32_t sym) {
    cpu_t *p = &m->cpu[c];
    core_t *k = &p->k;
    const vm_block_t *b = k->blk;
    if (!b || idx >= b->n) return 0;  /* not this block's (cannot happen with the plugin's order) */
    uint64_t t0 = p->c.time_ps, s0 = k->seq;
    int kind = flags & VM_F_USER ? VM_USER : flags & VM_F_KERNEL ? VM_KERNEL : VM_BOOT;
    size_t g = pa >> GRAN_SHIFT;
    int mapped = !(flags & VM_F_IO) && g < m->ngran && m->gran_node[g] >= 0;
    if (!mapped && !(flags & VM_F_IO)) m->unmapped++;
    if (idx < k->next) {
        if (mapped) exec_more(m, p, c, k, &b->in[idx], pa, vaddr, flags, sym, kind);
    } else {
        run_to(m, p, k, idx);
        if (mapped) exec_access(m, p, c, k, &b->in[idx], pa, vaddr, flags, sym, kind);
        else exec_plain(m, p, k, &b->in[idx]);
        k->next = idx + 1;
    }
    return settle(m, p, t0, s0, sym, kind);
}

uint64_t vm_core_upto(model_t *m, int c, uint32_t idx) {
    cpu_t *p = &m->cpu[c];
    core_t *k = &p->k;
    const vm_block_t *b = k->blk;
    if (!b || idx >= b->n || idx < k->next) return 0;
    uint64_t t0 = p->c.time_ps, s0 = k->seq;
    run_to(m, p, k, idx + 1);
    return settle(m, p, t0, s0, b->sym, b->kind);
}

uint64_t vm_core_end(model_t *m, int c) {
    cpu_t *p = &m->cpu[c];
    core_t *k = &p->k;
    if (!k->blk) return 0;
    uint64_t t0 = p->c.time_ps, s0 = k->seq;
    run_to(m, p, k, k->blk->n);
    uint64_t ps = settle(m, p, t0, s0, k->blk->sym, k->blk->kind);
    k->blk = NULL;
    return ps;
}

/* --- state ------------------------------------------------------------------------ */
int model_core_init(model_t *m, cpu_t *p) {
    const corecfg_t *g = &m->core;
    core_t *k = &p->k;
    k->rob_ret = calloc(g->rob, sizeof *k->rob_ret);
    k->pht = malloc(g->bp_entries);
    k->btb_tag = calloc(g->btb, sizeof *k->btb_tag);
    k->btb_target = calloc(g->btb, sizeof *k->btb_target);
    if (g->predictor == BP_TOURNAMENT) {
        k->choice = malloc(g->bp_entries);
        k->lpht = malloc(LOCAL_HIST);
        k->lhist = calloc(LOCAL_HIST, sizeof *k->lhist);
    }
    if (!k->rob_ret || !k->pht || !k->btb_tag || !k->btb_target ||
        (g->predictor == BP_TOURNAMENT && (!k->choice || !k->lpht || !k->lhist)))
        return -1;
    memset(k->pht, 1, g->bp_entries);  /* weakly not taken */
    if (k->choice) memset(k->choice, 1, g->bp_entries);
    if (k->lpht) memset(k->lpht, 3, LOCAL_HIST);
    return 0;
}

void model_core_free(cpu_t *p) {
    core_t *k = &p->k;
    free(k->rob_ret);
    free(k->pht);
    free(k->btb_tag);
    free(k->btb_target);
    free(k->choice);
    free(k->lpht);
    free(k->lhist);
}

size_t model_core_bytes(const model_t *m) {
    const corecfg_t *g = &m->core;
    if (!vm_core_on(m)) return 0;
    size_t per = g->rob * 8 + g->bp_entries + g->btb * 16 +
                 (g->predictor == BP_TOURNAMENT ? g->bp_entries + LOCAL_HIST * 3 : 0);
    return per * (size_t)m->ncpus;
}

/* Every time the dataflow core holds, d earlier (vm_shift_time). */
void model_core_shift(model_t *m, cpu_t *p, uint64_t d) {
    core_t *k = &p->k;
    if (!vm_core_on(m)) return;
    for (int i = 0; i < VM_NREG; i++) k->reg_ready[i] = back(k->reg_ready[i], d);
    for (uint32_t i = 0; i < m->core.rob; i++) k->rob_ret[i] = back(k->rob_ret[i], d);
    for (int c = 0; c < VM_X_CLASSES; c++) {
        for (int u = 0; u < MAX_UNITS; u++) k->unit_free[c][u] = back(k->unit_free[c][u], d);
        k->unit_floor[c] = back(k->unit_floor[c], d);
    }
    memset(k->port, 0, sizeof k->port);  /* per-cycle counts: forgotten, not moved */
    memset(k->full_from, 0, sizeof k->full_from);
    memset(k->full_to, 0, sizeof k->full_to);
    for (int i = 0; i < FWD_SLOTS; i++) {
        k->fwd[i].data_ready = back(k->fwd[i].data_ready, d);
        k->fwd[i].drain = back(k->fwd[i].drain, d);
    }
    k->last_retire = back(k->last_retire, d);
    k->last_complete = back(k->last_complete, d);
    k->last_addr_ready = back(k->last_addr_ready, d);
}
