/* vmlab timing model: pricing accesses. See model.h for what it prices.
 *
 * Latency decomposition (all from the topology file):
 *   L1 hit            0 stall (pipelined)
 *   L2 hit            l2 latency cycles
 *   memory, h hops    local_ns + h * hop_ns: the topology's load-to-use figure,
 *                     so a pointer chase measures exactly the configured value
 *   cache-to-cache    requester L2 + home directory/DRAM (local_ns - L2) + owner L2
 *                     + (d(req,home) + d(home,owner) + d(owner,req)) * hop_ns / 2
 *   upgrade/invalidate  requester L2 + home directory + d(req,home) * hop/2
 *                     + max over sharers of (d(home,s) + d(s,req)) * hop/2
 * hop_ns is the round-trip (request + reply) cost of a hop, so one leg of a
 * transfer costs half of it. Queueing on memory controllers and directed
 * links is added from their utilisation in the previous window (M/D/1).
 *
 * The hit path (this file and model_int.h's static inline cache helpers)
 * inlines whole; an L2 miss calls into model_memsys.c, the directory
 * transaction and what it costs on the network.
 */
#include "model_mlp.h"

/* --- the L2 streamer (model_core.h) ------------------------------------------------- */
/* The L2 streamer, trained by an L1 miss to line at now (see model_core.h).
 * A prefetch that finds the L2 queue full waits for the first entry to free,
 * for at most a miss's latency to its home (Intel's L2 keeps a queue of
 * prefetch requests; the superqueue takes demand and prefetch alike): under
 * the dataflow core the demand misses of a read loop come as fast as the
 * machine's, and prefetches dropped at a full queue never got ahead of them. */
void stream_train(model_t *m, int c, uint64_t line, uint64_t now) {
    cpu_t *p = &m->cpu[c];
    core_t *k = &p->k;
    uint32_t page_shift = 12 - m->line_shift;
    int32_t per_page = 1 << page_shift, off = (int32_t)(line & (uint64_t)(per_page - 1));
    uint64_t page = line >> page_shift;
    /* trackers are direct-mapped by page: a page's stream takes its slot from whatever was there */
    /* a multiplicative hash: buffers a power of two apart (a copy's source and
     * destination) must not land in one slot and evict each other's stream */
    stream_t *s = &k->st[((page * 0x9e3779b97f4a7c15ull) >> 40) % m->core.streams];
    if (s->page != page || !s->used) {
        *s = (stream_t){.page = page, .used = 1, .last = off, .ahead = -1};
        return;
    }
    int32_t d = off - s->last;
    if (!d) return;
    int8_t dir = d > 0 ? 1 : -1;
    if (d * dir <= 4) s->conf = s->dir == dir ? s->conf + (s->conf < 8) : 1;
    else s->conf = 0;
    s->dir = dir;
    s->last = off;
    if (s->conf < 2) return;
    int32_t from = s->ahead >= 0 && (s->ahead - off) * dir > 0 ? s->ahead + dir : off + dir;
    int32_t to = off + dir * (int32_t)m->core.pf_distance;
    for (int32_t o = from; (to - o) * dir >= 0 && o >= 0 && o < per_page; o += dir) {
        uint64_t pl = (page << page_shift) | (uint64_t)o;
        if (c_find(&p->l2, pl) >= 0) {
            s->ahead = o;
            continue;
        }
        uint64_t pa = pl << m->line_shift;
        size_t g = pa >> GRAN_SHIFT;
        if (g >= m->ngran || m->gran_node[g] < 0) break;
        uint32_t q = first_free(k->sq_ready, m->core.l2_queue);
        uint64_t start = k->sq_ready[q] > now ? k->sq_ready[q] : now;
        if (start > now && start - now > m->mem_ps[p->node][m->gran_node[g]])
            break;  /* the queue is full (for longer than a miss to that home takes) */
        m->now_ps = start;
        txn_t t = {.p = p, .c = c, .me = p->node, .home = m->gran_node[g], .excl = 0, .st2 = S_INV, .line = pl};
        vm_transact(m, &t, dir_index(m, pa), -1, 0);
        p->c.prefetches++;
        count_fetch(m, p, t.home, t.hops, t.lat);
        k->sq_ready[q] = start + t.lat;
        infl_set(k, pl, start + t.lat);
        s->ahead = o;
    }
}

/* The blocking core (core.ooo 0): every access's latency is a stall. */
static uint64_t access_blocking(model_t *m, cpu_t *p, int c, uint64_t pa, unsigned flags, uint32_t sym, int kind) {
    uint64_t line = pa >> m->line_shift;
    if (l1_hit(p, line, (flags & (VM_F_WRITE | VM_F_ATOMIC)) != 0)) return 0;
    int l2hit;
    uint64_t lat = l1_miss(m, p, c, pa, line, flags, sym, kind, p->c.time_ps, p->c.time_ps, &l2hit) - p->c.time_ps;
    charge(m, p, lat, sym, kind);
    return lat;
}

/* --- the API ----------------------------------------------------------------------- */
uint64_t vm_access(model_t *m, int c, uint64_t pa, uint64_t vaddr, unsigned flags, uint32_t sym,
                   uint64_t **value_slot) {
    cpu_t *p = &m->cpu[c];
    if (value_slot) *value_slot = NULL;
    if (p->k.staged) {  /* the last load's value, now that the caller wrote it */
        p->k.staged = 0;
        pv_note(&p->k, p->k.stage_value, p->k.stage_ready);
    }
    int kind = flags & VM_F_USER ? VM_USER : flags & VM_F_KERNEL ? VM_KERNEL : VM_BOOT;
    size_t g = pa >> GRAN_SHIFT;
    if (g >= m->ngran || m->gran_node[g] < 0) {
        m->unmapped++;
        return 0;
    }
    count_access(m, p, flags, sym, kind);
    if (!m->core.ooo) {  /* the translation, then the access, one after the other */
        uint64_t t0 = p->c.time_ps, x = translate(m, p, c, vaddr, t0, sym, kind);
        if (x > t0) charge(m, p, x - t0, sym, kind);
        return x - t0 + access_blocking(m, p, c, pa, flags, sym, kind);
    }

    core_t *k = &p->k;
    uint64_t t0 = p->c.time_ps, line = pa >> m->line_shift;
    int atomic = (flags & VM_F_ATOMIC) != 0, store = !atomic && (flags & VM_F_WRITE);
    int excl = store || atomic;
    /* (a) the address came from a value still arriving; (c) the reorder window is full */
    wait_until(m, p, dep_ready(k, vaddr, p->c.time_ps), &p->c.dep_stall_ps, sym, kind);
    wait_until(m, p, rob_ready(m, k, p->c.insns, p->c.time_ps), &p->c.rob_stall_ps, sym, kind);
    if (atomic) {  /* (e) a barrier: earlier stores drained, earlier misses arrived */
        uint64_t drained = k->sb_last > k->fb_until ? k->sb_last : k->fb_until;
        wait_until(m, p, drained, &p->c.fence_stall_ps, sym, kind);
    }
    if (store) {  /* (d) a store needs a store-buffer entry before it can even ask for its line */
        uint64_t t = p->c.time_ps;
        while (k->sb_n && k->sb_drain[k->sb_head] <= t) k->sb_head = (k->sb_head + 1) % MAX_SB, k->sb_n--;
        if (k->sb_n == m->core.store_buffer) {
            wait_until(m, p, k->sb_drain[k->sb_head], &p->c.sb_stall_ps, sym, kind);
            k->sb_head = (k->sb_head + 1) % MAX_SB;
            k->sb_n--;
        }
    }
    uint64_t now = p->c.time_ps, ready = now;  /* ready: when this access's data (or ownership) is there */
    uint64_t xlat = translate(m, p, c, vaddr, now, sym, kind);  /* the access issues once translated */
    int l1miss = 0;
    if (l1_hit(p, line, excl)) {
        uint64_t r = infl_ready(k, line, now);
        if (r) ready = r;
        if (xlat > ready) ready = xlat;
    } else {
        l1miss = 1;
        /* (b) an L1 miss needs a fill buffer; a store's RFO waits for one in the store buffer */
        uint32_t f = first_free(k->fb_ready, m->core.fill_buffers);
        if (k->fb_ready[f] > now && !store) {
            wait_until(m, p, k->fb_ready[f], &p->c.fb_stall_ps, sym, kind);
            now = p->c.time_ps;
        }
        uint64_t issue = k->fb_ready[f] > now ? k->fb_ready[f] : now;
        if (xlat > issue) issue = xlat;
        /* an L2 miss or upgrade also needs an L2 queue entry; an L2 hit may be on a line a
         * prefetch is still bringing */
        uint32_t q = first_free(k->sq_ready, m->core.l2_queue);
        int l2hit;
        ready = l1_miss(m, p, c, pa, line, flags, sym, kind, issue,
                        k->sq_ready[q] > issue ? k->sq_ready[q] : issue, &l2hit);
        if (l2hit) {
            uint64_t r = infl_ready(k, line, now);
            if (r > ready) ready = r;
        } else {
            k->sq_ready[q] = ready;
        }
        k->fb_ready[f] = ready;
        k->fb_insn[f] = store ? NO_ROB : p->c.insns;
        if (!store && p->c.insns + m->core.rob < k->rob_next) k->rob_next = p->c.insns + m->core.rob;
        if (ready > k->fb_until) k->fb_until = ready;
        infl_set(k, line, ready);
    }
    if (atomic) {  /* the lock operation waits for its line: serialised, as before */
        wait_until(m, p, ready, &p->c.fence_stall_ps, sym, kind);
    } else if (store) {  /* stores retire into the store buffer and drain in order */
        uint64_t drain = ready > k->sb_last ? ready : k->sb_last;
        k->sb_drain[(k->sb_head + k->sb_n++) % MAX_SB] = drain;
        k->sb_last = drain;
    } else if ((flags & VM_F_WIDE) && ready > p->c.time_ps && value_slot) {
        k->staged = 1;  /* its value may be an address: the caller writes it into stage_value */
        k->stage_value = 0;
        k->stage_ready = ready;
        *value_slot = &k->stage_value;
    }
    if (l1miss && m->core.streams) stream_train(m, c, line, now);
    return p->c.time_ps - t0;
}

void vm_io_access(model_t *m, int cpu) { m->cpu[cpu].c.io++; }

uint64_t vm_insns(model_t *m, int c, uint32_t n, int kind) {
    cpu_t *p = &m->cpu[c];
    p->c.insns += n;
    /* base CPI 1: instruction fetch modeled as L1I hits; when the engine runs at the core's best case
     * (vm_set_engine_insn_ps: a block the core does not execute, before a booted run's pricing starts), that
     * time, so the model's clock and the engine's stay together */
    p->c.time_ps += (uint64_t)n * vm_engine_insn_ps(m);
    p->kind_insns[kind] += n;
    if (!m->core.ooo || p->k.fb_until <= p->c.time_ps) return 0;
    uint64_t t0 = p->c.time_ps;
    wait_until(m, p, rob_ready(m, &p->k, p->c.insns, t0), &p->c.rob_stall_ps,
               kind == VM_USER ? VM_SYM_USER : kind == VM_KERNEL ? VM_SYM_KERNEL_OTHER : VM_SYM_BOOT, kind);
    return p->c.time_ps - t0;
}

void vm_sync_time(model_t *m, int c, uint64_t engine_ps) {
    cpu_t *p = &m->cpu[c];
    if (engine_ps > p->c.time_ps) {
        p->c.unpriced_ps += engine_ps - p->c.time_ps;
        p->c.time_ps = engine_ps;
    }
}

uint64_t vm_cpu_time_ps(const model_t *m, int cpu) { return m->cpu[cpu].c.time_ps; }

uint64_t vm_total_insns(const model_t *m) {
    uint64_t n = 0;
    for (int c = 0; c < m->ncpus; c++) n += m->cpu[c].c.insns;
    return n;
}

void vm_set_engine_insn_ps(model_t *m, uint64_t ps) { m->engine_insn_ps = ps; }
uint64_t vm_engine_insn_ps(const model_t *m) { return m->engine_insn_ps ? m->engine_insn_ps : m->cycle_ps; }

/* Every time a CPU's state holds, d earlier (0 stays 0: an empty entry).
 * After a functional warm-up the CPU's clock ran ahead of the engine's by
 * what it did not charge; moved back, the CPUs share one time again, which
 * the shared bandwidth calendar (cal_take) and the queues need. */
void vm_shift_time(model_t *m, int c, uint64_t d) {
    cpu_t *p = &m->cpu[c];
    core_t *k = &p->k;
    if (!d) return;
    p->c.time_ps = back(p->c.time_ps, d);
    p->window_start_ps = back(p->window_start_ps, d);
    if (p->ph_active) p->ph_begin_ps = back(p->ph_begin_ps, d);
    for (int i = 0; i < MAX_FB; i++) k->fb_ready[i] = back(k->fb_ready[i], d);
    k->fb_until = back(k->fb_until, d);
    for (int i = 0; i < MAX_SQ; i++) k->sq_ready[i] = back(k->sq_ready[i], d);
    for (int i = 0; i < MAX_SB; i++) k->sb_drain[i] = back(k->sb_drain[i], d);
    k->sb_last = back(k->sb_last, d);
    for (int i = 0; i < INFL_SLOTS; i++) k->infl[i].ready_ps = back(k->infl[i].ready_ps, d);
    for (int i = 0; i < PV_SLOTS; i++) k->pv[i].ready_ps = back(k->pv[i].ready_ps, d);
    k->stage_ready = back(k->stage_ready, d);
    model_core_shift(m, p, d);
    k->pv_until = back(k->pv_until, d);
}
