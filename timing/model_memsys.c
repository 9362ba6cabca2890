/* vmlab timing model: the memory system beyond the core. A directory
 * transaction (an L2 miss, an upgrade or a prefetch) at the line's home:
 * who answers (memory, the owning cache, or the directory invalidating the
 * sharers), what it costs over the links, queueing on controllers and links,
 * and the line's fill into the requester's caches with what it evicts.
 * Latency decomposition: model_access.c's header. The L1 hit path never
 * comes here; an L2 miss does, once, through vm_transact.
 */
#include "model_int.h"

/* --- queueing ------------------------------------------------------------------ */
void vm_close_window(model_t *m) {
    uint64_t dur = 0;
    for (int c = 0; c < m->ncpus; c++) {
        uint64_t d = m->cpu[c].c.time_ps - m->cpu[c].window_start_ps;
        if (d > dur) dur = d;
        m->cpu[c].window_start_ps = m->cpu[c].c.time_ps;
    }
    int nres = m->nnodes + m->nlinks;
    for (int r = 0; r < nres; r++) {
        uint64_t service = r < m->nnodes ? m->node_service_ps[r] : m->link_data_ps[r - m->nnodes];
        double rho = dur ? (double)m->busy_ps[r] / (double)dur : 0.0;
        if (rho > 0.95) rho = 0.95;  /* the window is an estimate; keep the delay finite */
        m->qdelay_ps[r] = (uint64_t)(rho * (double)service / (2.0 * (1.0 - rho)));
        m->busy_total_ps[r] += m->busy_ps[r];
        m->busy_ps[r] = 0;
    }
    m->window_misses = 0;
    m->windows++;
}

/* Bandwidth as capacity: resource r serves at most CAL_BUCKET_PS of work per
 * bucket of time. A request at time t takes `service` ps in the first bucket
 * at or after t with room and waits until that bucket starts. The M/D/1 term
 * prices contention below saturation; this keeps a saturated controller or
 * link from serving more than its bandwidth, whatever the requesters'
 * parallelism. Buckets count work whatever the order it arrives in, so vCPUs
 * that run a quantum apart in host order share a bucket fairly. */
static inline uint64_t cal_take(model_t *m, int r, uint64_t t, uint64_t service) {
    uint64_t b0 = t / CAL_BUCKET_PS, b = b0;
    uint64_t *tag = m->cal_tag + (size_t)r * CAL_SLOTS;
    uint32_t *used = m->cal_used + (size_t)r * CAL_SLOTS;
    if (service > CAL_BUCKET_PS) service = CAL_BUCKET_PS;  /* a line slower than a bucket: one per bucket */
    for (int k = 0; k < CAL_SLOTS; k++, b++) {
        size_t s = b % CAL_SLOTS;
        if (tag[s] != b) tag[s] = b, used[s] = 0;
        if (used[s] + service <= CAL_BUCKET_PS) {
            used[s] += (uint32_t)service;
            return b == b0 ? 0 : b * CAL_BUCKET_PS - t;
        }
    }
    return (uint64_t)CAL_SLOTS * CAL_BUCKET_PS;  /* the horizon: far past any real queue */
}

/* One leg a -> b: its links' latency, plus queueing on each link; the links
 * become busy for a header or a data message, and a data message needs room
 * in each link's bandwidth. */
static inline uint64_t leg(model_t *m, int a, int b, int data) {
    uint64_t t = m->leg_ps[a][b];
    const int *l = m->route_links + m->route_off[a][b];
    for (int i = 0; i < m->route_len[a][b]; i++) {
        int r = m->nnodes + l[i];
        uint64_t busy = data ? m->link_data_ps[l[i]] : m->link_req_ps[l[i]];
        t += m->qdelay_ps[r];
        if (data) t += cal_take(m, r, m->now_ps + t, busy);
        m->busy_ps[r] += busy;
    }
    return t;
}

/* The memory at node home (its DRAM, or a CPU-less node's device) serves one line: its queueing delay. */
static inline uint64_t dram(model_t *m, int home, uint64_t at) {
    m->busy_ps[home] += m->node_service_ps[home];
    return m->qdelay_ps[home] + cal_take(m, home, at, m->node_service_ps[home]);
}

/* --- the requester's caches: fills and evictions ---------------------------- */
/* The L3 holds a line under this key: its set is the line's low bits mixed
 * with higher ones, as a socket's L3 hashes addresses over its slices, so
 * strides that share low bits do not crowd a few sets. A bijection: no two
 * lines share a key. */
static inline uint64_t l3key(uint64_t line) { return line ^ (line >> 13) ^ (line >> 26); }

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
        (void)dram(m, home, m->now_ps);
        (void)leg(m, p->node, home, 1);
    }
    if (m->l3) c_insert(&m->l3[p->node], l3key(line), S_S);  /* the socket's victim cache keeps a clean copy */
}

static inline void fill(model_t *m, int c, uint64_t line, int state, int l1_too) {
    cpu_t *p = &m->cpu[c];
    evicted(m, c, c_insert(&p->l2, line, state));
    if (l1_too) c_insert(&p->l1, line, state);  /* L1 victims stay in L2: nothing to tell */
}


/* --- the home directory -------------------------------------------------------- */
/* Another cache owns the line (E or M): a cache-to-cache transfer via the home.
 * With a shared L3 per socket (Cascade Lake), the owner's socket hands the line
 * over through its L3 / snoop filter at sock_c2c_ps (requester's L2 miss
 * included), and a home on the owner's socket answers from that on-die
 * filter, not from the memory directory: homed at the owner, the request
 * crosses the links and comes straight back with the line; homed elsewhere,
 * the home reads its memory directory first, then forwards. */
static inline void from_owner(model_t *m, txn_t *t) {
    int me = t->me, home = t->home, o = __builtin_ctzll(t->others), on = m->cpu[o].node;
    /* the owner's part: its L2, or its socket's hand-off (which counts the requester's L2 miss too) */
    uint64_t owner = m->l3 ? m->sock_c2c_ps - m->l2_ps : m->l2_ps;
    if (m->l3 && on == home) {
        t->lat = m->l2_ps + owner + leg(m, me, home, 0) + leg(m, on, me, 1);
    } else {
        t->lat = m->l2_ps + m->ctrl_ps + m->qdelay_ps[home] + leg(m, me, home, 0) + leg(m, home, on, 0) + owner +
                 leg(m, on, me, 1);
        m->busy_ps[home] += m->node_service_ps[home];  /* the (memory) directory's read */
    }
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
            (void)dram(m, home, m->now_ps);
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
        uint64_t d = m->leg_ps[home][on] + m->leg_ps[on][me];
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
        uint64_t mem = m->mem_ps[me][home] + dram(m, home, m->now_ps) + leg(m, home, me, 1) -
                       m->leg_ps[home][me];
        t->lat = mem > dir_path ? mem : dir_path;
    }
    if (t->st2 == S_S) m->busy_ps[home] += m->node_service_ps[home];
    t->e = 0;
    t->hops = far;
}

/* Upgrade with no other sharer: a round trip to the directory. */
static inline void upgrade_alone(model_t *m, txn_t *t) {
    int me = t->me, home = t->home;
    t->lat = m->l2_ps + m->ctrl_ps + m->qdelay_ps[home] + leg(m, me, home, 0) + leg(m, home, me, 0);
    m->busy_ps[home] += m->node_service_ps[home];
    t->p->c.upgrades++;
    t->e = 0;
    t->hops = m->hops[me][home];
}

/* Memory at the home node: the topology's load-to-use latency plus queueing. */
static inline void from_memory(model_t *m, txn_t *t) {
    int me = t->me, home = t->home;
    /* the request and reply legs add queueing; their hop latency is in mem_ps */
    uint64_t req = leg(m, me, home, 0);
    t->lat = m->mem_ps[me][home] + dram(m, home, m->now_ps + req) + req - m->leg_ps[me][home];
    t->lat += leg(m, home, me, 1) - m->leg_ps[home][me];
    t->hops = m->hops[me][home];
    if (!t->excl && t->others) t->e = t->others;  /* shared: others keep S */
}

/* Shared L3 (model_int.h): a read that another CPU of the requester's socket
 * holds shared is forwarded inside the socket; one the socket's L3 holds is
 * served from it (the line moves up to the L2: a victim cache). Returns 1 if
 * the socket answered. */
static inline int from_socket(model_t *m, txn_t *t) {
    if (t->excl) return 0;
    for (uint64_t s = t->others; s; s &= s - 1)
        if (m->cpu[__builtin_ctzll(s)].node == t->me) {
            t->lat = m->sock_c2c_ps;
            t->hops = 0;
            t->e = t->others;
            t->p->c.c2c++;
            m->c2c_hops[0]++;
            return 1;
        }
    cache_t *l3 = &m->l3[t->me];
    uint64_t k = l3key(t->line);
    if (c_find(l3, k) < 0) return 0;
    c_remove(l3, k);
    t->lat = m->l3_ps;
    t->hops = 0;
    if (t->others) t->e = t->others;
    t->p->c.l3_hits++;
    return 1;
}

/* A line now held exclusive (E or M) somewhere: no L3 keeps a copy that would go stale. */
static inline void l3_drop(model_t *m, uint64_t line) {
    uint64_t k = l3key(line);
    for (int n = 0; n < m->nnodes; n++) c_remove(&m->l3[n], k);
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
void vm_transact(model_t *m, txn_t *t, uint64_t idx, int j, int l1_too) {
    t->e = m->dir[idx];
    t->others = t->e & ~DIR_EXCL & ~(1ull << t->c);
    if ((t->e & DIR_EXCL) && t->others) from_owner(m, t);
    else if (t->excl && t->others) invalidate_sharers(m, t);
    else if (t->st2 == S_S) upgrade_alone(m, t);
    else if (!(m->l3 && from_socket(m, t))) from_memory(m, t);
    int nst = requester_state(t);
    if (m->l3 && nst >= S_E) l3_drop(m, t->line);
    m->dir[idx] = t->e;
    if (j >= 0) refill_l1(t->p, t->line, j, nst, t->st2);  /* upgrade in place */
    else fill(m, t->c, t->line, nst, l1_too);
}
