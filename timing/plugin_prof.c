/* vmlab timing plugin: the profile on the guest clock (see plugin_prof.h).
 *
 * Per vCPU, a table of (phase, symbol) -> columns, and a running total of
 * what the columns hold (`acct`). Wherever the engine's clock is read, the
 * clock's advance since the last read is set against the columns' advance:
 * after a wake from HLT the difference is the vCPU's idle time, elsewhere
 * it is drift (what the columns failed to explain; expected 0). The kernel
 * call paths are folded stacks, root first, weighted by the vCPU time
 * since the previous sample.
 */
#include "plugin_prof.h"

#include <errno.h>
#include <glib.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <qemu-plugin.h>

#define MAX_DEPTH 48
#define STACK_READ 4096          /* bytes of the kernel stack read per sample */
#define THREAD_SIZE 16384        /* x86-64 kernel stacks: aligned 16 KiB */

typedef struct {
    uint64_t insns, insn_ps, core_ps, mem_ps, lock_ps, fetch_ps, pause_ps, pauses;
} pstat_t;

typedef struct {
    uint64_t ps, samples;
} pstack_t;

#define SCACHE 1024              /* per vCPU: recent (phase, symbol) rows, direct-mapped before the hash */

typedef struct {
    uint64_t key;
    pstat_t *s;
} scache_t;

typedef struct {
    GHashTable *tab;             /* (phase << 32 | sym) -> pstat_t */
    scache_t cache[SCACHE];
    GHashTable *stacks;          /* "phase;frame;...;leaf" -> pstack_t */
    pstat_t *cur, *prev;
    uint32_t cur_sym, cur_phase, due_sym;  /* due_sym: where a kernel sample came due */
    int started, halted, sample_due, user;
    uint64_t start_ps, acct, base_clock, base_acct, idle_ps, drift_ps, insns;
    uint64_t last_sample_busy, next_sample_busy, samples, sample_fail;  /* busy: acct less idle */
} pcpu_t;

typedef struct {
    uint64_t start, end;
    char *name;
    uint32_t dso;
} usym_t;

typedef struct {
    uint64_t id, instance;
} pphase_t;

static model_t *M;
static int on, ncpus;
static char out_path[4096];
static pcpu_t *cpus;
static usym_t *usyms;
static size_t nusyms;
static char **dsos;
static size_t ndsos;
static uint32_t user_base;       /* profile ids at and above it: user symbols */
static uint64_t pause_extra, sample_ps, kbase;
static pphase_t *phases;         /* index 0: outside every phase */
static size_t nphases, cap_phases;
static volatile uint32_t cur_phase;
static GMutex lock;              /* phases, the call-site cache */
static GHashTable *callsites;    /* return address -> verified (1) or not (2) */

int prof_on(void) { return on; }

static void record_sample(pcpu_t *p, const uint32_t *frames, int depth);
static const char *sym_name(uint32_t sym, const char **dso);

static int cmp_usym(const void *a, const void *b) {
    const usym_t *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

static uint32_t dso_id(const char *name) {
    for (size_t i = 0; i < ndsos; i++)
        if (!strcmp(dsos[i], name)) return (uint32_t)i;
    dsos = realloc(dsos, (ndsos + 1) * sizeof *dsos);
    dsos[ndsos] = strdup(name);
    return (uint32_t)ndsos++;
}

static int load_user_symbols(const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open the programs' symbols: %s", path, strerror(errno));
        return -1;
    }
    size_t cap = 1024;
    usyms = malloc(cap * sizeof *usyms);
    char line[600], name[256], dso[256];
    uint64_t s, e;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || sscanf(line, "%" SCNx64 " %" SCNx64 " %255s %255s", &s, &e, name, dso) != 4) continue;
        if (e <= s) continue;
        if (nusyms == cap) usyms = realloc(usyms, (cap *= 2) * sizeof *usyms);
        usyms[nusyms++] = (usym_t){s, e, strdup(name), dso_id(dso)};
    }
    fclose(f);
    qsort(usyms, nusyms, sizeof *usyms, cmp_usym);
    return 0;
}

int prof_init(model_t *m, const char *out, const char *user_symbols, uint64_t pause_extra_ps, uint64_t sample,
              uint64_t kernel_base, char *err, size_t errlen) {
    M = m;
    ncpus = vm_ncpus(m);
    snprintf(out_path, sizeof out_path, "%s", out);
    if (user_symbols && user_symbols[0] && load_user_symbols(user_symbols, err, errlen)) return -1;
    user_base = vm_nsymbols(m);
    pause_extra = pause_extra_ps;
    sample_ps = sample;
    kbase = kernel_base;
    cpus = calloc((size_t)ncpus, sizeof *cpus);
    for (int c = 0; c < ncpus; c++) {
        cpus[c].tab = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, g_free);
        cpus[c].stacks = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
        cpus[c].cur_sym = UINT32_MAX;
        cpus[c].next_sample_busy = sample_ps;
    }
    phases = calloc(cap_phases = 16, sizeof *phases);
    nphases = 1;
    callsites = g_hash_table_new(g_int64_hash, g_int64_equal);
    on = 1;
    return 0;
}

uint32_t prof_symbol(uint64_t pc, int user) {
    if (!user) return vm_symbol(M, pc);
    size_t lo = 0, hi = nusyms;
    while (lo < hi) {  /* the last symbol starting at or below pc */
        size_t mid = (lo + hi) / 2;
        if (usyms[mid].start <= pc) lo = mid + 1; else hi = mid;
    }
    if (lo && pc < usyms[lo - 1].end) return user_base + (uint32_t)(lo - 1);
    return VM_SYM_USER;
}

static pstat_t *stat_of(pcpu_t *p, uint32_t phase, uint32_t sym) {
    if (p->cur && p->cur_sym == sym && p->cur_phase == phase) return p->cur;
    uint64_t key = ((uint64_t)phase << 32) | sym;
    scache_t *e = &p->cache[(sym * 2654435761u ^ phase) & (SCACHE - 1)];
    if (e->s && e->key == key) return e->s;
    pstat_t *s = g_hash_table_lookup(p->tab, &key);
    if (!s) {
        uint64_t *k = g_new(uint64_t, 1);
        *k = key;
        s = g_new0(pstat_t, 1);
        g_hash_table_insert(p->tab, k, s);
    }
    e->key = key;
    e->s = s;
    return s;
}

/* The clock read now against what the columns hold: idle after a wake, drift otherwise. */
static void settle(pcpu_t *p, uint64_t clock, int waking) {
    int64_t gap = (int64_t)(clock - p->base_clock) - (int64_t)(p->acct - p->base_acct);
    if (waking && gap > 0) p->idle_ps += (uint64_t)gap;
    else p->drift_ps += (uint64_t)gap;  /* two's complement: a negative drift subtracts */
    p->acct += (uint64_t)gap;
    p->base_clock = clock;
    p->base_acct = p->acct;
}

void prof_block(unsigned vcpu, uint32_t sym, uint32_t n, uint32_t npause, int halt, uint64_t insn_ps) {
    pcpu_t *p = &cpus[vcpu];
    uint64_t ips = (uint64_t)n * insn_ps;
    if (!p->started || p->halted) {
        /* the engine counted this block's instructions when it started it */
        uint64_t clock = qemu_plugin_vcpu_clock_ps() - ips;
        if (!p->started) {
            p->started = 1;
            p->start_ps = p->base_clock = clock;
            p->base_acct = p->acct;
        } else {
            settle(p, clock, 1);
        }
        p->halted = 0;
    }
    uint32_t phase = cur_phase;
    pstat_t *s = stat_of(p, phase, sym);
    p->prev = p->cur;
    p->cur = s;
    p->cur_sym = sym;
    p->cur_phase = phase;
    s->insns += n;
    s->insn_ps += ips;
    p->insns += n;
    p->acct += ips;
    if (npause && pause_extra) {
        s->pauses += npause;
        s->pause_ps += npause * pause_extra;
        p->acct += npause * pause_extra;
    }
    if (halt) p->halted = 1;
    p->user = sym == VM_SYM_USER || sym >= user_base;
    if (sample_ps && p->acct - p->idle_ps >= p->next_sample_busy) {
        if (p->user) record_sample(p, NULL, 0);  /* user time: its symbol, no walk */
        else if (!p->sample_due) p->sample_due = 1, p->due_sym = sym;  /* the kernel's: at its next push or call */
    }
}

void prof_charge(unsigned vcpu, int what, uint64_t ps) {
    pcpu_t *p = &cpus[vcpu];
    pstat_t *s = what == PROF_CORE_PREV && p->prev ? p->prev : p->cur;
    if (!s || !ps) return;
    if (what == PROF_MEM) s->mem_ps += ps;
    else if (what == PROF_LOCK) s->lock_ps += ps;
    else if (what == PROF_FETCH) s->fetch_ps += ps;
    else s->core_ps += ps;
    p->acct += ps;
}

void prof_observe(unsigned vcpu, uint64_t clock_ps) {
    pcpu_t *p = &cpus[vcpu];
    if (p->started && !p->halted) settle(p, clock_ps, 0);
}

void prof_phase(unsigned vcpu, int op, uint64_t id, uint64_t instance) {
    prof_observe(vcpu, qemu_plugin_vcpu_clock_ps());
    g_mutex_lock(&lock);
    if (op == VM_PHASE_BEGIN) {
        if (nphases == cap_phases) phases = realloc(phases, (cap_phases *= 2) * sizeof *phases);
        phases[nphases] = (pphase_t){id, instance};
        cur_phase = (uint32_t)nphases++;
    } else if (op == VM_PHASE_END && cur_phase && phases[cur_phase].id == id && phases[cur_phase].instance == instance) {
        cur_phase = 0;
    }
    g_mutex_unlock(&lock);
}

int prof_sample_due(unsigned vcpu) { return on && cpus[vcpu].sample_due; }

/* A sample of vcpu's busy time since its last one: frames leaf first (none:
 * the current symbol alone, named with its program for user time). */
static void record_sample(pcpu_t *p, const uint32_t *frames, int depth) {
    uint64_t busy = p->acct - p->idle_ps, weight = busy - p->last_sample_busy;
    p->last_sample_busy = busy;
    p->next_sample_busy = busy + sample_ps;
    p->sample_due = 0;
    GString *key = g_string_new(NULL);
    g_string_printf(key, "%u", p->cur_phase);
    if (!depth) {
        const char *dso, *name = sym_name(p->cur_sym, &dso);
        if (p->user) g_string_append_printf(key, dso[0] == '[' ? ";%s" : ";[%s]", dso);  /* [user] is bracketed */
        g_string_append_printf(key, ";%s", name);
    }
    for (int i = depth - 1; i >= 0; i--) g_string_append_printf(key, ";%s", vm_symbol_name(M, frames[i]));
    pstack_t *st = g_hash_table_lookup(p->stacks, key->str);
    if (!st) {
        st = g_new0(pstack_t, 1);
        g_hash_table_insert(p->stacks, g_strdup(key->str), st);
    }
    st->ps += weight;
    st->samples++;
    p->samples++;
    g_string_free(key, TRUE);
}

/* Is ret a return address whose call went to `callee` (a symbol's start;
 * 0: unknown)? A direct call (E8 rel32) must name it (1); an indirect one
 * (FF /2) cannot be checked and is taken (2); 0: no call. Cached. */
static int is_call_site(uint64_t ret, uint64_t callee) {
    uint64_t key = ret ^ (callee << 1);
    g_mutex_lock(&lock);
    uintptr_t v = (uintptr_t)g_hash_table_lookup(callsites, &key);
    g_mutex_unlock(&lock);
    if (v) return (int)v - 1;
    uint8_t b[8];
    GByteArray *buf = g_byte_array_new();
    int ok = 0;
    if (qemu_plugin_read_memory_vaddr(ret - 7, buf, 7) && buf->len == 7) {
        memcpy(b, buf->data, 7);
        if (b[2] == 0xe8) {  /* call rel32: 5 bytes before ret */
            int32_t rel;
            memcpy(&rel, b + 3, 4);
            ok = !callee || ret + (int64_t)rel == callee;  /* direct */
        } else if (b[5] == 0xff && (b[6] & 0x38) == 0x10 && (b[6] >> 6) == 3) {
            ok = 2;  /* call *%reg */
        } else if (b[4] == 0xff && (b[5] & 0x38) == 0x10 && (b[5] >> 6) == 1) {
            ok = 2;  /* call *disp8(%reg) */
        } else if (b[1] == 0xff && (b[2] & 0x38) == 0x10 && ((b[2] >> 6) == 2 || (b[2] & 0xc7) == 0x05)) {
            ok = 2;  /* call *disp32(%reg), call *rel32(%rip) */
        }
    }
    g_byte_array_free(buf, TRUE);
    uint64_t *k = g_new(uint64_t, 1);
    *k = key;
    g_mutex_lock(&lock);
    g_hash_table_insert(callsites, k, (gpointer)(uintptr_t)(ok + 1));
    g_mutex_unlock(&lock);
    return ok;
}

void prof_stack(unsigned vcpu, uint64_t rsp) {
    pcpu_t *p = &cpus[vcpu];
    if (!p->sample_due || rsp < kbase) return;
    uint32_t frames[MAX_DEPTH];
    int depth = 0;
    /* the time came due in due_sym: the leaf, under the function the walk starts from when they differ (a
     * leaf that pushes nothing, like clear_page_rep, is sampled at its caller's next call) */
    if (p->due_sym != p->cur_sym && p->due_sym >= VM_SYM_FIRST) frames[depth++] = p->due_sym;
    frames[depth++] = p->cur_sym;
    uint64_t top = (rsp | (THREAD_SIZE - 1)) + 1, len = top - rsp;
    if (len > STACK_READ) len = STACK_READ;
    GByteArray *buf = g_byte_array_new();
    if (qemu_plugin_read_memory_vaddr(rsp, buf, len) && buf->len >= 8) {
        for (size_t off = 0; off + 8 <= buf->len && depth < MAX_DEPTH; off += 8) {
            uint64_t v;
            memcpy(&v, buf->data + off, 8);
            if (v < kbase) continue;
            uint32_t caller = vm_symbol(M, v);
            if (caller < VM_SYM_FIRST || vm_symbol_addr(M, caller) == v) continue;  /* a function's start: no return */
            uint32_t callee = frames[depth - 1];
            int site = is_call_site(v, callee >= VM_SYM_FIRST ? vm_symbol_addr(M, callee) : 0);
            if (!site || (site == 2 && caller == callee)) continue;  /* indirect into itself: a stale address */
            frames[depth++] = caller;
        }
    } else {
        p->sample_fail++;
    }
    g_byte_array_free(buf, TRUE);
    record_sample(p, frames, depth);
}

/* --- results ------------------------------------------------------------------------ */
static const char *sym_name(uint32_t sym, const char **dso) {
    if (sym >= user_base && sym - user_base < nusyms) {
        *dso = dsos[usyms[sym - user_base].dso];
        return usyms[sym - user_base].name;
    }
    *dso = sym == VM_SYM_USER ? "[user]" : sym == VM_SYM_BOOT ? "[boot]" : "[kernel]";
    return vm_symbol_name(M, sym);
}

int prof_write(void) {
    if (!on) return 0;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.partial", out_path);
    FILE *f = fopen(tmp, "w");
    if (!f) return -1;
    fprintf(f, "{\"format\":1,\"pause_extra_ps\":%" PRIu64 ",\"sample_ps\":%" PRIu64 ",\n\"phases\":[", pause_extra,
            sample_ps);
    for (size_t i = 1; i < nphases; i++)
        fprintf(f, "%s{\"index\":%zu,\"id\":%" PRIu64 ",\"instance\":%" PRIu64 "}", i > 1 ? "," : "", i,
                phases[i].id, phases[i].instance);
    fprintf(f, "],\n\"cpus\":[");
    for (int c = 0; c < ncpus; c++) {
        pcpu_t *p = &cpus[c];
        fprintf(f, "%s\n{\"cpu\":%d,\"started\":%d,\"start_ps\":%" PRIu64 ",\"accounted_ps\":%" PRIu64
                   ",\"idle_ps\":%" PRIu64 ",\"drift_ps\":%" PRId64 ",\"insns\":%" PRIu64 ",\"halted_at_exit\":%d"
                   ",\"samples\":%" PRIu64 ",\"sample_failures\":%" PRIu64 "}",
                c ? "," : "", c, p->started, p->start_ps, p->acct, p->idle_ps, (int64_t)p->drift_ps, p->insns,
                p->halted, p->samples, p->sample_fail);
    }
    fprintf(f, "],\n\"symbols\":[");
    int first = 1;
    for (int c = 0; c < ncpus; c++) {
        GHashTableIter it;
        gpointer k, v;
        g_hash_table_iter_init(&it, cpus[c].tab);
        while (g_hash_table_iter_next(&it, &k, &v)) {
            uint64_t key = *(uint64_t *)k;
            pstat_t *s = v;
            const char *dso;
            const char *name = sym_name((uint32_t)key, &dso);
            fprintf(f, "%s\n{\"cpu\":%d,\"phase\":%u,\"symbol\":", first ? "" : ",", c, (unsigned)(key >> 32));
            vm_json_str(f, name);
            fprintf(f, ",\"dso\":");
            vm_json_str(f, dso);
            fprintf(f, ",\"insns\":%" PRIu64 ",\"insn_ps\":%" PRIu64 ",\"core_ps\":%" PRIu64 ",\"mem_ps\":%" PRIu64
                       ",\"lock_ps\":%" PRIu64 ",\"fetch_ps\":%" PRIu64 ",\"pause_ps\":%" PRIu64 ",\"pauses\":%" PRIu64 "}",
                    s->insns, s->insn_ps, s->core_ps, s->mem_ps, s->lock_ps, s->fetch_ps, s->pause_ps, s->pauses);
            first = 0;
        }
    }
    fprintf(f, "],\n\"stacks\":[");
    first = 1;
    for (int c = 0; c < ncpus; c++) {
        GHashTableIter it;
        gpointer k, v;
        g_hash_table_iter_init(&it, cpus[c].stacks);
        while (g_hash_table_iter_next(&it, &k, &v)) {
            const char *key = k, *semi = strchr(key, ';');
            pstack_t *st = v;
            fprintf(f, "%s\n{\"cpu\":%d,\"phase\":%d,\"stack\":", first ? "" : ",", c, atoi(key));
            vm_json_str(f, semi ? semi + 1 : "");
            fprintf(f, ",\"ps\":%" PRIu64 ",\"samples\":%" PRIu64 "}", st->ps, st->samples);
            first = 0;
        }
    }
    fprintf(f, "]}\n");
    if (fclose(f)) return -1;
    return rename(tmp, out_path);
}
