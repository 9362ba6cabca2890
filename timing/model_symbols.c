/* vmlab timing model: the kernel's text symbols, from its System.map, that
 * misses and stalls are attributed to. Looked up when the plugin translates
 * a block, not per access.
 */
#include "model_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t addr;
    char *name;
} symtmp_t;

static int cmp_sym(const void *a, const void *b) {
    const symtmp_t *x = a, *y = b;
    if (x->addr != y->addr) return x->addr < y->addr ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Room for the reserved symbols (named here) and n kernel ones after them. */
static void alloc_symbols(model_t *m, size_t n) {
    m->nsym = (uint32_t)n + VM_SYM_FIRST;
    m->sym_addr = calloc(m->nsym, sizeof(uint64_t));
    m->sym_name = calloc(m->nsym, sizeof(char *));
    m->sym_name[VM_SYM_BOOT] = strdup("[boot]");
    m->sym_name[VM_SYM_USER] = strdup("[user]");
    m->sym_name[VM_SYM_KERNEL_OTHER] = strdup("[kernel, no symbol]");
}

/* Text symbols at or above kernel_base, sorted by address. */
static int load_symbols(model_t *m, const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "r");
    if (!f) {
        model_seterr(err, errlen, "%s: cannot open the kernel's System.map: %s", path, strerror(errno));
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
    alloc_symbols(m, n);
    for (size_t i = 0; i < n; i++) {
        m->sym_addr[VM_SYM_FIRST + i] = v[i].addr;
        m->sym_name[VM_SYM_FIRST + i] = v[i].name;
    }
    free(v);
    return 0;
}

int model_sym_init(model_t *m, const char *system_map, char *err, size_t errlen) {
    if (m->kernel_base == UINT64_MAX) m->kernel_base = 0xffff800000000000ull;  /* x86-64's kernel half */
    if (system_map[0]) {
        if (load_symbols(m, system_map, err, errlen)) return -1;
    } else {
        alloc_symbols(m, 0);
    }
    m->sym = calloc(m->nsym, sizeof(symstat_t));
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

uint32_t vm_nsymbols(const model_t *m) { return m->nsym; }
const char *vm_symbol_name(const model_t *m, uint32_t sym) { return sym < m->nsym ? m->sym_name[sym] : "?"; }
uint64_t vm_symbol_addr(const model_t *m, uint32_t sym) { return sym < m->nsym ? m->sym_addr[sym] : 0; }
