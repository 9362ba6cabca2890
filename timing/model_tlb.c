/* vmlab timing model: address translation and instruction fetch (model_tlb.h
 * says what is modeled). Called by vm_access for every data access and by
 * vm_fetch for every block fetched; a first-level TLB hit returns at once.
 *
 * A walk's entry reads are a dependent chain of loads through this CPU's
 * L1D and L2 (an L1 hit costs the L1's latency, an L2 hit the L2's) and,
 * past them, the directory transaction at the page-table page's home node:
 * a process whose page tables sit on a far node pays the hops at every walk.
 * A walk waits for a free walker first.
 */
#include "model_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NO_PAGE UINT64_MAX

/* --- config -------------------------------------------------------------------- */
static int parse_sizes(const char *s, uint8_t *mask) {
    *mask = 0;
    char buf[32];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (!strcmp(tok, "4k")) *mask |= 1;
        else if (!strcmp(tok, "2m")) *mask |= 2;
        else if (!strcmp(tok, "1g")) *mask |= 4;
        else return -1;
    }
    return *mask ? 0 : -1;
}

int model_tlb_parse(model_t *m, const char *key, const char *p, char *why, size_t n) {
    tlbmodel_t *t = &m->tlb;
    if (!strcmp(key, "tlb")) {
        char level[8], sizes[32];
        tlbcfg_t a = {0};
        if (sscanf(p, "%7s %31s %u %u", level, sizes, &a.entries, &a.ways) != 4 || parse_sizes(sizes, &a.sizes) ||
            !a.ways || a.entries % a.ways || !is_pow2(a.entries / a.ways) ||
            (strcmp(level, "l1d") && strcmp(level, "l1i") && strcmp(level, "l2"))) {
            snprintf(why, n, "tlb: expected l1d|l1i|l2 SIZES(4k,2m,1g) ENTRIES WAYS with a power-of-two number of sets");
            return 1;
        }
        if (t->narr == MAX_TLBS) {
            snprintf(why, n, "tlb: at most %d arrays", MAX_TLBS);
            return 1;
        }
        a.level = level[1] == '2' ? TLB_L2 : level[2] == 'd' ? TLB_L1D : TLB_L1I;
        t->arr[t->narr++] = a;
        t->on = 1;
        return 1;
    }
    if (!strcmp(key, "tlb_l2_cycles")) {
        unsigned cyc;
        if (sscanf(p, "%u", &cyc) != 1) snprintf(why, n, "tlb_l2_cycles: expected a whole number");
        else t->l2_cycles = cyc;
        return 1;
    }
    if (!strcmp(key, "psc")) {
        char lv[16];
        unsigned e;
        int i = -1;
        if (sscanf(p, "%15s %u", lv, &e) == 2)
            i = !strcmp(lv, "pde") ? 0 : !strcmp(lv, "pdpte") ? 1 : !strcmp(lv, "pml4e") ? 2 : -1;
        if (i < 0 || e > MAX_PSC) snprintf(why, n, "psc: expected pde|pdpte|pml4e and 0..%d entries", MAX_PSC);
        else t->psc_entries[i] = e;
        return 1;
    }
    if (!strcmp(key, "walkers")) {
        if (sscanf(p, "%u", &t->walkers) != 1 || t->walkers < 1 || t->walkers > MAX_WALKERS)
            snprintf(why, n, "walkers: expected 1..%d", MAX_WALKERS);
        return 1;
    }
    return 0;
}

int model_tlb_init(model_t *m, char *why, size_t n) {
    tlbmodel_t *t = &m->tlb;
    m->fetch_on = m->detailed && m->l1i_geom[0] != 0;
    if (!t->on || !m->detailed) return 1;
    int have[3] = {0};
    for (int i = 0; i < t->narr; i++) have[t->arr[i].level] = 1;
    if (!have[TLB_L1D] || !have[TLB_L1I]) {
        snprintf(why, n, "tlb: needs an l1d and an l1i array");
        return 0;
    }
    if (!t->walkers) t->walkers = 1;
    t->l2_ps = (uint64_t)t->l2_cycles * m->cycle_ps;
    for (int c = 0; c < m->ncpus; c++) {
        cputlb_t *k = &m->cpu[c].tlb;
        for (int i = 0; i < t->narr; i++) {
            k->t[i].ways = t->arr[i].ways;
            k->t[i].mask = t->arr[i].entries / t->arr[i].ways - 1;
            k->t[i].key = calloc(t->arr[i].entries, sizeof(uint64_t));
            k->t[i].frame = calloc(t->arr[i].entries, sizeof(uint64_t));
            if (!k->t[i].key || !k->t[i].frame) {
                snprintf(why, n, "tlb: out of memory");
                return 0;
            }
        }
        k->last_dpage = k->last_ipage = NO_PAGE;
    }
    return 1;
}

void model_tlb_free(model_t *m) {
    if (!m->cpu) return;
    for (int c = 0; c < m->ncpus; c++)
        for (int i = 0; i < MAX_TLBS; i++) {
            free(m->cpu[c].tlb.t[i].key);
            free(m->cpu[c].tlb.t[i].frame);
        }
}

void vm_set_mmu(model_t *m, const vm_mmu_t *mmu) { m->mmu = *mmu; }
int vm_tlb_on(const model_t *m) { return m->tlb.on && m->detailed; }
int vm_fetch_on(const model_t *m) { return m->fetch_on; }

/* --- the arrays ------------------------------------------------------------------ */
static void tlb_insert(tlb_t *t, uint64_t vpn, int size, uint64_t frame) {
    uint64_t *s = t->key + (size_t)(vpn & t->mask) * t->ways, *f = t->frame + (size_t)(vpn & t->mask) * t->ways;
    memmove(s + 1, s, (t->ways - 1) * sizeof *s);
    memmove(f + 1, f, (t->ways - 1) * sizeof *f);
    s[0] = ((vpn << 2) | (uint64_t)size) + 1;
    f[0] = frame;
}

static void tlb_touch(tlb_t *t, uint64_t vpn, int i) {
    uint64_t *s = t->key + (size_t)(vpn & t->mask) * t->ways, *f = t->frame + (size_t)(vpn & t->mask) * t->ways;
    uint64_t k = s[i], fr = f[i];
    memmove(s + 1, s, (size_t)i * sizeof *s);
    memmove(f + 1, f, (size_t)i * sizeof *f);
    s[0] = k;
    f[0] = fr;
}

/* Looks va up in the arrays of one level; on a hit the entry becomes MRU,
 * *frame is va's 4 KiB frame, *size and *entry the entry's page size and frame word. */
static int level_lookup(model_t *m, cputlb_t *k, int level, uint64_t va, uint64_t *frame, int *size, uint64_t *entry) {
    for (int i = 0; i < m->tlb.narr; i++) {
        if (m->tlb.arr[i].level != level) continue;
        for (int s = 0; s < TLB_SIZES; s++) {
            if (!(m->tlb.arr[i].sizes & (1 << s))) continue;
            uint64_t vpn = va >> tlb_shift(s);
            int j = tlb_find(&k->t[i], vpn, s);
            if (j < 0) continue;
            tlb_touch(&k->t[i], vpn, j);
            uint64_t fr = k->t[i].frame[(size_t)(vpn & k->t[i].mask) * k->t[i].ways];
            *frame = (fr & ~TLB_GLOBAL) + ((va >> 12) & ((1ull << (tlb_shift(s) - 12)) - 1));
            *size = s;
            *entry = fr;
            return 1;
        }
    }
    return 0;
}

/* A translation of size s into the first array of level that holds it. */
static void level_fill(model_t *m, cputlb_t *k, int level, uint64_t va, int s, uint64_t frame) {
    for (int i = 0; i < m->tlb.narr; i++)
        if (m->tlb.arr[i].level == level && (m->tlb.arr[i].sizes & (1 << s))) {
            tlb_insert(&k->t[i], va >> tlb_shift(s), s, frame);
            return;
        }
}

static int psc_find(psc_t *c, uint64_t key, uint64_t *next) {
    for (uint32_t i = 0; i < c->n; i++)
        if (c->key[i] == key) {
            uint64_t nx = c->next[i];
            memmove(c->key + 1, c->key, i * sizeof(uint64_t));
            memmove(c->next + 1, c->next, i * sizeof(uint64_t));
            c->key[0] = key;
            c->next[0] = nx;
            *next = nx;
            return 1;
        }
    return 0;
}

static void psc_insert(psc_t *c, uint32_t cap, uint64_t key, uint64_t next) {
    if (!cap) return;
    if (c->n < cap) c->n++;
    memmove(c->key + 1, c->key, (c->n - 1) * sizeof(uint64_t));
    memmove(c->next + 1, c->next, (c->n - 1) * sizeof(uint64_t));
    c->key[0] = key;
    c->next[0] = next;
}

/* --- the walk ---------------------------------------------------------------------- */
/* One page-table entry read at pa, issued at t: when its value is there. */
static uint64_t walk_load(model_t *m, int c, uint64_t pa, uint64_t t, uint32_t sym, int kind) {
    cpu_t *p = &m->cpu[c];
    size_t g = pa >> GRAN_SHIFT;
    p->c.walk_loads++;
    if (g >= m->ngran || m->gran_node[g] < 0) return t;
    uint64_t line = pa >> m->line_shift;
    if (l1_hit(p, line, 0)) {
        m->walk_l1++;
        return t + m->l1_ps;
    }
    int j = c_find(&p->l2, line);
    if (j >= 0) {
        int st = (int)(c_set(&p->l2, line)[j] & 3);
        refill_l1(p, line, j, st, st);
        p->c.l2_hits++;
        m->walk_l2++;
        return t + m->l2_ps;
    }
    m->now_ps = t;
    txn_t x = {.p = p, .c = c, .me = p->node, .home = m->gran_node[g], .excl = 0, .st2 = S_INV, .line = line};
    vm_transact(m, &x, dir_index(m, pa), -1, 1);
    count_miss(m, p, x.home, x.hops, x.lat, sym, kind);
    p->c.mem_ps += x.lat;
    if (x.hops) p->c.walk_remote++;
    m->walk_n[x.hops]++;
    m->walk_ps[x.hops] += x.lat;
    return t + x.lat;
}

/* Walks va's translation from t. Returns when it is done; *size and *frame
 * the leaf's (frame NO_PAGE: the guest's tables did not map it, or could not
 * be read: nothing is filled). */
static uint64_t walk(model_t *m, int c, uint64_t va, uint64_t t, uint32_t sym, int kind, int *size, uint64_t *frame) {
    cpu_t *p = &m->cpu[c];
    cputlb_t *k = &p->tlb;
    *frame = NO_PAGE;
    uint64_t cr3;
    unsigned fl;
    if (!m->mmu.root || !m->mmu.root(m->mmu.ctx, c, &cr3, &fl) || !(fl & VM_MMU_PAGING)) return t;
    /* a free walker */
    uint32_t w = 0;
    for (uint32_t i = 1; i < m->tlb.walkers; i++)
        if (k->walker_free[i] < k->walker_free[w]) w = i;
    uint64_t start = k->walker_free[w] > t ? k->walker_free[w] : t, now = start;
    int level = fl & VM_MMU_LA57 ? 4 : 3;
    uint64_t table = cr3 & PTE_ADDR, next;
    /* the paging-structure caches, lowest first: a PDE hit leaves one read */
    for (int l = 0; l < PSC_LEVELS && level > l; l++)
        if (psc_find(&k->psc[l], (va >> tlb_shift(l + 1)) + 1, &next)) {
            table = next;
            level = l;
            break;
        }
    p->c.walks++;
    for (;; level--) {
        uint64_t pa = table + ((va >> tlb_shift(level)) & 511) * 8, e;
        if (!m->mmu.read(m->mmu.ctx, pa, &e)) break;
        now = walk_load(m, c, pa, now, sym, kind);
        if (!(e & 1)) break;  /* not present: the guest faults, and walks again after */
        if (level == 0 || (level <= 2 && (e & 0x80))) {  /* a leaf: PTE, or a PS bit in a PDE/PDPTE */
            *size = level;
            *frame = ((e & PTE_ADDR) & ~((1ull << tlb_shift(level)) - 1)) >> 12;
            if (e & 0x100) *frame |= TLB_GLOBAL;
            m->walk_size[level]++;
            break;
        }
        table = e & PTE_ADDR;
        if (level <= PSC_LEVELS) psc_insert(&k->psc[level - 1], m->tlb.psc_entries[level - 1],
                                            (va >> tlb_shift(level)) + 1, table);
    }
    if (*frame == NO_PAGE) m->walk_faults++;
    k->walker_free[w] = now;
    p->c.walk_ps += now - t;
    return now;
}

uint64_t model_translate(model_t *m, int c, uint64_t va, int instr, uint64_t t, uint32_t sym, int kind,
                         uint64_t *frame) {
    cpu_t *p = &m->cpu[c];
    cputlb_t *k = &p->tlb;
    uint64_t fr = NO_PAGE;
    if (frame) *frame = fr;
    if (!m->mmu.read) return t;  /* no walker (a test harness, a guest without one): nothing to price */
    va &= (1ull << 57) - 1;  /* canonical: the sign extension says nothing */
    int size = 0;
    uint64_t leaf;
    if (level_lookup(m, k, instr ? TLB_L1I : TLB_L1D, va, &fr, &size, &leaf)) {
        if (frame) *frame = fr;
        return t;
    }
    if (instr) p->c.itlb_misses++;
    else p->c.dtlb_misses++;
    if (level_lookup(m, k, TLB_L2, va, &fr, &size, &leaf)) {
        level_fill(m, k, instr ? TLB_L1I : TLB_L1D, va, size, leaf);  /* at the L2 entry's size */
        if (frame) *frame = fr;
        return t + m->tlb.l2_ps;
    }
    uint64_t done = walk(m, c, va, t + m->tlb.l2_ps, sym, kind, &size, &leaf);
    if (leaf != NO_PAGE) {
        level_fill(m, k, TLB_L2, va, size, leaf);
        level_fill(m, k, instr ? TLB_L1I : TLB_L1D, va, size, leaf);
        fr = (leaf & ~TLB_GLOBAL) + ((va >> 12) & ((1ull << (tlb_shift(size) - 12)) - 1));
    }
    if (frame) *frame = fr;
    return done;
}

void vm_tlb_flush(model_t *m, int c, int what, uint64_t va) {
    if (!vm_tlb_on(m)) return;
    cpu_t *p = &m->cpu[c];
    cputlb_t *k = &p->tlb;
    p->c.tlb_flushes++;
    va &= (1ull << 57) - 1;
    for (int i = 0; i < m->tlb.narr; i++) {
        tlb_t *t = &k->t[i];
        if (what == VM_FLUSH_PAGE) {
            for (int s = 0; s < TLB_SIZES; s++) {
                if (!(m->tlb.arr[i].sizes & (1 << s))) continue;
                uint64_t vpn = va >> tlb_shift(s);
                int j = tlb_find(t, vpn, s);
                if (j >= 0) t->key[(size_t)(vpn & t->mask) * t->ways + j] = 0;
            }
            continue;
        }
        size_t n = (size_t)(t->mask + 1) * t->ways;
        for (size_t e = 0; e < n; e++)
            if (what == VM_FLUSH_ALL || !(t->frame[e] & TLB_GLOBAL)) t->key[e] = 0;
    }
    for (int l = 0; l < PSC_LEVELS; l++) k->psc[l].n = 0;
    k->last_dpage = k->last_ipage = NO_PAGE;
}

/* --- instruction fetch ---------------------------------------------------------------- */
/* One code line at pa: 0 on an L1I hit, else when it is there (from t). */
static uint64_t fetch_line(model_t *m, int c, uint64_t pa, uint64_t t, uint32_t sym, int kind) {
    cpu_t *p = &m->cpu[c];
    uint64_t line = pa >> m->line_shift, *f = &p->ifilter[line % IFILTER];
    if (*f == line + 1) return 0;  /* fetched lately and still in the L1I (its LRU order is not refreshed) */
    int i = c_find(&p->l1i, line);
    if (i >= 0) {
        if (i) c_touch(&p->l1i, line, i);
        *f = line + 1;
        return 0;
    }
    size_t g = pa >> GRAN_SHIFT;
    if (g >= m->ngran || m->gran_node[g] < 0) return 0;  /* ROM, firmware: not priced */
    p->c.l1i_misses++;
    uint64_t ready;
    int j = c_find(&p->l2, line);
    if (j >= 0) {  /* the L2 is unified: code and data */
        c_touch(&p->l2, line, j);
        p->c.l2_hits++;
        ready = t + m->l2_ps;
    } else {
        m->now_ps = t;
        txn_t x = {.p = p, .c = c, .me = p->node, .home = m->gran_node[g], .excl = 0, .st2 = S_INV, .line = line};
        vm_transact(m, &x, dir_index(m, pa), -1, 0);
        count_miss(m, p, x.home, x.hops, x.lat, sym, kind);
        p->c.mem_ps += x.lat;
        ready = t + x.lat;
    }
    uint64_t victim = c_insert(&p->l1i, line, S_S);
    if (victim && p->ifilter[(victim >> 2) % IFILTER] == (victim >> 2) + 1) p->ifilter[(victim >> 2) % IFILTER] = 0;
    *f = line + 1;
    return ready;
}

uint64_t vm_fetch(model_t *m, int c, uint64_t pc, uint32_t bytes, uint32_t sym, int kind) {
    if (!bytes || !m->fetch_on) return 0;
    cpu_t *p = &m->cpu[c];
    cputlb_t *k = &p->tlb;
    uint64_t t0 = p->c.time_ps, t = t0, done = t0, end = pc + bytes - 1;
    for (uint64_t page = pc >> 12; page <= end >> 12; page++) {
        uint64_t frame;
        if (page == k->last_ipage) {
            frame = k->last_iframe;
        } else if (vm_tlb_on(m)) {
            t = model_translate(m, c, page << 12, 1, t, sym, kind, &frame);
            if (frame == NO_PAGE) return 0;  /* unmapped or unreadable: the fetch faults, nothing priced */
            k->last_ipage = page;
            k->last_iframe = frame;
        } else {
            return 0;  /* no translation: the code's physical address is unknown */
        }
        uint64_t lo = page == pc >> 12 ? pc : page << 12, hi = page == end >> 12 ? end : (page << 12) | 4095;
        for (uint64_t a = lo >> m->line_shift; a <= hi >> m->line_shift; a++) {
            uint64_t r = fetch_line(m, c, (frame << 12) | ((a << m->line_shift) & 4095), t, sym, kind);
            if (r > done) done = r;
        }
    }
    if (t > done) done = t;
    uint64_t stall = done - t0;
    if (stall) {
        p->c.fetch_stall_ps += stall;
        charge(m, p, stall, sym, kind);
    }
    return stall;
}
