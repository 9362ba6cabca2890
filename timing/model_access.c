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
 * Everything vm_access calls is in this file or static inline in
 * model_int.h, so the compiler can inline the whole per-access path.
 */
#include "model_int.h"

/* --- queueing ------------------------------------------------------------------ */
static void close_window(model_t *m) {
    uint64_t dur = 0;
    for (int c = 0; c < m->ncpus; c++) {
        uint64_t d = m->cpu[c].c.time_ps - m->cpu[c].window_start_ps;
        if (d > dur) dur = d;
        m->cpu[c].window_start_ps = m->cpu[c].c.time_ps;
    }
    int nres = m->nnodes + m->nlinks;
    for (int r = 0; r < nres; r++) {
        uint64_t service = r < m->nnodes ? m->mem_service_ps : *m->link_data_ps;
        double rho = dur ? (double)m->busy_ps[r] / (double)dur : 0.0;
        if (rho > 0.95) rho = 0.95;  /* the window is an estimate; keep the delay finite */
        m->qdelay_ps[r] = (uint64_t)(rho * (double)service / (2.0 * (1.0 - rho)));
        m->busy_total_ps[r] += m->busy_ps[r];
        m->busy_ps[r] = 0;
    }
    m->window_misses = 0;
    m->windows++;
}

/* One leg a -> b: its hop latency, plus queueing on each link; the links
 * become busy for a header or a data message. */
static inline uint64_t leg(model_t *m, int a, int b, int data) {
    uint64_t t = m->hops[a][b] * m->half_hop_ps;
    const int *l = m->route_links + m->route_off[a][b];
    uint64_t busy = data ? *m->link_data_ps : *m->link_req_ps;
    for (int i = 0; i < m->route_len[a][b]; i++) {
        int r = m->nnodes + l[i];
        t += m->qdelay_ps[r];
        m->busy_ps[r] += busy;
    }
    return t;
}

/* --- the requester's caches ---------------------------------------------------- */
/* Drops line from cpu's caches (an invalidation or a back-invalidation). */
static inline void drop_line(cpu_t *p, uint64_t line) {
    c_remove(&p->l1, line);
    c_remove(&p->l2, line);
}

/* L2 eviction of entry `victim` from cpu c: tell the directory, write back dirty data. */
static void evicted(model_t *m, int c, uint64_t victim) {
    if (!victim) return;
    uint64_t line = victim >> 2;
    int st = (int)(victim & 3);
    cpu_t *p = &m->cpu[c];
    c_remove(&p->l1, line);  /* L2 is inclusive of L1 */
    uint64_t pa = line << m->line_shift;
    uint64_t idx = dir_index(m, pa);
    int home = m->gran_node[pa >> GRAN_SHIFT];
    uint64_t e = m->dir[idx] & ~(1ull << c);
    if ((e & ~DIR_EXCL) == 0) e = 0;
    else if (st >= S_E) e &= ~DIR_EXCL;
    m->dir[idx] = e;
    if (st == S_M) {  /* write-back: off the critical path, but it occupies the path and the controller */
        p->c.writebacks++;
        m->busy_ps[home] += m->mem_service_ps;
        (void)leg(m, p->node, home, 1);
    }
}

static inline void fill(model_t *m, int c, uint64_t line, int state) {
    cpu_t *p = &m->cpu[c];
    evicted(m, c, c_insert(&p->l2, line, state));
    c_insert(&p->l1, line, state);  /* L1 victims stay in L2: nothing to tell */
}

/* The line, present in L2 at way j, becomes L1's MRU and both hold it in state st. */
static inline void refill_l1(cpu_t *p, uint64_t line, int j, int st, int st2) {
    if (j) c_touch(&p->l2, line, j);
    if (st != st2) c_setstate(&p->l2, line, st);
    c_remove(&p->l1, line);
    c_insert(&p->l1, line, st);
}

/* Hit in L1 with enough rights (the hot path): an exclusive access to an
 * E line turns it M silently. */
static inline int l1_hit(cpu_t *p, uint64_t line, int excl) {
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

/* --- the home directory -------------------------------------------------------- */
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

/* Another cache owns the line (E or M): a cache-to-cache transfer via the home. */
static inline void from_owner(model_t *m, txn_t *t) {
    int me = t->me, home = t->home, o = __builtin_ctzll(t->others), on = m->cpu[o].node;
    t->lat = m->l2_ps + m->ctrl_ps + m->qdelay_ps[home] + m->l2_ps + leg(m, me, home, 0) + leg(m, home, on, 0) +
             leg(m, on, me, 1);
    m->busy_ps[home] += m->mem_service_ps;  /* the directory lookup */
    cpu_t *op = &m->cpu[o];
    int ost = S_INV;
    int oi = c_find(&op->l2, t->line);
    if (oi >= 0) ost = (int)(c_set(&op->l2, t->line)[oi] & 3);
    if (t->excl) {
        drop_line(op, t->line);
        t->e = 0;
    } else {
        c_setstate(&op->l2, t->line, S_S);
        c_setstate(&op->l1, t->line, S_S);
        t->e = t->others;
        if (ost == S_M) {  /* the dirty line is written back to the home as it is shared */
            op->c.writebacks++;
            m->busy_ps[home] += m->mem_service_ps;
        }
    }
    t->p->c.c2c++;
    t->hops = m->hops[me][on];
    m->c2c_hops[t->hops]++;
}

/* Shared elsewhere and wanted exclusive: invalidate every other sharer (acks
 * go to the requester); the data comes from memory unless we hold it. */
static inline void invalidate_sharers(model_t *m, txn_t *t) {
    int me = t->me, home = t->home;
    uint64_t inv = 0;
    int far = m->hops[me][home];  /* binned by the farthest party the claim involves */
    for (uint64_t s = t->others; s; s &= s - 1) {
        int o = __builtin_ctzll(s), on = m->cpu[o].node;
        uint64_t d = m->hops[home][on] * m->half_hop_ps + m->hops[on][me] * m->half_hop_ps;
        if (d > inv) inv = d;
        if (m->hops[me][on] > far) far = m->hops[me][on];
        drop_line(&m->cpu[o], t->line);
        t->p->c.invals++;
    }
    uint64_t dir_path = m->l2_ps + m->ctrl_ps + m->qdelay_ps[home] + leg(m, me, home, 0) + inv;
    if (t->st2 == S_S) {
        t->lat = dir_path;  /* upgrade: we hold the data already */
        t->p->c.upgrades++;
    } else {
        uint64_t mem = m->mem_ps[me][home] + m->qdelay_ps[home] + leg(m, home, me, 1) -
                       m->hops[home][me] * m->half_hop_ps;
        t->lat = mem > dir_path ? mem : dir_path;
    }
    m->busy_ps[home] += m->mem_service_ps;
    t->e = 0;
    t->hops = far;
}

/* Upgrade with no other sharer: a round trip to the directory. */
static inline void upgrade_alone(model_t *m, txn_t *t) {
    int me = t->me, home = t->home;
    t->lat = m->l2_ps + m->ctrl_ps + m->qdelay_ps[home] + leg(m, me, home, 0) + leg(m, home, me, 0);
    m->busy_ps[home] += m->mem_service_ps;
    t->p->c.upgrades++;
    t->e = 0;
    t->hops = m->hops[me][home];
}

/* Memory at the home node: the topology's load-to-use latency plus queueing. */
static inline void from_memory(model_t *m, txn_t *t) {
    int me = t->me, home = t->home;
    t->lat = m->mem_ps[me][home] + m->qdelay_ps[home];
    /* the request and reply legs add queueing; their hop latency is in mem_ps */
    t->lat += leg(m, me, home, 0) - m->hops[me][home] * m->half_hop_ps;
    t->lat += leg(m, home, me, 1) - m->hops[home][me] * m->half_hop_ps;
    m->busy_ps[home] += m->mem_service_ps;
    t->hops = m->hops[me][home];
    if (!t->excl && t->others) t->e = t->others;  /* shared: others keep S */
}

/* The requester's new state; the directory entry becomes what it will be. */
static inline int requester_state(txn_t *t) {
    if (t->excl) {
        t->e = DIR_EXCL | (1ull << t->c);
        return S_M;
    }
    if (t->e & ~DIR_EXCL) {
        t->e = (t->e & ~DIR_EXCL) | (1ull << t->c);
        return S_S;
    }
    t->e = DIR_EXCL | (1ull << t->c);
    return S_E;
}

/* The transaction at entry idx of the directory, then the line into the
 * requester's caches (in place if its L2 held it at way j). */
static inline void transact(model_t *m, txn_t *t, uint64_t idx, int j) {
    t->e = m->dir[idx];
    t->others = t->e & ~DIR_EXCL & ~(1ull << t->c);
    if ((t->e & DIR_EXCL) && t->others) from_owner(m, t);
    else if (t->excl && t->others) invalidate_sharers(m, t);
    else if (t->st2 == S_S) upgrade_alone(m, t);
    else from_memory(m, t);
    int nst = requester_state(t);
    m->dir[idx] = t->e;
    if (j >= 0) refill_l1(t->p, t->line, j, nst, t->st2);  /* upgrade in place */
    else fill(m, t->c, t->line, nst);
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

/* home: the line's home node (the CPU-node x home-node matrix); hops: the
 * distance the miss is binned by (to the home, or to the owning cache). */
static inline void count_miss(model_t *m, cpu_t *p, int home, int hops, uint64_t lat, uint32_t sym, int kind) {
    p->c.misses++;
    if (hops) p->c.remote++;
    m->matrix_n[p->node][home]++;
    m->matrix_ps[p->node][home] += lat;
    m->hop_n[hops]++;
    m->hop_ps[hops] += lat;
    uint64_t bin = lat / (HIST_NS * 1000);
    m->hist[hops][bin < HIST_BINS ? bin : HIST_BINS - 1]++;
    m->sym[sym].misses++;
    if (hops) m->sym[sym].remote++;
    m->kind[kind].misses++;
    if (hops) m->kind[kind].remote++;
    if (++m->window_misses >= WINDOW_MISSES) close_window(m);
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

/* --- the API ----------------------------------------------------------------------- */
uint64_t vm_access(model_t *m, int c, uint64_t pa, unsigned flags, uint32_t sym) {
    cpu_t *p = &m->cpu[c];
    int kind = flags & VM_F_USER ? VM_USER : flags & VM_F_KERNEL ? VM_KERNEL : VM_BOOT;
    int excl = (flags & (VM_F_WRITE | VM_F_ATOMIC)) != 0;
    size_t g = pa >> GRAN_SHIFT;
    if (g >= m->ngran || m->gran_node[g] < 0) {
        m->unmapped++;
        return 0;
    }
    uint64_t line = pa >> m->line_shift;
    count_access(m, p, flags, sym, kind);
    if (l1_hit(p, line, excl)) return 0;
    int j = c_find(&p->l2, line);
    int st2 = j >= 0 ? (int)(c_set(&p->l2, line)[j] & 3) : S_INV;
    if (j >= 0 && (!excl || st2 >= S_E)) {  /* L2 hit */
        refill_l1(p, line, j, excl ? S_M : st2, st2);
        p->c.l2_hits++;
        charge(m, p, m->l2_ps, sym, kind);
        return m->l2_ps;
    }
    /* L2 miss, or an upgrade: a transaction at the home node's directory */
    txn_t t = {.p = p, .c = c, .me = p->node, .home = m->gran_node[g], .excl = excl, .st2 = st2, .line = line};
    transact(m, &t, dir_index(m, pa), j);
    count_miss(m, p, t.home, t.hops, t.lat, sym, kind);
    if (flags & VM_F_ATOMIC) count_lock(m, p, t.hops, t.lat, sym);
    p->c.mem_ps += t.lat;
    charge(m, p, t.lat, sym, kind);
    return t.lat;
}

void vm_io_access(model_t *m, int cpu) { m->cpu[cpu].c.io++; }

void vm_insns(model_t *m, int c, uint32_t n, int kind) {
    cpu_t *p = &m->cpu[c];
    p->c.insns += n;
    p->c.time_ps += (uint64_t)n * m->cycle_ps;  /* base CPI 1: instruction fetch modeled as L1I hits */
    p->kind_insns[kind] += n;
}

uint64_t vm_cpu_time_ps(const model_t *m, int cpu) { return m->cpu[cpu].c.time_ps; }
