/* vmlab timing model: guest phases, and the results JSON written at exit
 * (read back by timing/__init__.py load_results, stored by analysis/timing.py).
 * Every record in it is an object whose keys are the columns of its
 * timing_* table (analysis/schema.py), so the host stores it by name.
 */
#include "model_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* --- phases ----------------------------------------------------------------------- */
/* d = a - b, field by field (counters_t is all uint64_t: model_int.h). */
static void diff(counters_t *d, const counters_t *a, const counters_t *b) {
    const uint64_t *x = (const uint64_t *)a, *y = (const uint64_t *)b;
    uint64_t *o = (uint64_t *)d;
    for (size_t i = 0; i < sizeof(counters_t) / sizeof(uint64_t); i++) o[i] = x[i] - y[i];
}

void vm_phase(model_t *m, int c, int op, uint64_t id, uint64_t instance) {
    cpu_t *p = &m->cpu[c];
    if (op == VM_PHASE_BEGIN) {
        p->ph_active = 1;
        p->ph_id = id;
        p->ph_inst = instance;
        p->ph_begin_ps = p->c.time_ps;
        p->ph_start = p->c;
    } else if (op == VM_PHASE_END && p->ph_active && p->ph_id == id && p->ph_inst == instance) {
        if (p->nph == p->cap) {
            p->cap = p->cap ? 2 * p->cap : 64;
            p->ph = realloc(p->ph, p->cap * sizeof(phase_t));
        }
        phase_t *r = &p->ph[p->nph++];
        r->id = id;
        r->instance = instance;
        r->begin_ps = p->ph_begin_ps;
        r->end_ps = p->c.time_ps;
        diff(&r->d, &p->c, &p->ph_start);
        p->ph_active = 0;
    }
}

/* --- results ---------------------------------------------------------------------- */
void vm_json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        if ((unsigned char)*s >= 0x20) fputc(*s, f);
    }
    fputc('"', f);
}

/* The counters as JSON members, in COUNTER_FIELDS order. */
static void json_counters(FILE *f, const counters_t *c) {
    int first = 1;
#define X(n) fprintf(f, "%s\"" #n "\":%" PRIu64, first ? "" : ",", c->n); first = 0;
    COUNTER_FIELDS(X)
#undef X
}

typedef struct {
    uint64_t stall;
    uint32_t i;
} symord_t;

static int cmp_symord(const void *a, const void *b) {
    const symord_t *x = a, *y = b;
    if (x->stall != y->stall) return x->stall > y->stall ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* Each section below writes `"name":[...]`; vm_write_results joins them. */
static void write_cpus(FILE *f, const model_t *m) {
    fprintf(f, "\"cpus\":[");
    for (int c = 0; c < m->ncpus; c++) {
        counters_t d;
        diff(&d, &m->cpu[c].c, &m->cpu[c].warm);  /* c itself is state too (time_ps, insns) */
        fprintf(f, "%s\n{\"cpu\":%d,\"node\":%d,", c ? "," : "", c, m->cpu[c].node);
        json_counters(f, &d);
        fputc('}', f);
    }
    fputc(']', f);
}

/* User, kernel and boot: instructions are summed from the CPUs here. */
static void write_kinds(FILE *f, model_t *m) {
    static const char *kinds[VM_KINDS] = {"boot", "kernel", "user"};
    fprintf(f, "\"kinds\":[");
    for (int k = 0; k < VM_KINDS; k++) {
        m->kind[k].insns = 0;
        for (int c = 0; c < m->ncpus; c++) m->kind[k].insns += m->cpu[c].kind_insns[k];
    }
    for (int k = 0; k < VM_KINDS; k++)
        fprintf(f, "%s{\"kind\":\"%s\",\"insns\":%" PRIu64 ",\"accesses\":%" PRIu64 ",\"misses\":%" PRIu64
                   ",\"remote\":%" PRIu64 ",\"stall_ps\":%" PRIu64 "}",
                k ? "," : "", kinds[k], m->kind[k].insns, m->kind[k].accesses, m->kind[k].misses, m->kind[k].remote,
                m->kind[k].stall_ps);
    fputc(']', f);
}

/* Misses and their latency by (CPU node, home node), the pairs with any. */
static void write_matrix(FILE *f, const model_t *m) {
    fprintf(f, "\"matrix\":[");
    int first = 1;
    for (int a = 0; a < m->nnodes; a++)
        for (int b = 0; b < m->nnodes; b++)
            if (m->matrix_n[a][b]) {
                fprintf(f, "%s{\"cpu_node\":%d,\"home_node\":%d,\"misses\":%" PRIu64 ",\"lat_ps\":%" PRIu64 "}",
                        first ? "" : ",", a, b, m->matrix_n[a][b], m->matrix_ps[a][b]);
                first = 0;
            }
    fputc(']', f);
}

/* Per hop count: misses, transfers, lock transfers and the latency histogram. */
static void write_hops(FILE *f, const model_t *m) {
    fprintf(f, "\"hops\":[");
    int first = 1;
    for (int h = 0; h < MAX_HOPS; h++) {
        if (!m->hop_n[h] && !m->c2c_hops[h] && !m->lock_n[h]) continue;
        fprintf(f, "%s\n{\"hops\":%d,\"misses\":%" PRIu64 ",\"lat_ps\":%" PRIu64 ",\"c2c\":%" PRIu64
                   ",\"lock_xfers\":%" PRIu64 ",\"lock_ps\":%" PRIu64 ",\"hist\":[",
                first ? "" : ",", h, m->hop_n[h], m->hop_ps[h], m->c2c_hops[h], m->lock_n[h], m->lock_ps[h]);
        int f2 = 1;
        for (int b = 0; b < HIST_BINS; b++)
            if (m->hist[h][b]) {
                fprintf(f, "%s{\"bin_ns\":%d,\"count\":%" PRIu64 "}", f2 ? "" : ",", b * HIST_NS, m->hist[h][b]);
                f2 = 0;
            }
        fprintf(f, "]}");
        first = 0;
    }
    fputc(']', f);
}

/* Busy time of each memory controller (src = dst = its node), then of each
 * directed link. */
static void write_resources(FILE *f, const model_t *m) {
    fprintf(f, "\"resources\":[");
    for (int r = 0; r < m->nnodes + m->nlinks; r++) {
        int mem = r < m->nnodes;
        fprintf(f, "%s{\"kind\":\"%s\",\"src\":%d,\"dst\":%d,\"busy_ps\":%" PRIu64 "}", r ? "," : "",
                mem ? "mem" : "link", mem ? r : m->link_src[r - m->nnodes], mem ? r : m->link_dst[r - m->nnodes],
                m->busy_total_ps[r] + m->busy_ps[r] - m->busy_warm_ps[r]);
    }
    fputc(']', f);
}

/* Symbols: every one with a lock transfer, and the top 300 by stall. */
static void write_symbols(FILE *f, const model_t *m) {
    symord_t *ord = malloc(m->nsym * sizeof *ord);
    for (uint32_t i = 0; i < m->nsym; i++) ord[i].stall = m->sym[i].stall_ps, ord[i].i = i;
    qsort(ord, m->nsym, sizeof *ord, cmp_symord);
    fprintf(f, "\"symbols\":[");
    int first = 1;
    for (uint32_t k = 0; k < m->nsym; k++) {
        symstat_t *s = &m->sym[ord[k].i];
        if (!s->accesses || (k >= 300 && !s->lock_xfers)) continue;
        fprintf(f, "%s\n{\"symbol\":", first ? "" : ",");
        vm_json_str(f, m->sym_name[ord[k].i]);
        fprintf(f, ",\"accesses\":%" PRIu64 ",\"misses\":%" PRIu64 ",\"remote\":%" PRIu64 ",\"stall_ps\":%" PRIu64
                   ",\"lock_xfers\":%" PRIu64 "}",
                s->accesses, s->misses, s->remote, s->stall_ps, s->lock_xfers);
        first = 0;
    }
    free(ord);
    fputc(']', f);
}

static void write_phases(FILE *f, const model_t *m) {
    fprintf(f, "\"phases\":[");
    int first = 1;
    for (int c = 0; c < m->ncpus; c++)
        for (size_t k = 0; k < m->cpu[c].nph; k++) {
            phase_t *r = &m->cpu[c].ph[k];
            fprintf(f, "%s\n{\"cpu\":%d,\"id\":%" PRIu64 ",\"instance\":%" PRIu64 ",\"begin_ps\":%" PRIu64
                       ",\"end_ps\":%" PRIu64 ",",
                    first ? "" : ",", c, r->id, r->instance, r->begin_ps, r->end_ps);
            json_counters(f, &r->d);
            fputc('}', f);
            first = 0;
        }
    fputc(']', f);
}

/* The page walks' entry reads by where they were served (model_tlb.c): rows
 * of timing_walks; the leaves' page sizes and the walks that found no leaf. */
static void write_walks(FILE *f, const model_t *m) {
    fprintf(f, "\"walks\":{\"translation\":%d,\"fetch\":%d,\"leaf_4k\":%" PRIu64 ",\"leaf_2m\":%" PRIu64
               ",\"leaf_1g\":%" PRIu64 ",\"faults\":%" PRIu64 ",\"reads\":[",
            vm_tlb_on(m), vm_fetch_on(m), m->walk_size[0], m->walk_size[1], m->walk_size[2], m->walk_faults);
    fprintf(f, "{\"served\":\"l1\",\"hops\":null,\"loads\":%" PRIu64 ",\"lat_ps\":%" PRIu64 "},", m->walk_l1,
            m->walk_l1 * m->l1_ps);
    fprintf(f, "{\"served\":\"l2\",\"hops\":null,\"loads\":%" PRIu64 ",\"lat_ps\":%" PRIu64 "}", m->walk_l2,
            m->walk_l2 * m->l2_ps);
    for (int h = 0; h < MAX_HOPS; h++)
        if (m->walk_n[h])
            fprintf(f, ",{\"served\":\"memory\",\"hops\":%d,\"loads\":%" PRIu64 ",\"lat_ps\":%" PRIu64 "}", h,
                    m->walk_n[h], m->walk_ps[h]);
    fprintf(f, "]}");
}

void vm_warmup_done(model_t *m, uint64_t insns) {
    for (int c = 0; c < m->ncpus; c++) {
        cpu_t *p = &m->cpu[c];
        p->warm = p->c;
        memset(p->kind_insns, 0, sizeof p->kind_insns);
        p->ph_start = p->c;  /* a phase open now is counted from here */
        p->nph = 0;          /* phases that ended during the warm-up were not priced */
    }
    for (int r = 0; r < m->nnodes + m->nlinks; r++) m->busy_warm_ps[r] = m->busy_total_ps[r] + m->busy_ps[r];
    memset(m->matrix_n, 0, sizeof m->matrix_n);
    memset(m->matrix_ps, 0, sizeof m->matrix_ps);
    memset(m->hop_n, 0, sizeof m->hop_n);
    memset(m->hop_ps, 0, sizeof m->hop_ps);
    memset(m->hist, 0, sizeof m->hist);
    memset(m->c2c_hops, 0, sizeof m->c2c_hops);
    memset(m->lock_n, 0, sizeof m->lock_n);
    memset(m->lock_ps, 0, sizeof m->lock_ps);
    memset(m->walk_n, 0, sizeof m->walk_n);
    memset(m->walk_ps, 0, sizeof m->walk_ps);
    memset(m->walk_size, 0, sizeof m->walk_size);
    m->walk_l1 = m->walk_l2 = m->walk_faults = 0;
    memset(m->kind, 0, sizeof m->kind);
    memset(m->sym, 0, m->nsym * sizeof *m->sym);
    m->unmapped = 0;
    m->windows = 0;
    m->warmup_insns = insns;
    m->warmup_end_ps = m->cpu[0].c.time_ps;
}

/* Written to <out>.partial and renamed, so a reader never sees half a file. */
int vm_write_results(model_t *m, const char *path) {
    const char *out = path ? path : m->out;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.partial", out);
    FILE *f = fopen(tmp, "w");
    if (!f) return -1;
    fprintf(f, "{\"format\":%d,\"mode\":\"%s\",\"cycle_ps\":%" PRIu64 ",\"l2_ps\":%" PRIu64 ",\"ctrl_ps\":%" PRIu64
               ",\"half_hop_ps\":%" PRIu64 ",\"state_bytes\":%zu,\"windows\":%" PRIu64 ",\"unmapped\":%" PRIu64
               ",\"warmup_insns\":%" PRIu64 ",\"warmup_end_ps\":%" PRIu64 ",\n",
            RESULTS_FORMAT, m->detailed ? "detailed" : "fast", m->cycle_ps, m->l2_ps, m->ctrl_ps, m->half_hop_ps,
            vm_state_bytes(m), m->windows, m->unmapped, m->warmup_insns, m->warmup_end_ps);
    write_cpus(f, m);
    fprintf(f, ",\n");
    write_kinds(f, m);
    fprintf(f, ",\n");
    write_matrix(f, m);
    fprintf(f, ",\n");
    write_hops(f, m);
    fprintf(f, ",\n");
    write_resources(f, m);
    fprintf(f, ",\n");
    write_symbols(f, m);
    fprintf(f, ",\n");
    write_phases(f, m);
    fprintf(f, ",\n");
    write_walks(f, m);
    fprintf(f, "}\n");
    int rc = ferror(f);
    rc |= fclose(f);
    if (!rc) rc = rename(tmp, out);
    return rc ? -1 : 0;
}
