/* vmlab timing model: address translation. Included by model_int.h (the
 * state) and by model_access.c and model_tlb.c.
 *
 * Per CPU: TLB arrays (first-level data and instruction TLBs, a second-level
 * TLB), each holding one or several page sizes (Skylake: a 4 KiB, a 2 MiB
 * and a 1 GiB L1 DTLB, a shared 4 KiB + 2 MiB STLB; the EV7: one fully
 * associative DTB and ITB for every size), the paging-structure caches
 * (PML4E, PDPTE and PDE: a hit skips the upper levels of the walk) and the
 * page walkers. A miss in the last TLB walks the guest's own x86-64 page
 * tables (4 or 5 levels, read through the plugin: vm_set_mmu), and every
 * entry read is a load through the data caches, priced at the home node of
 * the page-table page. The walk learns the page size from the entries, so a
 * THP mapping fills a 2 MiB entry.
 *
 * Flushes follow the guest (model.h vm_tlb_flush): a CR3 write empties the
 * non-global entries and the paging-structure caches (the guest CPU, qemu64,
 * has no PCID), INVLPG the entries of one page, a CR4.PGE toggle all.
 */
#ifndef VMLAB_MODEL_TLB_H
#define VMLAB_MODEL_TLB_H

#include <stdint.h>

#define MAX_TLBS 8          /* TLB arrays per CPU */
#define MAX_WALKERS 4       /* concurrent page walks per CPU */
#define PSC_LEVELS 3        /* PDE (2 MiB regions), PDPTE (1 GiB), PML4E (512 GiB) caches */
#define MAX_PSC 64          /* entries per paging-structure cache */
#define TLB_SIZES 3         /* 4 KiB, 2 MiB, 1 GiB pages */
#define PTE_ADDR 0x000ffffffffff000ull
#define TLB_GLOBAL (1ull << 63)   /* in an entry's frame word: a global page (survives a CR3 write) */

enum { TLB_L1D = 0, TLB_L1I = 1, TLB_L2 = 2 };   /* a TLB array's level */

/* One TLB array's shape (model-wide: every CPU is the same core). */
typedef struct {
    uint32_t entries, ways;
    uint8_t level, sizes;   /* sizes: bit s holds pages of size s (0: 4 KiB, 1: 2 MiB, 2: 1 GiB) */
} tlbcfg_t;

/* One TLB array of a CPU: sets x ways, MRU first. key: ((vpn << 2) | size) + 1,
 * 0 = empty; frame: the page's first 4 KiB frame, | TLB_GLOBAL. */
typedef struct {
    uint64_t *key, *frame;
    uint32_t mask, ways;
} tlb_t;

/* A paging-structure cache: fully associative, MRU first. key: the virtual
 * address's bits above the level's reach, + 1; next: the table it points to. */
typedef struct {
    uint64_t key[MAX_PSC], next[MAX_PSC];
    uint32_t n;
} psc_t;

typedef struct {
    int on;                         /* a [tlb] in the config */
    tlbcfg_t arr[MAX_TLBS];
    int narr;
    uint32_t psc_entries[PSC_LEVELS];
    uint32_t walkers;
    uint32_t l2_cycles;             /* a second-level TLB hit's latency, as configured */
    uint64_t l2_ps;                 /* the same in ps (model_tlb_init) */
} tlbmodel_t;

typedef struct {
    tlb_t t[MAX_TLBS];
    psc_t psc[PSC_LEVELS];
    uint64_t walker_free[MAX_WALKERS];
    /* the last page each kind of access translated, so a run of accesses to
     * one page looks up nothing (it is the MRU entry of its set already) */
    uint64_t last_dpage, last_ipage, last_iframe;
} cputlb_t;

/* The page size's shift: 12, 21, 30. */
static inline uint32_t tlb_shift(int size) { return 12 + 9 * (uint32_t)size; }

/* The entry's index in t, or -1. */
static inline int tlb_find(const tlb_t *t, uint64_t vpn, int size) {
    uint64_t key = ((vpn << 2) | (uint64_t)size) + 1;
    const uint64_t *s = t->key + (size_t)(vpn & t->mask) * t->ways;
    for (uint32_t i = 0; i < t->ways; i++)
        if (s[i] == key) return (int)i;
    return -1;
}

#endif
