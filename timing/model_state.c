/* vmlab timing model: its state, built from the config (model_config.c
 * reads it), freed, and sized.
 */
#include "model_int.h"

#include <stdlib.h>

static int cache_init(cache_t *c, uint32_t bytes, uint32_t ways, uint32_t line) {
    if (!ways || !line || bytes % (ways * line)) return -1;
    uint32_t sets = bytes / (ways * line);
    if (!is_pow2(sets)) return -1;
    c->mask = sets - 1;
    c->ways = ways;
    c->t = calloc((size_t)sets * ways, sizeof(uint64_t));
    return c->t ? 0 : -1;
}

/* Cycle, L2, controller and hop costs; memory latency per (CPU node, home). */
static int set_latencies(model_t *m, cfg_t *cf) {
    m->line_shift = (uint32_t)__builtin_ctz(cf->line_bytes);
    if (!m->cycle_ps) m->cycle_ps = (uint64_t)(1000.0 / m->clock_ghz + 0.5);  /* a config without cycle_ps */
    m->l2_ps = (uint64_t)m->l2_geom[2] * m->cycle_ps;
    m->l1_ps = (uint64_t)m->l1_geom[2] * m->cycle_ps;
    m->l1i_ps = (uint64_t)m->l1i_geom[2] * m->cycle_ps;
    m->l3_ps = (uint64_t)m->l3_geom[2] * m->cycle_ps;
    m->sock_c2c_ps = (uint64_t)(cf->sock_c2c_ns * 1000.0 + 0.5);
    if (m->l3_geom[0] && (m->l3_ps <= m->l2_ps || m->sock_c2c_ps <= m->l2_ps ||
                          (double)m->l3_ps >= cf->local_ns * 1000.0)) {
        model_seterr(cf->err, cf->errlen, "%s: l3: expected L2 latency < L3 latency < local_ns and l3_c2c_ns above the "
                     "L2's latency", cf->path);
        return 0;
    }
    if ((double)m->l2_ps >= cf->local_ns * 1000.0) {
        model_seterr(cf->err, cf->errlen, "%s: L2 latency (%u cycles) must be below local_ns", cf->path, m->l2_geom[2]);
        return 0;
    }
    m->ctrl_ps = (uint64_t)(cf->local_ns * 1000.0 + 0.5) - m->l2_ps;
    m->half_hop_ps = (uint64_t)(cf->hop_ns * 500.0 + 0.5);
    m->link_half_ps = calloc(m->nlinks + 1, sizeof(uint64_t));
    for (int l = 0; l < m->nlinks; l++)
        m->link_half_ps[l] = cf->link_lat && cf->link_lat[l] >= 0 ? (uint64_t)(cf->link_lat[l] * 500.0 + 0.5)
                                                                  : m->half_hop_ps;
    /* a leg: the links of its route; without route lines, hops x half_hop_ps */
    for (int a = 0; a < m->nnodes; a++)
        for (int b = 0; b < m->nnodes; b++) {
            uint64_t leg = 0;
            const int *l = m->route_links + m->route_off[a][b];
            for (int i = 0; i < m->route_len[a][b]; i++) leg += m->link_half_ps[l[i]];
            m->leg_ps[a][b] = m->route_len[a][b] ? leg : m->hops[a][b] * m->half_hop_ps;
        }
    for (int a = 0; a < m->nnodes; a++)
        for (int b = 0; b < m->nnodes; b++)
            m->mem_ps[a][b] = (uint64_t)(cf->local_ns * 1000.0 + 0.5) + m->leg_ps[a][b] + m->leg_ps[b][a];
    return 1;
}

/* Guest-physical granule -> (home node, offset in RAM); the directory covers all RAM. */
static void build_address_map(model_t *m, const cfg_t *cf) {
    uint64_t max_end = 0;
    for (int i = 0; i < cf->nranges; i++) {
        if (cf->ranges[i].end > max_end) max_end = cf->ranges[i].end;
        uint64_t top = cf->ranges[i].off + (cf->ranges[i].end - cf->ranges[i].start);
        if (top > m->ram_bytes) m->ram_bytes = top;
    }
    m->ngran = max_end >> GRAN_SHIFT;
    m->gran_node = malloc(m->ngran * sizeof(int16_t));
    m->gran_off = calloc(m->ngran, sizeof(uint64_t));
    for (size_t g = 0; g < m->ngran; g++) m->gran_node[g] = -1;
    for (int i = 0; i < cf->nranges; i++)
        for (uint64_t a = cf->ranges[i].start; a < cf->ranges[i].end; a += 1ull << GRAN_SHIFT) {
            m->gran_node[a >> GRAN_SHIFT] = (int16_t)cf->ranges[i].node;
            m->gran_off[a >> GRAN_SHIFT] = cf->ranges[i].off + (a - cf->ranges[i].start);
        }
    m->dir_lines = m->ram_bytes >> m->line_shift;
}

/* Memory controllers and directed links: busy time and service times. */
static void init_queueing(model_t *m, const cfg_t *cf) {
    int nres = m->nnodes + m->nlinks;
    m->busy_ps = calloc(nres, sizeof(uint64_t));
    m->busy_total_ps = calloc(nres, sizeof(uint64_t));
    m->qdelay_ps = calloc(nres, sizeof(uint64_t));
    m->busy_warm_ps = calloc(nres, sizeof(uint64_t));
    m->mem_service_ps = (uint64_t)(cf->line_bytes / cf->mem_bw * 1000.0 + 0.5);
    m->node_service_ps = calloc(m->nnodes, sizeof(uint64_t));
    for (int n = 0; n < m->nnodes; n++)
        m->node_service_ps[n] = cf->node_bw[n] > 0 ? (uint64_t)(cf->line_bytes / cf->node_bw[n] * 1000.0 + 0.5)
                                                   : m->mem_service_ps;
    m->cal_tag = calloc((size_t)nres * CAL_SLOTS, sizeof(uint64_t));
    m->cal_used = calloc((size_t)nres * CAL_SLOTS, sizeof(uint32_t));
    for (size_t i = 0; i < (size_t)nres * CAL_SLOTS; i++) m->cal_tag[i] = UINT64_MAX;  /* no bucket yet */
    /* Per link (element 0 stands for every link of a machine without link_fig
     * lines). The interconnect's figure is its raw rate: a data message is the
     * line and a 16-byte header. A link_fig link's figure is the data it
     * carries, its protocol's overhead already taken off (a CXL link: 64 bytes
     * of data in each 68-byte flit), so a line takes line_bytes of it. */
    m->link_req_ps = calloc(m->nlinks + 1, sizeof(uint64_t));
    m->link_data_ps = calloc(m->nlinks + 1, sizeof(uint64_t));
    for (int l = 0; l <= m->nlinks; l++) {
        int own = cf->link_bw_of && l < m->nlinks && cf->link_bw_of[l] > 0;
        double bw = own ? cf->link_bw_of[l] : cf->link_bw;
        m->link_req_ps[l] = (uint64_t)(16 / bw * 1000.0 + 0.5);            /* header-only message */
        m->link_data_ps[l] = (uint64_t)((cf->line_bytes + (own ? 0 : 16)) / bw * 1000.0 + 0.5);
    }
}

/* CPUs, with their caches in detailed mode. */
static int init_cpus(model_t *m, cfg_t *cf) {
    m->cpu = calloc(m->ncpus, sizeof(cpu_t));
    for (int c = 0; c < m->ncpus; c++) {
        m->cpu[c].node = cf->cpu_node[c];
        if (m->detailed && (cache_init(&m->cpu[c].l1, m->l1_geom[0], m->l1_geom[1], cf->line_bytes) ||
                            cache_init(&m->cpu[c].l2, m->l2_geom[0], m->l2_geom[1], cf->line_bytes))) {
            model_seterr(cf->err, cf->errlen, "%s: l1d/l2: size must be ways x line x a power-of-two number of sets",
                         cf->path);
            return 0;
        }
        if (vm_core_on(m) && model_core_init(m, &m->cpu[c])) {
            model_seterr(cf->err, cf->errlen, "%s: cannot allocate the core's window and predictor", cf->path);
            return 0;
        }
        if (m->detailed && m->l1i_geom[0] && cache_init(&m->cpu[c].l1i, m->l1i_geom[0], m->l1i_geom[1], cf->line_bytes)) {
            model_seterr(cf->err, cf->errlen, "%s: l1i: size must be ways x line x a power-of-two number of sets",
                         cf->path);
            return 0;
        }
    }
    if (m->detailed && m->l3_geom[0]) {
        m->l3 = calloc(m->nnodes, sizeof(cache_t));
        for (int n = 0; n < m->nnodes; n++)
            if (cache_init(&m->l3[n], m->l3_geom[0], m->l3_geom[1], cf->line_bytes)) {
                model_seterr(cf->err, cf->errlen, "%s: l3: size must be ways x line x a power-of-two number of sets",
                             cf->path);
                return 0;
            }
    }
    char why[256];
    if (!model_tlb_init(m, why, sizeof why)) {
        model_seterr(cf->err, cf->errlen, "%s: %s", cf->path, why);
        return 0;
    }
    return 1;
}

static int init_directory(model_t *m, cfg_t *cf) {
    if (!m->detailed) return 1;
    /* Lazily backed by the OS: only lines the guest touches cost memory. */
    m->dir = calloc(m->dir_lines, sizeof(uint64_t));
    if (!m->dir) {
        model_seterr(cf->err, cf->errlen, "%s: cannot allocate the directory (%zu lines)", cf->path, m->dir_lines);
        return 0;
    }
    return 1;
}

/* Read and check the config, then build; a failure anywhere frees what was built. */
model_t *vm_model_new(const char *path, char *err, size_t errlen) {
    model_t *m = calloc(1, sizeof *m);
    cfg_t cf;
    int ok = !model_read_config(m, &cf, path, err, errlen) && set_latencies(m, &cf);
    if (ok) {
        build_address_map(m, &cf);
        init_queueing(m, &cf);
        ok = init_cpus(m, &cf) && init_directory(m, &cf) && !model_sym_init(m, cf.sympath, err, errlen);
    }
    free(cf.cpu_node);
    free(cf.link_lat);
    free(cf.link_bw_of);
    if (!ok) {
        vm_model_free(m);
        return NULL;
    }
    return m;
}

void vm_model_free(model_t *m) {
    if (!m) return;
    if (m->cpu)
        for (int c = 0; c < m->ncpus; c++) {
            free(m->cpu[c].l1.t);
            free(m->cpu[c].l2.t);
            free(m->cpu[c].l1i.t);
            free(m->cpu[c].ph);
            model_core_free(&m->cpu[c]);
        }
    model_tlb_free(m);
    if (m->l3)
        for (int n = 0; n < m->nnodes; n++) free(m->l3[n].t);
    free(m->l3);
    free(m->cpu);
    free(m->dir);
    free(m->gran_node);
    free(m->gran_off);
    free(m->busy_ps);
    free(m->busy_total_ps);
    free(m->qdelay_ps);
    free(m->busy_warm_ps);
    free(m->cal_tag);
    free(m->cal_used);
    free(m->link_req_ps);
    free(m->link_data_ps);
    free(m->link_half_ps);
    free(m->node_service_ps);
    free(m->link_src);
    free(m->link_dst);
    free(m->route_links);
    if (m->sym_name)
        for (uint32_t i = 0; i < m->nsym; i++) free(m->sym_name[i]);
    free(m->sym_name);
    free(m->sym_addr);
    free(m->sym);
    free(m);
}

int vm_ncpus(const model_t *m) { return m->ncpus; }
int vm_mode_detailed(const model_t *m) { return m->detailed; }
uint64_t vm_kernel_base(const model_t *m) { return m->kernel_base; }
uint32_t vm_line_bytes(const model_t *m) { return 1u << m->line_shift; }

int vm_hop_class(const model_t *m, int cpu, uint64_t paddr) {
    uint64_t g = paddr >> GRAN_SHIFT;
    if (cpu < 0 || cpu >= m->ncpus || g >= m->ngran || m->gran_node[g] < 0) return -1;
    return m->hops[m->cpu[cpu].node][m->gran_node[g]];
}

int vm_hop_classes(const model_t *m) {
    int most = 0;
    for (int i = 0; i < m->nnodes; i++)
        for (int k = 0; k < m->nnodes; k++)
            if (m->hops[i][k] > most) most = m->hops[i][k];
    return most + 1;
}

size_t vm_state_bytes(const model_t *m) {
    size_t b = sizeof *m + m->ncpus * sizeof(cpu_t) + m->nsym * (sizeof(symstat_t) + 16) +
               (size_t)(m->nnodes + m->nlinks) * CAL_SLOTS * (sizeof(uint64_t) + sizeof(uint32_t));
    if (m->detailed)
        b += m->ncpus * ((size_t)(m->cpu[0].l1.mask + 1) * m->cpu[0].l1.ways +
                         (size_t)(m->cpu[0].l2.mask + 1) * m->cpu[0].l2.ways) * sizeof(uint64_t) +
             m->dir_lines * sizeof(uint64_t);
    return b + model_core_bytes(m);
}
