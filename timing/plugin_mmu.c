/* vmlab timing plugin: the QEMU side of address translation. The model's
 * walker (model_tlb.c) reads the guest's page-table base from CR3 through
 * the register API and the entries through qemu_plugin_read_memory_phys()
 * (series patch 0008). TLB flushes are the guest's own instructions, seen
 * at translation and told to the model when they execute:
 *
 *   MOV to CR3        every non-global entry (qemu64 has no PCID)
 *   MOV to CR4        everything, when it toggles PGE or clears PCIDE
 *   INVLPG m          the entries of m's page; m's address from its base
 *                     register and displacement (an index or RIP-relative
 *                     form: every non-global entry instead)
 *   INVPCID           everything (the guest CPU does not have it)
 *
 * A remote CPU's shootdown is an IPI whose handler runs one of these on
 * that CPU, so it empties that CPU's TLB when the handler runs.
 *
 * The page-table base and paging mode change only by MOV to CR0, CR3 or
 * CR4 (EFER.LMA cannot change while paging is on), so each vCPU's are read
 * once and kept until that vCPU executes one of those: a walk reads no
 * register. (The callbacks run before the instruction: the next walk,
 * after it, reads the new values.)
 */
#include "plugin_mmu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct qemu_plugin_register *r_cr0, *r_cr3, *r_cr4, *r_efer, *r_gpr[16];
static int ready;
static model_t *M;
typedef struct { uint64_t cr3; unsigned flags; int valid; } rootcache_t;
static rootcache_t *roots;              /* per vCPU */

/* x86 register numbers 0..15, as ModRM and REX name them */
static const char *const GPR[16] = {"rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi",
                                    "r8",  "r9",  "r10", "r11", "r12", "r13", "r14", "r15"};

static int root(void *ctx, int cpu, uint64_t *cr3, unsigned *flags) {
    (void)ctx;
    rootcache_t *r = &roots[cpu];
    if (!r->valid) {  /* callbacks run on the vCPU they are for: the register API reads its registers */
        uint64_t cr0 = read_reg(r_cr0), cr4 = read_reg(r_cr4), efer = read_reg(r_efer);
        r->cr3 = read_reg(r_cr3);
        /* long-mode paging only (PG and EFER.LMA): firmware's legacy paging is not modeled */
        r->flags = (cr0 >> 31 & 1) && (efer >> 10 & 1) ? VM_MMU_PAGING : 0;
        if (cr4 >> 12 & 1) r->flags |= VM_MMU_LA57;
        r->valid = 1;
    }
    *cr3 = r->cr3;
    *flags = r->flags;
    return 1;
}

static int read_phys(void *ctx, uint64_t pa, uint64_t *val) {
    (void)ctx;
    return qemu_plugin_read_memory_phys(pa, val, 8);  /* x86 is little-endian, like the host */
}

int mmu_setup(model_t *m, GArray *regs) {
    M = m;
    for (guint i = 0; regs && i < regs->len; i++) {
        qemu_plugin_reg_descriptor *d = &g_array_index(regs, qemu_plugin_reg_descriptor, i);
        if (!strcmp(d->name, "cr0")) r_cr0 = d->handle;
        else if (!strcmp(d->name, "cr3")) r_cr3 = d->handle;
        else if (!strcmp(d->name, "cr4")) r_cr4 = d->handle;
        else if (!strcmp(d->name, "efer")) r_efer = d->handle;
        for (int g = 0; g < 16; g++)
            if (!strcmp(d->name, GPR[g])) r_gpr[g] = d->handle;
    }
    ready = r_cr0 && r_cr3 && r_cr4 && r_efer;
    for (int g = 0; g < 16; g++) ready = ready && r_gpr[g];
    if (!ready) {
        fprintf(stderr, "vmlab-timing: control registers not readable; translation is not priced\n");
        return 0;
    }
    roots = calloc(vm_ncpus(m), sizeof *roots);
    vm_mmu_t mmu = {.root = root, .read = read_phys, .ctx = NULL};
    vm_set_mmu(m, &mmu);
    return 1;
}

/* --- the flushing instructions ------------------------------------------------ */
typedef struct {
    int what, base;     /* VM_FLUSH_*; base register of INVLPG's operand (-1: unknown) */
    int64_t disp;
} flushop_t;

static void on_flush(unsigned int vcpu, void *ud) {
    const flushop_t *f = ud;
    if (f->what == VM_FLUSH_NONGLOBAL && f->base < 0) roots[vcpu].valid = 0;  /* MOV CR3 (below) */
    uint64_t va = 0;
    int what = f->what;
    if (what == VM_FLUSH_PAGE) {
        if (f->base < 0) what = VM_FLUSH_NONGLOBAL;
        else va = read_reg(r_gpr[f->base]) + (uint64_t)f->disp;
    }
    vm_tlb_flush(M, (int)vcpu, what, va);
}

/* MOV to CR0, before it executes: the next walk reads the paging mode again. */
static void on_cr0(unsigned int vcpu, void *ud) {
    (void)ud;
    roots[vcpu].valid = 0;
}

/* MOV to CR4, before it executes: flushes only if it changes PGE or clears PCIDE. */
static void on_cr4(unsigned int vcpu, void *ud) {
    const flushop_t *f = ud;
    roots[vcpu].valid = 0;
    uint64_t old = read_reg(r_cr4), new = read_reg(r_gpr[f->base]);
    if (((old ^ new) & (1u << 7)) || ((old & ~new) & (1u << 17))) vm_tlb_flush(M, (int)vcpu, VM_FLUSH_ALL, 0);
}

void mmu_instrument(struct qemu_plugin_insn *insn, const uint8_t *b, size_t n) {
    if (!ready || !vm_tlb_on(M)) return;
    size_t i = 0;
    int rex = 0, opsize = 0;
    for (; i < n; i++) {
        uint8_t c = b[i];
        if (c == 0x66) opsize = 1;
        else if (!(c == 0xf0 || c == 0xf2 || c == 0xf3 || c == 0x2e || c == 0x36 || c == 0x3e || c == 0x26 ||
                   c == 0x64 || c == 0x65 || c == 0x67))
            break;
    }
    if (i < n && b[i] >= 0x40 && b[i] <= 0x4f) rex = b[i++];
    if (i + 2 >= n || b[i] != 0x0f) return;
    uint8_t op = b[i + 1], modrm = b[i + 2];
    int mod = modrm >> 6, reg = (modrm >> 3) & 7, rm = (modrm & 7) | (rex & 1 ? 8 : 0);
    flushop_t *f = NULL;
    void (*cb)(unsigned int, void *) = on_flush;
    if (op == 0x22 && reg == 3) {  /* MOV CR3, r */
        f = g_new0(flushop_t, 1);
        f->what = VM_FLUSH_NONGLOBAL;
        f->base = -1;
    } else if (op == 0x22 && reg == 0) {  /* MOV CR0, r: paging may change */
        f = g_new0(flushop_t, 1);
        cb = on_cr0;
    } else if (op == 0x22 && reg == 4 && !(rex & 4)) {  /* MOV CR4, r */
        f = g_new0(flushop_t, 1);
        f->base = rm;
        cb = on_cr4;
    } else if (op == 0x01 && mod != 3 && reg == 7) {  /* INVLPG m */
        f = g_new0(flushop_t, 1);
        f->what = VM_FLUSH_PAGE;
        f->base = (modrm & 7) == 4 || (mod == 0 && (modrm & 7) == 5) ? -1 : rm;
        if (mod == 1 && i + 3 < n) f->disp = (int8_t)b[i + 3];
        else if (mod == 2 && i + 6 < n) f->disp = (int32_t)(b[i + 3] | b[i + 4] << 8 | b[i + 5] << 16 | (uint32_t)b[i + 6] << 24);
    } else if (opsize && op == 0x38 && modrm == 0x82) {  /* INVPCID */
        f = g_new0(flushop_t, 1);
        f->what = VM_FLUSH_ALL;
    }
    if (f) qemu_plugin_register_vcpu_insn_exec_cb(insn, cb, QEMU_PLUGIN_CB_R_REGS, f);
}
