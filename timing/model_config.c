/* vmlab timing model: reading the config. It is one `key values...` per
 * line, written from a topology by config_text() in timing/__init__.py; the
 * first bad line stops the read with a one-line error.
 */
#include "model_int.h"

#include <errno.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void model_seterr(char *err, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (err && n) vsnprintf(err, n, fmt, ap);
    va_end(ap);
}

/* Fails the read at the current line. */
__attribute__((format(printf, 2, 3))) static void bad(cfg_t *cf, const char *fmt, ...) {
    char b[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, sizeof b, fmt, ap);
    va_end(ap);
    model_seterr(cf->err, cf->errlen, "%s:%d: %s", cf->path, cf->lineno, b);
    cf->ok = 0;
}

static void parse_mode(model_t *m, cfg_t *cf, const char *p) {
    char mode[32] = "";
    sscanf(p, "%31s", mode);
    if (!strcmp(mode, "detailed")) m->detailed = 1;
    else if (!strcmp(mode, "fast")) m->detailed = 0;
    else bad(cf, "mode: expected detailed or fast, got '%s'", mode);
}

static void parse_cpus(model_t *m, cfg_t *cf, const char *p) {
    if (sscanf(p, "%d", &m->ncpus) != 1 || m->ncpus < 1 || m->ncpus > MAX_CPUS) {
        bad(cf, "cpus: expected 1..%d", MAX_CPUS);
        return;
    }
    cf->cpu_node = malloc(m->ncpus * sizeof(int));
    for (int i = 0; i < m->ncpus; i++) cf->cpu_node[i] = -1;
}

static void parse_cpu_node(model_t *m, cfg_t *cf, const char *p) {
    int c, nd;
    if (!cf->cpu_node || sscanf(p, "%d %d", &c, &nd) != 2 || c < 0 || c >= m->ncpus || nd < 0 || nd >= m->nnodes)
        bad(cf, "cpu_node: expected CPU below 'cpus' and node below 'nodes' (after both)");
    else cf->cpu_node[c] = nd;
}

/* `hops i h0 h1 ...`: row i of the hop matrix. */
static void parse_hops(model_t *m, cfg_t *cf, const char *p) {
    int i, k = 0, h, nn;
    if (sscanf(p, "%d%n", &i, &nn) != 1 || i < 0 || i >= m->nnodes) {
        bad(cf, "hops: bad row");
        return;
    }
    p += nn;
    while (k < m->nnodes && sscanf(p, "%d%n", &h, &nn) == 1) {
        if (h < 0 || h >= MAX_HOPS) {
            bad(cf, "hops: expected 0..%d", MAX_HOPS - 1);
            break;
        }
        m->hops[i][k++] = (uint8_t)h;
        p += nn;
    }
    if (cf->ok && k != m->nnodes) bad(cf, "hops %d: expected %d values", i, m->nnodes);
    cf->have_hops++;
}

static void parse_links(model_t *m, cfg_t *cf, const char *p) {
    if (sscanf(p, "%d", &m->nlinks) != 1 || m->nlinks < 0) bad(cf, "links: expected a count");
    m->link_src = calloc(m->nlinks + 1, sizeof(int));
    m->link_dst = calloc(m->nlinks + 1, sizeof(int));
    cf->link_lat = malloc((m->nlinks + 1) * sizeof(double));
    cf->link_bw_of = malloc((m->nlinks + 1) * sizeof(double));
    for (int i = 0; i <= m->nlinks; i++) cf->link_lat[i] = cf->link_bw_of[i] = -1;
}

/* `link_fig id lat_ns bw_gbps`: a link that is not the interconnect's (a
 * CPU-less memory node's own link, a switch port): its round-trip latency
 * and bandwidth (timing.memory_lines writes them). */
static void parse_link_fig(model_t *m, cfg_t *cf, const char *p) {
    int id;
    double lat, bw;
    char extra[2];
    if (!cf->link_lat || sscanf(p, "%d %lf %lf %1s", &id, &lat, &bw, extra) != 3 || id < 0 || id >= m->nlinks ||
        !(lat >= 0 && lat <= 1e6) || !(bw > 0 && bw <= 1e6))
        bad(cf, "link_fig: expected id (below 'links', after it) latency_ns (0..1e6) bandwidth_gbps (>0)");
    else cf->link_lat[id] = lat, cf->link_bw_of[id] = bw;
}

/* `node_bw node gbps`: a node whose memory is not the DRAM of mem_bw_gbps
 * (a CPU-less memory node's device). */
static void parse_node_bw(model_t *m, cfg_t *cf, const char *p) {
    int nd;
    double bw;
    char extra[2];
    if (sscanf(p, "%d %lf %1s", &nd, &bw, extra) != 2 || nd < 0 || nd >= m->nnodes || !(bw > 0 && bw <= 1e6))
        bad(cf, "node_bw: expected a node below 'nodes' (after it) and a bandwidth in GB/s (>0)");
    else cf->node_bw[nd] = bw;
}

static void parse_link(model_t *m, cfg_t *cf, const char *p) {
    int id, a, b;
    if (!m->link_src || sscanf(p, "%d %d %d", &id, &a, &b) != 3 || id < 0 || id >= m->nlinks)
        bad(cf, "link: expected id src dst after 'links'");
    else m->link_src[id] = a, m->link_dst[id] = b;
}

/* `route a b l0 l1 ...`: the directed links from node a to node b. */
static void parse_route(model_t *m, cfg_t *cf, const char *p) {
    int a, b, l, nn;
    if (sscanf(p, "%d %d%n", &a, &b, &nn) != 2 || a < 0 || b < 0 || a >= m->nnodes || b >= m->nnodes) {
        bad(cf, "route: expected src dst links...");
        return;
    }
    p += nn;
    m->route_off[a][b] = (uint32_t)m->nroute_links;
    int len = 0;
    while (sscanf(p, "%d%n", &l, &nn) == 1) {
        if (l < 0 || l >= m->nlinks) {
            bad(cf, "route %d %d: link %d unknown", a, b, l);
            break;
        }
        if (m->nroute_links == cf->route_cap)
            m->route_links = realloc(m->route_links, (cf->route_cap *= 2) * sizeof(int));
        m->route_links[m->nroute_links++] = l;
        len++;
        p += nn;
    }
    m->route_len[a][b] = (uint8_t)len;
}

static void parse_range(cfg_t *cf, const char *p) {
    if (cf->nranges == (int)(sizeof cf->ranges / sizeof cf->ranges[0])) {
        bad(cf, "range: too many");
        return;
    }
    range_t *r = &cf->ranges[cf->nranges];
    if (sscanf(p, "%" SCNx64 " %" SCNx64 " %d %" SCNx64, &r->start, &r->end, &r->node, &r->off) != 4)
        bad(cf, "range: expected start end node ram_offset (hex, node decimal)");
    else cf->nranges++;
}

/* `core ooo|blocking` and the core's figures (model_core.h), each 1..its limit. */
static void parse_core(model_t *m, cfg_t *cf, const char *key, const char *p) {
    static const struct { const char *key; uint32_t max; size_t off; } figs[] = {
        {"fill_buffers", MAX_FB, offsetof(corecfg_t, fill_buffers)},
        {"l2_queue", MAX_SQ, offsetof(corecfg_t, l2_queue)},
        {"rob", MAX_ROB, offsetof(corecfg_t, rob)},
        {"store_buffer", MAX_SB, offsetof(corecfg_t, store_buffer)},
        {"prefetch_streams", MAX_STREAMS, offsetof(corecfg_t, streams)},
        {"prefetch_distance", MAX_PF_DIST, offsetof(corecfg_t, pf_distance)},
    };
    if (!strcmp(key, "core")) {
        char v[32] = "";
        sscanf(p, "%31s", v);
        if (!strcmp(v, "ooo")) m->core.ooo = 1;
        else if (!strcmp(v, "blocking")) m->core.ooo = 0;
        else bad(cf, "core: expected ooo or blocking, got '%s'", v);
        return;
    }
    for (size_t i = 0; i < sizeof figs / sizeof figs[0]; i++)
        if (!strcmp(key, figs[i].key)) {
            long v = -1;
            uint32_t min = !strncmp(key, "prefetch", 8) ? 0 : 1;
            if (sscanf(p, "%ld", &v) != 1 || v < (long)min || v > (long)figs[i].max)
                bad(cf, "%s: expected %u..%u", key, min, figs[i].max);
            else *(uint32_t *)((char *)&m->core + figs[i].off) = (uint32_t)v;
            return;
        }
}

/* The dataflow core's lines (topologies/core.py Core.config_lines; figures in
 * cycles, turned into ps once the clock is known: core_finish). */
#define VM_X_NAME(id, name) name,
static const char *const CLASS_NAMES[VM_X_CLASSES] = {VM_EXEC_CLASSES(VM_X_NAME)};
#undef VM_X_NAME

static int in_range(const char *p, long lo, long hi, long *v) {
    char extra[2];
    return sscanf(p, "%ld %1s", v, extra) == 1 && *v >= lo && *v <= hi;
}

static void parse_exec(model_t *m, cfg_t *cf, const char *key, const char *p) {
    corecfg_t *k = &m->core;
    if (!strcmp(key, "exec")) {
        char cls[32] = "";
        long lat, units, busy;
        if (sscanf(p, "%31s %ld %ld %ld", cls, &lat, &units, &busy) != 4) {
            bad(cf, "exec: expected CLASS LATENCY UNITS BUSY");
            return;
        }
        for (int c = 0; c < VM_X_CLASSES; c++)
            if (!strcmp(cls, CLASS_NAMES[c])) {
                if (lat < 1 || lat > 1000 || units < 1 || units > MAX_UNITS || busy < 1 || busy > 1000)
                    bad(cf, "exec %s: expected latency 1..1000, units 1..%d, busy 1..1000 cycles", cls, MAX_UNITS);
                k->lat_ps[c] = (uint64_t)lat;  /* cycles until core_finish */
                k->units[c] = (uint32_t)units;
                k->busy_cycles[c] = (uint64_t)busy;
                k->exec_seen |= 1u << c;
                return;
            }
        bad(cf, "exec: unknown class '%s' (alu mul div32 div64 fpadd fpmul fpdiv vec load store branch serial)", cls);
        return;
    }
    long v = 0;
    if (!strcmp(key, "width")) {
        if (!in_range(p, 1, MAX_WIDTH, &v)) bad(cf, "width: expected 1..%d", MAX_WIDTH);
        k->width = (uint32_t)v;
        k->dataflow = 1;
    } else if (!strcmp(key, "mispredict")) {
        if (!in_range(p, 1, 100, &v)) bad(cf, "mispredict: expected 1..100 cycles");
        k->mispredict_cycles = (uint32_t)v;
    } else if (!strcmp(key, "load_index_extra")) {
        if (!in_range(p, 0, 10, &v)) bad(cf, "load_index_extra: expected 0..10 cycles");
        k->index_extra_cycles = (uint32_t)v;
    } else if (!strcmp(key, "insn_ps")) {
        if (!in_range(p, 1, 1000000, &v)) bad(cf, "insn_ps: expected 1..1000000");
        k->insn_ps = (uint64_t)v;
    } else if (!strcmp(key, "btb") || !strcmp(key, "ras")) {
        long hi = key[0] == 'b' ? 65536 : MAX_RAS;
        if (!in_range(p, 1, hi, &v) || (key[0] == 'b' && !is_pow2((uint64_t)v)))
            bad(cf, "%s: expected %s1..%ld", key, key[0] == 'b' ? "a power of two " : "", hi);
        *(key[0] == 'b' ? &k->btb : &k->ras) = (uint32_t)v;
    } else if (!strcmp(key, "predictor")) {
        char kind[32] = "";
        long entries, hist;
        if (sscanf(p, "%31s %ld %ld", kind, &entries, &hist) != 3 ||
            (strcmp(kind, "gshare") && strcmp(kind, "tournament")) || entries < 16 || entries > (1l << 20) ||
            !is_pow2((uint64_t)entries) || hist < 0 || hist > 30)
            bad(cf, "predictor: expected gshare|tournament ENTRIES (a power of two 16..1048576) HISTORY (0..30)");
        k->predictor = !strcmp(kind, "tournament") ? BP_TOURNAMENT : BP_GSHARE;
        k->bp_entries = (uint32_t)entries;
        k->bp_history = (uint32_t)hist;
    }
}

static int is_exec_key(const char *key) {
    static const char *keys[] = {"width", "exec", "mispredict", "load_index_extra", "insn_ps", "btb", "ras",
                                 "predictor"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!strcmp(key, keys[i])) return 1;
    return 0;
}

/* With a width, every class must have its figures; then cycles become ps. */
static void core_finish(model_t *m, cfg_t *cf) {
    corecfg_t *k = &m->core;
    if (!k->dataflow) return;
    for (int c = 0; c < VM_X_CLASSES; c++)
        if (!(k->exec_seen & (1u << c))) {
            bad(cf, "exec %s: missing (a core with a width needs every class's figures)", CLASS_NAMES[c]);
            return;
        }
    if (!k->mispredict_cycles || !k->bp_entries || !k->btb || !k->ras) {
        bad(cf, "width: a core with a width needs mispredict, predictor, btb and ras lines");
        return;
    }
    for (int c = 0; c < VM_X_CLASSES; c++) {
        k->lat_ps[c] *= m->cycle_ps;
        k->busy_ps[c] = k->busy_cycles[c] * m->cycle_ps;
    }
    k->mispredict_ps = (uint64_t)k->mispredict_cycles * m->cycle_ps;
    k->cycle_inv = UINT64_MAX / m->cycle_ps + 1;
    k->index_extra_ps = (uint64_t)k->index_extra_cycles * m->cycle_ps;
    if (!k->insn_ps) k->insn_ps = m->cycle_ps / k->width ? m->cycle_ps / k->width : 1;
    if (k->insn_ps * k->width > m->cycle_ps) bad(cf, "insn_ps: expected at most cycle_ps / width (the core's best case)");
}

static int is_core_key(const char *key) {
    static const char *keys[] = {"core", "fill_buffers", "l2_queue", "rob", "store_buffer", "prefetch_streams",
                                 "prefetch_distance"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!strcmp(key, keys[i])) return 1;
    return 0;
}

/* A translation line (model_tlb.c reads it). */
static int tlb_key(model_t *m, cfg_t *cf, const char *key, const char *p) {
    char why[256] = "";
    if (!model_tlb_parse(m, key, p, why, sizeof why)) return 0;
    if (why[0]) bad(cf, "%s", why);
    return 1;
}

/* One config line: key, then p at its values. */
static void parse_line(model_t *m, cfg_t *cf, const char *key, const char *p) {
    if (!strcmp(key, "vmlab-timing")) {
        int v = 0;
        if (sscanf(p, "%d", &v) != 1 || v != 1) bad(cf, "config format version: expected 1");
    } else if (!strcmp(key, "mode")) parse_mode(m, cf, p);
    else if (!strcmp(key, "out")) sscanf(p, "%4095s", m->out);
    else if (!strcmp(key, "symbols")) sscanf(p, "%4095s", cf->sympath);
    else if (!strcmp(key, "kernel_base")) sscanf(p, "%" SCNx64, &m->kernel_base);
    else if (!strcmp(key, "cpus")) parse_cpus(m, cf, p);
    else if (!strcmp(key, "nodes")) {
        if (sscanf(p, "%d", &m->nnodes) != 1 || m->nnodes < 1 || m->nnodes > MAX_NODES)
            bad(cf, "nodes: expected 1..%d", MAX_NODES);
    } else if (!strcmp(key, "clock_ghz")) sscanf(p, "%lf", &m->clock_ghz);
    else if (!strcmp(key, "cycle_ps")) {
        /* the engine's own cycle (topologies: Topology.cycle_ps), so engine and model agree */
        if (sscanf(p, "%" SCNu64, &m->cycle_ps) != 1 || !m->cycle_ps) bad(cf, "cycle_ps: expected a positive integer");
    }
    else if (!strcmp(key, "line_bytes")) sscanf(p, "%u", &cf->line_bytes);
    else if (!strcmp(key, "l1d") || !strcmp(key, "l2") || !strcmp(key, "l1i") || !strcmp(key, "l3")) {
        uint32_t *g = key[1] == '2' ? m->l2_geom : key[1] == '3' ? m->l3_geom : key[2] == 'i' ? m->l1i_geom : m->l1_geom;
        if (sscanf(p, "%u %u %u", &g[0], &g[1], &g[2]) != 3) bad(cf, "%s: expected bytes ways latency_cycles", key);
    } else if (!strcmp(key, "l3_c2c_ns")) sscanf(p, "%lf", &cf->sock_c2c_ns);
    else if (!strcmp(key, "local_ns")) sscanf(p, "%lf", &cf->local_ns);
    else if (!strcmp(key, "hop_ns")) sscanf(p, "%lf", &cf->hop_ns);
    else if (!strcmp(key, "mem_bw_gbps")) sscanf(p, "%lf", &cf->mem_bw);
    else if (!strcmp(key, "link_bw_gbps")) sscanf(p, "%lf", &cf->link_bw);
    else if (!strcmp(key, "cpu_node")) parse_cpu_node(m, cf, p);
    else if (!strcmp(key, "hops")) parse_hops(m, cf, p);
    else if (!strcmp(key, "links")) parse_links(m, cf, p);
    else if (!strcmp(key, "link")) parse_link(m, cf, p);
    else if (!strcmp(key, "link_fig")) parse_link_fig(m, cf, p);
    else if (!strcmp(key, "node_bw")) parse_node_bw(m, cf, p);
    else if (!strcmp(key, "route")) parse_route(m, cf, p);
    else if (!strcmp(key, "range")) parse_range(cf, p);
    else if (is_core_key(key)) parse_core(m, cf, key, p);
    else if (is_exec_key(key)) parse_exec(m, cf, key, p);
    else if (tlb_key(m, cf, key, p)) {
    }
    else if (!strncmp(key, "plugin.", 7) || !strcmp(key, "isa")) {
        /* plugin.*: the QEMU glue's own settings (plugin.c); isa: informational */
    } else bad(cf, "unknown key '%s'", key);
}

/* Reads lines until the end or the first bad one (cf->ok = 0). */
static void read_lines(model_t *m, cfg_t *cf, FILE *f) {
    char line[8192], key[64];
    while (cf->ok && fgets(line, sizeof line, f)) {
        cf->lineno++;
        int n = 0;
        if (sscanf(line, "%63s%n", key, &n) != 1 || key[0] == '#') continue;
        parse_line(m, cf, key, line + n);
    }
}

static int need(int have, const char *key, cfg_t *cf) {
    if (!have) model_seterr(cf->err, cf->errlen, "%s: missing '%s'", cf->path, key);
    return have;
}

/* Every required key is there, every CPU has a node, every range is whole granules. */
static int config_complete(const model_t *m, cfg_t *cf) {
    if (!(need(m->ncpus > 0, "cpus", cf) && need(m->nnodes > 0, "nodes", cf) &&
          need(m->clock_ghz > 0, "clock_ghz", cf) &&
          need(cf->line_bytes > 0 && is_pow2(cf->line_bytes), "line_bytes (a power of two)", cf) &&
          need(cf->local_ns > 0 && cf->hop_ns >= 0, "local_ns and hop_ns", cf) &&
          need(cf->mem_bw > 0 && cf->link_bw > 0, "mem_bw_gbps and link_bw_gbps", cf) &&
          need(cf->have_hops == m->nnodes, "hops (one row per node)", cf) && need(cf->nranges > 0, "range", cf) &&
          need(m->out[0], "out", cf)))
        return 0;
    for (int c = 0; c < m->ncpus; c++)
        if (cf->cpu_node[c] < 0) {
            model_seterr(cf->err, cf->errlen, "%s: CPU %d has no node (cpu_node)", cf->path, c);
            return 0;
        }
    uint64_t gmask = (1ull << GRAN_SHIFT) - 1;
    for (int i = 0; i < cf->nranges; i++) {
        range_t *r = &cf->ranges[i];
        if ((r->start | r->end | r->off) & gmask || r->end <= r->start || r->node < 0 || r->node >= m->nnodes) {
            model_seterr(cf->err, cf->errlen, "%s: range %d: expected 2 MiB-aligned start < end and a node below %d",
                         cf->path, i, m->nnodes);
            return 0;
        }
    }
    /* A node with memory and no CPUs is a CPU-less memory node (a CXL
     * expander): priced at the DRAM's figures it would be a silent error. */
    for (int i = 0; i < cf->nranges; i++) {
        int nd = cf->ranges[i].node, cpus = 0;
        for (int c = 0; c < m->ncpus; c++) cpus += cf->cpu_node[c] == nd;
        if (!cpus && cf->node_bw[nd] < 0) {
            model_seterr(cf->err, cf->errlen, "%s: node %d has memory and no CPUs but no node_bw line: a CPU-less "
                         "memory node needs its own figures (timing.memory_lines)", cf->path, nd);
            return 0;
        }
    }
    return 1;
}

int model_read_config(model_t *m, cfg_t *cf, const char *path, char *err, size_t errlen) {
    *cf = (cfg_t){.path = path, .err = err, .errlen = errlen, .ok = 1, .local_ns = -1, .hop_ns = -1,
                  .mem_bw = -1, .link_bw = -1, .route_cap = 1024};
    for (int i = 0; i < MAX_NODES; i++) cf->node_bw[i] = -1;
    FILE *f = fopen(path, "r");
    if (!f) {
        model_seterr(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    m->route_links = malloc(cf->route_cap * sizeof(int));
    /* no core lines: the blocking core of model version 1, with room for one miss */
    m->core = (corecfg_t){.ooo = 0, .fill_buffers = 1, .l2_queue = 1, .rob = 1, .store_buffer = 1};
    m->kernel_base = UINT64_MAX;  /* no kernel_base line yet: model_sym_init sets the default */
    read_lines(m, cf, f);
    fclose(f);
    if (cf->ok && !m->cycle_ps && m->clock_ghz > 0) m->cycle_ps = (uint64_t)(1000.0 / m->clock_ghz + 0.5);
    if (cf->ok) core_finish(m, cf);
    return cf->ok && config_complete(m, cf) ? 0 : -1;
}
