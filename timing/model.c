/* vmlab memory-system timing model; see model.h for what it prices and
 * timing/config.py for the config it reads.
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
 */
#include "model.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CPUS 62           /* directory entry: 62 sharer bits + exclusive bit */
#define MAX_NODES 64
#define MAX_HOPS 16
#define HIST_BINS 128         /* miss-latency histogram: 8 ns bins, last bin open */
#define HIST_NS 8
#define GRAN_SHIFT 21         /* address map granule: 2 MiB */
#define WINDOW_MISSES 4096    /* queueing utilisation window, in L2 misses */
#define DIR_EXCL (1ull << 63)

enum { S_INV = 0, S_S = 1, S_E = 2, S_M = 3 };

typedef struct {
    uint64_t *t;       /* sets * ways entries, MRU first: (line << 2) | state, 0 = empty */
    uint32_t mask, ways;
} cache_t;

typedef struct {
    uint64_t insns, time_ps, stall_ps, loads, stores, atomics, l1_hits, l2_hits, misses, remote,
        c2c, upgrades, invals, writebacks, lock_xfers, lock_ps, io, mem_ps;
} counters_t;

typedef struct {
    uint64_t id, instance, begin_ps, end_ps;
    counters_t d;
} phase_t;

typedef struct {
    cache_t l1, l2;
    int node;
    counters_t c;
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
    uint8_t hops[MAX_NODES][MAX_NODES];
    /* directed links and routes: route (a,b) = links[route_off .. +route_len] */
    int *link_src, *link_dst;
    uint32_t route_off[MAX_NODES][MAX_NODES];
    uint8_t route_len[MAX_NODES][MAX_NODES];
    int *route_links;
    size_t nroute_links;
    /* queueing: resources 0..nnodes-1 are memory controllers, then links */
    uint64_t *busy_ps, *busy_total_ps, *qdelay_ps, mem_service_ps, *link_req_ps, *link_data_ps;
    uint64_t window_misses, windows;
    /* address map: 2 MiB granules of guest-physical space */
    int16_t *gran_node;
    uint64_t *gran_off;
    size_t ngran;
    uint64_t ram_bytes;
    uint64_t *dir;
    size_t dir_lines;
    uint32_t l1_geom[3], l2_geom[3];
    cpu_t *cpu;
    /* results */
    uint64_t matrix_n[MAX_NODES][MAX_NODES], matrix_ps[MAX_NODES][MAX_NODES];
    uint64_t hop_n[MAX_HOPS], hop_ps[MAX_HOPS], hist[MAX_HOPS][HIST_BINS];
    uint64_t c2c_hops[MAX_HOPS], lock_n[MAX_HOPS], lock_ps[MAX_HOPS];
    uint64_t unmapped;
    kindstat_t kind[VM_KINDS];
    /* symbols */
    uint64_t kernel_base;
    uint64_t *sym_addr;
    char **sym_name;
    uint32_t nsym;
    symstat_t *sym;
};

/* --- small helpers ---------------------------------------------------------- */
static void seterr(char *err, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (err && n) vsnprintf(err, n, fmt, ap);
    va_end(ap);
}

static int is_pow2(uint64_t x) { return x && !(x & (x - 1)); }

static int cache_init(cache_t *c, uint32_t bytes, uint32_t ways, uint32_t line) {
    if (!ways || !line || bytes % (ways * line)) return -1;
    uint32_t sets = bytes / (ways * line);
    if (!is_pow2(sets)) return -1;
    c->mask = sets - 1;
    c->ways = ways;
    c->t = calloc((size_t)sets * ways, sizeof(uint64_t));
    return c->t ? 0 : -1;
}

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

/* --- config ------------------------------------------------------------------- */
typedef struct {
    uint64_t addr;
    char *name;
} symtmp_t;

static int cmp_sym(const void *a, const void *b) {
    const symtmp_t *x = a, *y = b;
    if (x->addr != y->addr) return x->addr < y->addr ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int load_symbols(model_t *m, const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "r");
    if (!f) {
        seterr(err, errlen, "%s: cannot open the kernel's System.map: %s", path, strerror(errno));
        return -1;
    }
    size_t cap = 4096, n = 0;
    symtmp_t *v = malloc(cap * sizeof *v);
    char line[512], name[256], type;
    uint64_t addr;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "%" SCNx64 " %c %255s", &addr, &type, name) != 3) continue;
        if (type != 'T' && type != 't' && type != 'W' && type != 'w') continue;  /* text only */
        if (addr < m->kernel_base) continue;
        if (n == cap) v = realloc(v, (cap *= 2) * sizeof *v);
        v[n].addr = addr;
        v[n].name = strdup(name);
        n++;
    }
    fclose(f);
    qsort(v, n, sizeof *v, cmp_sym);
    m->nsym = (uint32_t)n + VM_SYM_FIRST;
    m->sym_addr = calloc(m->nsym, sizeof(uint64_t));
    m->sym_name = calloc(m->nsym, sizeof(char *));
    m->sym_name[VM_SYM_BOOT] = strdup("[boot]");
    m->sym_name[VM_SYM_USER] = strdup("[user]");
    m->sym_name[VM_SYM_KERNEL_OTHER] = strdup("[kernel, no symbol]");
    for (size_t i = 0; i < n; i++) {
        m->sym_addr[VM_SYM_FIRST + i] = v[i].addr;
        m->sym_name[VM_SYM_FIRST + i] = v[i].name;
    }
    free(v);
    return 0;
}

uint32_t vm_symbol(const model_t *m, uint64_t vaddr) {
    if (m->nsym <= VM_SYM_FIRST || vaddr < m->sym_addr[VM_SYM_FIRST]) return VM_SYM_KERNEL_OTHER;
    uint32_t lo = VM_SYM_FIRST, hi = m->nsym - 1;
    while (lo < hi) {  /* last symbol at or below vaddr */
        uint32_t mid = lo + (hi - lo + 1) / 2;
        if (m->sym_addr[mid] <= vaddr) lo = mid; else hi = mid - 1;
    }
    /* past the last text symbol by more than a page: not kernel text we know */
    if (lo == m->nsym - 1 && vaddr - m->sym_addr[lo] > 4096) return VM_SYM_KERNEL_OTHER;
    return lo;
}

static int need(int have, const char *key, const char *path, char *err, size_t errlen) {
    if (!have) seterr(err, errlen, "%s: missing '%s'", path, key);
    return have;
}

model_t *vm_model_new(const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "r");
    if (!f) {
        seterr(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    model_t *m = calloc(1, sizeof *m);
    char line[8192], key[64], sympath[4096] = "";
    double local_ns = -1, hop_ns = -1, mem_bw = -1, link_bw = -1;
    uint32_t line_bytes = 0;
    int have_hops = 0, have_cpu = 0, lineno = 0, ok = 1;
    int *cpu_node = NULL;
    struct { uint64_t start, end, off; int node; } ranges[2 * MAX_NODES + 8];
    int nranges = 0;
    size_t route_cap = 1024;
    m->route_links = malloc(route_cap * sizeof(int));
    m->kernel_base = UINT64_MAX;
    while (ok && fgets(line, sizeof line, f)) {
        lineno++;
        char *p = line;
        int n = 0;
        if (sscanf(p, "%63s%n", key, &n) != 1 || key[0] == '#') continue;
        p += n;
#define BAD(...) do { char _b[512]; snprintf(_b, sizeof _b, __VA_ARGS__); \
        seterr(err, errlen, "%s:%d: %s", path, lineno, _b); ok = 0; } while (0)
        if (!strcmp(key, "vmlab-timing")) {
            int v = 0;
            if (sscanf(p, "%d", &v) != 1 || v != 1) BAD("config format version: expected 1");
        } else if (!strcmp(key, "mode")) {
            char mode[32] = "";
            sscanf(p, "%31s", mode);
            if (!strcmp(mode, "detailed")) m->detailed = 1;
            else if (!strcmp(mode, "fast")) m->detailed = 0;
            else BAD("mode: expected detailed or fast, got '%s'", mode);
        } else if (!strcmp(key, "out")) {
            sscanf(p, "%4095s", m->out);
        } else if (!strcmp(key, "symbols")) {
            sscanf(p, "%4095s", sympath);
        } else if (!strcmp(key, "kernel_base")) {
            sscanf(p, "%" SCNx64, &m->kernel_base);
        } else if (!strcmp(key, "cpus")) {
            if (sscanf(p, "%d", &m->ncpus) != 1 || m->ncpus < 1 || m->ncpus > MAX_CPUS)
                BAD("cpus: expected 1..%d", MAX_CPUS);
            else {
                cpu_node = malloc(m->ncpus * sizeof(int));
                for (int i = 0; i < m->ncpus; i++) cpu_node[i] = -1;
            }
        } else if (!strcmp(key, "nodes")) {
            if (sscanf(p, "%d", &m->nnodes) != 1 || m->nnodes < 1 || m->nnodes > MAX_NODES)
                BAD("nodes: expected 1..%d", MAX_NODES);
        } else if (!strcmp(key, "clock_ghz")) {
            sscanf(p, "%lf", &m->clock_ghz);
        } else if (!strcmp(key, "line_bytes")) {
            sscanf(p, "%u", &line_bytes);
        } else if (!strcmp(key, "l1d") || !strcmp(key, "l2")) {
            uint32_t *g = key[1] == '1' ? m->l1_geom : m->l2_geom;
            if (sscanf(p, "%u %u %u", &g[0], &g[1], &g[2]) != 3) BAD("%s: expected bytes ways latency_cycles", key);
        } else if (!strcmp(key, "local_ns")) {
            sscanf(p, "%lf", &local_ns);
        } else if (!strcmp(key, "hop_ns")) {
            sscanf(p, "%lf", &hop_ns);
        } else if (!strcmp(key, "mem_bw_gbps")) {
            sscanf(p, "%lf", &mem_bw);
        } else if (!strcmp(key, "link_bw_gbps")) {
            sscanf(p, "%lf", &link_bw);
        } else if (!strcmp(key, "cpu_node")) {
            int c, nd;
            if (!cpu_node || sscanf(p, "%d %d", &c, &nd) != 2 || c < 0 || c >= m->ncpus || nd < 0 ||
                nd >= m->nnodes)
                BAD("cpu_node: expected CPU below 'cpus' and node below 'nodes' (after both)");
            else cpu_node[c] = nd, have_cpu++;
        } else if (!strcmp(key, "hops")) {
            int i, k = 0, h, nn;
            if (sscanf(p, "%d%n", &i, &nn) != 1 || i < 0 || i >= m->nnodes) { BAD("hops: bad row"); continue; }
            p += nn;
            while (k < m->nnodes && sscanf(p, "%d%n", &h, &nn) == 1) {
                if (h < 0 || h >= MAX_HOPS) { BAD("hops: expected 0..%d", MAX_HOPS - 1); break; }
                m->hops[i][k++] = (uint8_t)h;
                p += nn;
            }
            if (ok && k != m->nnodes) BAD("hops %d: expected %d values", i, m->nnodes);
            have_hops++;
        } else if (!strcmp(key, "links")) {
            if (sscanf(p, "%d", &m->nlinks) != 1 || m->nlinks < 0) BAD("links: expected a count");
            m->link_src = calloc(m->nlinks + 1, sizeof(int));
            m->link_dst = calloc(m->nlinks + 1, sizeof(int));
        } else if (!strcmp(key, "link")) {
            int id, a, b;
            if (!m->link_src || sscanf(p, "%d %d %d", &id, &a, &b) != 3 || id < 0 || id >= m->nlinks)
                BAD("link: expected id src dst after 'links'");
            else m->link_src[id] = a, m->link_dst[id] = b;
        } else if (!strcmp(key, "route")) {
            int a, b, l, nn;
            if (sscanf(p, "%d %d%n", &a, &b, &nn) != 2 || a < 0 || b < 0 || a >= m->nnodes || b >= m->nnodes) {
                BAD("route: expected src dst links...");
                continue;
            }
            p += nn;
            m->route_off[a][b] = (uint32_t)m->nroute_links;
            int len = 0;
            while (sscanf(p, "%d%n", &l, &nn) == 1) {
                if (l < 0 || l >= m->nlinks) { BAD("route %d %d: link %d unknown", a, b, l); break; }
                if (m->nroute_links == route_cap) m->route_links = realloc(m->route_links, (route_cap *= 2) * sizeof(int));
                m->route_links[m->nroute_links++] = l;
                len++;
                p += nn;
            }
            m->route_len[a][b] = (uint8_t)len;
        } else if (!strcmp(key, "range")) {
            if (nranges == (int)(sizeof ranges / sizeof ranges[0])) { BAD("range: too many"); continue; }
            if (sscanf(p, "%" SCNx64 " %" SCNx64 " %d %" SCNx64, &ranges[nranges].start, &ranges[nranges].end,
                       &ranges[nranges].node, &ranges[nranges].off) != 4)
                BAD("range: expected start end node ram_offset (hex, node decimal)");
            else nranges++;
        } else if (!strncmp(key, "plugin.", 7) || !strcmp(key, "isa")) {
            /* plugin.*: the QEMU glue's own settings (plugin.c); isa: informational */
        } else {
            BAD("unknown key '%s'", key);
        }
#undef BAD
    }
    fclose(f);
    if (ok) ok = need(m->ncpus > 0, "cpus", path, err, errlen) && need(m->nnodes > 0, "nodes", path, err, errlen) &&
                 need(m->clock_ghz > 0, "clock_ghz", path, err, errlen) &&
                 need(line_bytes > 0 && is_pow2(line_bytes), "line_bytes (a power of two)", path, err, errlen) &&
                 need(local_ns > 0 && hop_ns >= 0, "local_ns and hop_ns", path, err, errlen) &&
                 need(mem_bw > 0 && link_bw > 0, "mem_bw_gbps and link_bw_gbps", path, err, errlen) &&
                 need(have_hops == m->nnodes, "hops (one row per node)", path, err, errlen) &&
                 need(nranges > 0, "range", path, err, errlen) && need(m->out[0], "out", path, err, errlen);
    for (int c = 0; ok && c < m->ncpus; c++)
        if (cpu_node[c] < 0) {
            seterr(err, errlen, "%s: CPU %d has no node (cpu_node)", path, c);
            ok = 0;
        }
    for (int i = 0; ok && i < nranges; i++) {
        uint64_t gmask = (1ull << GRAN_SHIFT) - 1;
        if ((ranges[i].start | ranges[i].end | ranges[i].off) & gmask || ranges[i].end <= ranges[i].start ||
            ranges[i].node < 0 || ranges[i].node >= m->nnodes) {
            seterr(err, errlen, "%s: range %d: expected 2 MiB-aligned start < end and a node below %d", path, i,
                   m->nnodes);
            ok = 0;
        }
    }
    if (!ok) {
        free(cpu_node);
        vm_model_free(m);
        return NULL;
    }

    m->line_shift = (uint32_t)__builtin_ctz(line_bytes);
    m->cycle_ps = (uint64_t)(1000.0 / m->clock_ghz + 0.5);
    m->l2_ps = (uint64_t)m->l2_geom[2] * m->cycle_ps;
    if ((double)m->l2_ps >= local_ns * 1000.0) {
        seterr(err, errlen, "%s: L2 latency (%u cycles) must be below local_ns", path, m->l2_geom[2]);
        free(cpu_node);
        vm_model_free(m);
        return NULL;
    }
    m->ctrl_ps = (uint64_t)(local_ns * 1000.0 + 0.5) - m->l2_ps;
    m->half_hop_ps = (uint64_t)(hop_ns * 500.0 + 0.5);
    for (int a = 0; a < m->nnodes; a++)
        for (int b = 0; b < m->nnodes; b++)
            m->mem_ps[a][b] = (uint64_t)(local_ns * 1000.0 + 0.5) + m->hops[a][b] * 2 * m->half_hop_ps;

    /* address map */
    uint64_t max_end = 0;
    for (int i = 0; i < nranges; i++) {
        if (ranges[i].end > max_end) max_end = ranges[i].end;
        uint64_t top = ranges[i].off + (ranges[i].end - ranges[i].start);
        if (top > m->ram_bytes) m->ram_bytes = top;
    }
    m->ngran = max_end >> GRAN_SHIFT;
    m->gran_node = malloc(m->ngran * sizeof(int16_t));
    m->gran_off = calloc(m->ngran, sizeof(uint64_t));
    for (size_t g = 0; g < m->ngran; g++) m->gran_node[g] = -1;
    for (int i = 0; i < nranges; i++)
        for (uint64_t a = ranges[i].start; a < ranges[i].end; a += 1ull << GRAN_SHIFT) {
            m->gran_node[a >> GRAN_SHIFT] = (int16_t)ranges[i].node;
            m->gran_off[a >> GRAN_SHIFT] = ranges[i].off + (a - ranges[i].start);
        }
    m->dir_lines = m->ram_bytes >> m->line_shift;

    /* queueing resources */
    int nres = m->nnodes + m->nlinks;
    m->busy_ps = calloc(nres, sizeof(uint64_t));
    m->busy_total_ps = calloc(nres, sizeof(uint64_t));
    m->qdelay_ps = calloc(nres, sizeof(uint64_t));
    m->mem_service_ps = (uint64_t)(line_bytes / mem_bw * 1000.0 + 0.5);
    m->link_req_ps = calloc(1, sizeof(uint64_t));
    m->link_data_ps = calloc(1, sizeof(uint64_t));
    *m->link_req_ps = (uint64_t)(16 / link_bw * 1000.0 + 0.5);            /* header-only message */
    *m->link_data_ps = (uint64_t)((line_bytes + 16) / link_bw * 1000.0 + 0.5);

    m->cpu = calloc(m->ncpus, sizeof(cpu_t));
    for (int c = 0; c < m->ncpus; c++) {
        m->cpu[c].node = cpu_node[c];
        if (m->detailed && (cache_init(&m->cpu[c].l1, m->l1_geom[0], m->l1_geom[1], line_bytes) ||
                            cache_init(&m->cpu[c].l2, m->l2_geom[0], m->l2_geom[1], line_bytes))) {
            seterr(err, errlen, "%s: l1d/l2: size must be ways x line x a power-of-two number of sets", path);
            free(cpu_node);
            vm_model_free(m);
            return NULL;
        }
    }
    free(cpu_node);
    if (m->detailed) {
        /* Lazily backed by the OS: only lines the guest touches cost memory. */
        m->dir = calloc(m->dir_lines, sizeof(uint64_t));
        if (!m->dir) {
            seterr(err, errlen, "%s: cannot allocate the directory (%zu lines)", path, m->dir_lines);
            vm_model_free(m);
            return NULL;
        }
    }
    if (m->kernel_base == UINT64_MAX) m->kernel_base = 0xffff800000000000ull;
    if (sympath[0] && load_symbols(m, sympath, err, errlen)) {
        vm_model_free(m);
        return NULL;
    }
    if (!m->sym_name) {
        m->nsym = VM_SYM_FIRST;
        m->sym_name = calloc(m->nsym, sizeof(char *));
        m->sym_addr = calloc(m->nsym, sizeof(uint64_t));
        m->sym_name[0] = strdup("[boot]");
        m->sym_name[1] = strdup("[user]");
        m->sym_name[2] = strdup("[kernel, no symbol]");
    }
    m->sym = calloc(m->nsym, sizeof(symstat_t));
    return m;
}

void vm_model_free(model_t *m) {
    if (!m) return;
    if (m->cpu)
        for (int c = 0; c < m->ncpus; c++) {
            free(m->cpu[c].l1.t);
            free(m->cpu[c].l2.t);
            free(m->cpu[c].ph);
        }
    free(m->cpu);
    free(m->dir);
    free(m->gran_node);
    free(m->gran_off);
    free(m->busy_ps);
    free(m->busy_total_ps);
    free(m->qdelay_ps);
    free(m->link_req_ps);
    free(m->link_data_ps);
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
uint64_t vm_cpu_time_ps(const model_t *m, int cpu) { return m->cpu[cpu].c.time_ps; }

size_t vm_state_bytes(const model_t *m) {
    size_t b = sizeof *m + m->ncpus * sizeof(cpu_t) + m->nsym * (sizeof(symstat_t) + 16);
    if (m->detailed)
        b += m->ncpus * ((size_t)(m->cpu[0].l1.mask + 1) * m->cpu[0].l1.ways +
                         (size_t)(m->cpu[0].l2.mask + 1) * m->cpu[0].l2.ways) * sizeof(uint64_t) +
             m->dir_lines * sizeof(uint64_t);
    return b;
}

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

/* --- coherence ----------------------------------------------------------------- */
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
    size_t g = pa >> GRAN_SHIFT;
    uint64_t idx = (m->gran_off[g] + (pa & ((1ull << GRAN_SHIFT) - 1))) >> m->line_shift;
    int home = m->gran_node[g];
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
    m->sym[sym].accesses++;
    m->kind[kind].accesses++;
    /* a lock operation's read claims the line; its write then hits in L1 */
    if (flags & VM_F_WRITE) p->c.stores++;
    else if (flags & VM_F_ATOMIC) p->c.atomics++;
    else p->c.loads++;

    /* L1: the hot path */
    int i = c_find(&p->l1, line);
    if (i >= 0) {
        uint64_t *s = c_set(&p->l1, line);
        int st = (int)(s[i] & 3);
        if (!excl || st >= S_E) {
            if (excl && st == S_E) {  /* silent E -> M */
                s[i] = (line << 2) | S_M;
                c_setstate(&p->l2, line, S_M);
            }
            if (i) c_touch(&p->l1, line, i);
            p->c.l1_hits++;
            return 0;
        }
    }
    /* L2 */
    uint64_t lat = 0;
    int j = c_find(&p->l2, line);
    int st2 = j >= 0 ? (int)(c_set(&p->l2, line)[j] & 3) : S_INV;
    if (j >= 0 && (!excl || st2 >= S_E)) {
        int st = excl ? S_M : st2;
        if (j) c_touch(&p->l2, line, j);
        if (st != st2) c_setstate(&p->l2, line, st);
        c_remove(&p->l1, line);
        c_insert(&p->l1, line, st);
        p->c.l2_hits++;
        lat = m->l2_ps;
        p->c.stall_ps += lat;
        p->c.time_ps += lat;
        m->sym[sym].stall_ps += lat;
        m->kind[kind].stall_ps += lat;
        return lat;
    }

    /* Miss (or an upgrade): a transaction at the home node's directory. */
    int home = m->gran_node[g];
    uint64_t idx = (m->gran_off[g] + (pa & ((1ull << GRAN_SHIFT) - 1))) >> m->line_shift;
    uint64_t e = m->dir[idx];
    uint64_t others = e & ~DIR_EXCL & ~(1ull << c);
    int me = p->node, hops;
    if ((e & DIR_EXCL) && others) {
        /* another cache owns it (E or M): cache-to-cache transfer via the home */
        int o = __builtin_ctzll(others), on = m->cpu[o].node;
        lat = m->l2_ps + m->ctrl_ps + m->qdelay_ps[home] + m->l2_ps + leg(m, me, home, 0) + leg(m, home, on, 0) +
              leg(m, on, me, 1);
        m->busy_ps[home] += m->mem_service_ps;  /* the directory lookup */
        cpu_t *op = &m->cpu[o];
        int ost = S_INV;
        int oi = c_find(&op->l2, line);
        if (oi >= 0) ost = (int)(c_set(&op->l2, line)[oi] & 3);
        if (excl) {
            drop_line(op, line);
            e = 0;
        } else {
            c_setstate(&op->l2, line, S_S);
            c_setstate(&op->l1, line, S_S);
            e = others;
            if (ost == S_M) {  /* the dirty line is written back to the home as it is shared */
                op->c.writebacks++;
                m->busy_ps[home] += m->mem_service_ps;
            }
        }
        p->c.c2c++;
        hops = m->hops[me][on];
        m->c2c_hops[hops]++;
    } else if (excl && others) {
        /* shared elsewhere: invalidate every other sharer (acks go to the requester) */
        uint64_t inv = 0;
        int far = m->hops[me][home];  /* binned by the farthest party the claim involves */
        for (uint64_t s = others; s; s &= s - 1) {
            int o = __builtin_ctzll(s), on = m->cpu[o].node;
            uint64_t t = m->hops[home][on] * m->half_hop_ps + m->hops[on][me] * m->half_hop_ps;
            if (t > inv) inv = t;
            if (m->hops[me][on] > far) far = m->hops[me][on];
            drop_line(&m->cpu[o], line);
            p->c.invals++;
        }
        uint64_t dir_path = m->l2_ps + m->ctrl_ps + m->qdelay_ps[home] + leg(m, me, home, 0) + inv;
        if (st2 == S_S) {
            lat = dir_path;  /* upgrade: we hold the data already */
            p->c.upgrades++;
        } else {
            uint64_t mem = m->mem_ps[me][home] + m->qdelay_ps[home] + leg(m, home, me, 1) -
                           m->hops[home][me] * m->half_hop_ps;
            lat = mem > dir_path ? mem : dir_path;
        }
        m->busy_ps[home] += m->mem_service_ps;
        e = 0;
        hops = far;
    } else if (st2 == S_S) {
        /* upgrade with no other sharer: a round trip to the directory */
        lat = m->l2_ps + m->ctrl_ps + m->qdelay_ps[home] + leg(m, me, home, 0) + leg(m, home, me, 0);
        m->busy_ps[home] += m->mem_service_ps;
        p->c.upgrades++;
        e = 0;
        hops = m->hops[me][home];
    } else {
        /* memory at the home node: the topology's load-to-use latency plus queueing */
        lat = m->mem_ps[me][home] + m->qdelay_ps[home];
        /* the request and reply legs add queueing; their hop latency is in mem_ps */
        lat += leg(m, me, home, 0) - m->hops[me][home] * m->half_hop_ps;
        lat += leg(m, home, me, 1) - m->hops[home][me] * m->half_hop_ps;
        m->busy_ps[home] += m->mem_service_ps;
        hops = m->hops[me][home];
        if (!excl && others) e = others;  /* shared: others keep S */
    }
    /* the requester's new state and the directory entry */
    int nst;
    if (excl) {
        nst = S_M;
        e = DIR_EXCL | (1ull << c);
    } else if (e & ~DIR_EXCL) {
        nst = S_S;
        e = (e & ~DIR_EXCL) | (1ull << c);
    } else {
        nst = S_E;
        e = DIR_EXCL | (1ull << c);
    }
    m->dir[idx] = e;
    if (j >= 0) {  /* upgrade in place */
        c_touch(&p->l2, line, j);
        c_setstate(&p->l2, line, nst);
        c_remove(&p->l1, line);
        c_insert(&p->l1, line, nst);
    } else {
        fill(m, c, line, nst);
    }
    count_miss(m, p, home, hops, lat, sym, kind);
    if (flags & VM_F_ATOMIC) {
        /* a lock operation that had to fetch or claim its line, binned by
         * the distance to where the line came from (owner or home) */
        p->c.lock_xfers++;
        p->c.lock_ps += lat;
        m->lock_n[hops]++;
        m->lock_ps[hops] += lat;
        m->sym[sym].lock_xfers++;
    }
    p->c.mem_ps += lat;
    p->c.stall_ps += lat;
    p->c.time_ps += lat;
    m->sym[sym].stall_ps += lat;
    m->kind[kind].stall_ps += lat;
    return lat;
}

void vm_io_access(model_t *m, int cpu) { m->cpu[cpu].c.io++; }

void vm_insns(model_t *m, int c, uint32_t n, int kind) {
    cpu_t *p = &m->cpu[c];
    p->c.insns += n;
    p->c.time_ps += (uint64_t)n * m->cycle_ps;  /* base CPI 1: instruction fetch modeled as L1I hits */
    p->kind_insns[kind] += n;
}

/* --- phases ----------------------------------------------------------------------- */
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
static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        if ((unsigned char)*s >= 0x20) fputc(*s, f);
    }
    fputc('"', f);
}

#define COUNTER_FIELDS(X) X(insns) X(time_ps) X(stall_ps) X(loads) X(stores) X(atomics) X(l1_hits) \
    X(l2_hits) X(misses) X(remote) X(c2c) X(upgrades) X(invals) X(writebacks) X(lock_xfers) X(lock_ps) X(io) X(mem_ps)

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

int vm_write_results(model_t *m, const char *path) {
    const char *out = path ? path : m->out;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.partial", out);
    FILE *f = fopen(tmp, "w");
    if (!f) return -1;
    fprintf(f, "{\"format\":1,\"mode\":\"%s\",\"cycle_ps\":%" PRIu64 ",\"l2_ps\":%" PRIu64 ",\"ctrl_ps\":%" PRIu64
               ",\"half_hop_ps\":%" PRIu64 ",\"state_bytes\":%zu,\"windows\":%" PRIu64 ",\"unmapped\":%" PRIu64 ",\n",
            m->detailed ? "detailed" : "fast", m->cycle_ps, m->l2_ps, m->ctrl_ps, m->half_hop_ps, vm_state_bytes(m),
            m->windows, m->unmapped);
    fprintf(f, "\"cpus\":[");
    for (int c = 0; c < m->ncpus; c++) {
        fprintf(f, "%s\n{\"cpu\":%d,\"node\":%d,", c ? "," : "", c, m->cpu[c].node);
        json_counters(f, &m->cpu[c].c);
        fputc('}', f);
    }
    static const char *kinds[VM_KINDS] = {"boot", "kernel", "user"};
    fprintf(f, "],\n\"kinds\":[");
    for (int k = 0; k < VM_KINDS; k++) {
        m->kind[k].insns = 0;
        for (int c = 0; c < m->ncpus; c++) m->kind[k].insns += m->cpu[c].kind_insns[k];
    }
    for (int k = 0; k < VM_KINDS; k++)
        fprintf(f, "%s{\"kind\":\"%s\",\"insns\":%" PRIu64 ",\"accesses\":%" PRIu64 ",\"misses\":%" PRIu64
                   ",\"remote\":%" PRIu64 ",\"stall_ps\":%" PRIu64 "}",
                k ? "," : "", kinds[k], m->kind[k].insns, m->kind[k].accesses, m->kind[k].misses, m->kind[k].remote,
                m->kind[k].stall_ps);
    fprintf(f, "],\n\"matrix\":[");
    int first = 1;
    for (int a = 0; a < m->nnodes; a++)
        for (int b = 0; b < m->nnodes; b++)
            if (m->matrix_n[a][b]) {
                fprintf(f, "%s[%d,%d,%" PRIu64 ",%" PRIu64 "]", first ? "" : ",", a, b, m->matrix_n[a][b],
                        m->matrix_ps[a][b]);
                first = 0;
            }
    fprintf(f, "],\n\"hops\":[");
    first = 1;
    for (int h = 0; h < MAX_HOPS; h++) {
        if (!m->hop_n[h] && !m->c2c_hops[h] && !m->lock_n[h]) continue;
        fprintf(f, "%s\n{\"hops\":%d,\"misses\":%" PRIu64 ",\"lat_ps\":%" PRIu64 ",\"c2c\":%" PRIu64
                   ",\"lock_xfers\":%" PRIu64 ",\"lock_ps\":%" PRIu64 ",\"hist\":[",
                first ? "" : ",", h, m->hop_n[h], m->hop_ps[h], m->c2c_hops[h], m->lock_n[h], m->lock_ps[h]);
        int f2 = 1;
        for (int b = 0; b < HIST_BINS; b++)
            if (m->hist[h][b]) {
                fprintf(f, "%s[%d,%" PRIu64 "]", f2 ? "" : ",", b * HIST_NS, m->hist[h][b]);
                f2 = 0;
            }
        fprintf(f, "]}");
        first = 0;
    }
    fprintf(f, "],\n\"resources\":[");
    for (int r = 0; r < m->nnodes + m->nlinks; r++) {
        if (r < m->nnodes)
            fprintf(f, "%s[\"mem\",%d,%d,%" PRIu64 "]", r ? "," : "", r, r, m->busy_total_ps[r] + m->busy_ps[r]);
        else
            fprintf(f, ",[\"link\",%d,%d,%" PRIu64 "]", m->link_src[r - m->nnodes], m->link_dst[r - m->nnodes],
                    m->busy_total_ps[r] + m->busy_ps[r]);
    }
    /* symbols: every one with a lock transfer, and the top 300 by stall */
    symord_t *ord = malloc(m->nsym * sizeof *ord);
    for (uint32_t i = 0; i < m->nsym; i++) ord[i].stall = m->sym[i].stall_ps, ord[i].i = i;
    qsort(ord, m->nsym, sizeof *ord, cmp_symord);
    fprintf(f, "],\n\"symbols\":[");
    first = 1;
    for (uint32_t k = 0; k < m->nsym; k++) {
        symstat_t *s = &m->sym[ord[k].i];
        if (!s->accesses || (k >= 300 && !s->lock_xfers)) continue;
        fprintf(f, "%s\n[", first ? "" : ",");
        json_str(f, m->sym_name[ord[k].i]);
        fprintf(f, ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 "]", s->accesses, s->misses, s->remote,
                s->stall_ps, s->lock_xfers);
        first = 0;
    }
    free(ord);
    fprintf(f, "],\n\"phases\":[");
    first = 1;
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
    fprintf(f, "]}\n");
    int rc = ferror(f);
    rc |= fclose(f);
    if (!rc) rc = rename(tmp, out);
    return rc ? -1 : 0;
}
