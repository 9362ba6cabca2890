/* vmlab timing plugin for QEMU 10 (plugin API 4): feeds the guest's
 * instruction stream and data accesses into the timing model (model.h).
 *
 *   -plugin libvmlab_timing.so,config=PATH
 *
 * fast:     instruction counts per CPU and kind, basic-block vectors, phases
 * detailed: the above plus every data access priced by the model
 *
 * Callbacks only, no inline scoreboards: per-vCPU inline counters corrupt
 * execution under -icount with several vCPUs in QEMU 10.0.2. The vCPU index
 * always comes from the callback. User vs kernel is decided by the
 * instruction's virtual address (the 10.0 API does not expose the MMU
 * index): at or above the kernel's base it is kernel code; below it, user
 * code, except before the first kernel instruction ran (firmware and the
 * kernel decompressor run at low addresses too): that is `boot`.
 *
 * Which vCPU runs: our QEMU's series (engine/qemu-patches/0008) makes
 * every callback report the running vCPU, on every guest ISA, so the index
 * QEMU passes is used as it is.
 *
 * Stalls (detailed mode, `plugin.stalls on`): what the model says the core
 * waits for (model_core.h: a value still arriving, full fill buffers, a full
 * reorder window or store buffer, a lock operation's transaction) is charged
 * to the running vCPU's own clock with qemu_plugin_vcpu_stall_ps() (series
 * patch 0008), so the guest feels it. The model needs each 8-byte load's
 * value for the first of these (qemu_plugin_mem_get_value), and asks for it
 * only when the load's line is still arriving.
 *
 * Lock lines and causality: vCPUs run one after another, each up to a
 * quantum ahead of the others, so a vCPU can see a value another vCPU wrote
 * at a later time of that vCPU's clock. For lines touched by atomic
 * instructions the plugin remembers when their value last changed and who
 * changed it; an atomic access by another vCPU waits until then before the
 * transfer starts (a line cannot leave its owner before the write), so a
 * lock hand-off costs what the machine says, not what the interleaving
 * happens to give. A failed compare-and-swap stores the value it found and
 * changes nothing, so it moves no timestamp.
 */
#include <glib.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <qemu-plugin.h>

#include "decode.h"
#include "model.h"
#include "plugin_mmu.h"
#include "plugin_bbv.h"
#include "plugin_prof.h"
#include "vmlab_facts.h"  /* experiments/lib: VMLAB_PHASE_MAGIC, shared with the guest */

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

typedef struct {
    uint32_t n, kind, bb, bytes, sym, spin, halt;  /* spin: holds a PAUSE; halt: ends in HLT (plugin_bbv.c) */
    uint32_t psym, npause;  /* the profile's symbol (plugin_prof.c), its PAUSEs */
    uint64_t pc;
    vm_block_t *blk;   /* its instructions decoded for the core (NULL: no core, or not priced) */
} tbinfo_t;


static model_t *M;
static int detailed, is_x86, is_alpha, fetch;  /* fetch: instruction fetch priced (an l1i) */
/* core: the model executes the instructions (model.h, "the core"): each
 * block decoded at translation (decode.h), started by vm_core_begin, its
 * accesses handed over with their instruction's index in the block */
static int core;
/* plugin.price_from_marker on (a booted detailed run): the boot only counts
 * instructions; the guest's VMLAB_OP_PRICE marker, just before the
 * experiment, starts the pricing (qemu_plugin_reset retranslates every block
 * with the memory callbacks). A restored run is priced from the restore. */
static int pricing = 1;
/* plugin.warmup_insns N (restored runs): the first N instructions after the
 * restore (all vCPUs together) are priced as always (the guest feels the
 * same stalls, so its own figures are those of a run without a warm-up), but
 * what the model counted over them is dropped at the end (vm_warmup_done):
 * the run's model figures leave out the cold start of caches, directory and
 * streams. The experiment's marker (VMLAB_OP_PRICE) ends it at the latest. */
static uint64_t warmup_total, warmup_left;
/* plugin.stop_after_slices n (regions, pipeline/sampled.py): the machine
 * stops at machine-wide slice boundary n (plugin_bbv.c), for the host to
 * save it (a checkpoint) or to end a region's run.
 * plugin.region_warmup_slices m: a region run's first m slices warm the
 * model (priced, the guest feels them) and what it counted over them is
 * dropped at boundary m, so the results are those of the measured slice. */
static uint64_t stop_after_slices, region_warmup_slices;
/* plugin.functional_slices f (regions, f <= m): the first f of those slices
 * warm the model functionally: it sees every instruction and access (caches,
 * TLBs, directory, streams warm) but nothing is charged, so the guest runs as
 * the fast profile did. The model's clock runs ahead of the vCPU's by what it
 * would have charged (uncharged[]); it follows the vCPU's clock plus that, and
 * the slices file reports it less that. At boundary f, when charging starts,
 * every CPU's model state moves back by its uncharged time (vm_shift_time),
 * so the CPUs share one time again in the model's shared queues. */
static uint64_t functional_slices;
static int64_t *uncharged;  /* signed: with the core, the model may run behind the engine */
/* The engine's time per instruction: its configured cycle until the core
 * charges (a restore, a booted run's price marker, the end of a functional
 * warm-up), then the core's best case (series patch 0008): core_charges(). */
static int charging;
static int functional;
/* plugin.first_slice_done n: the checkpoint this run restores was taken n
 * non-spin instructions past its boundary (bbv.stops' late_insns): the first
 * slice ends n sooner, so every boundary is the profile's */
static uint64_t first_slice_done;
/* plugin.checkpoint_points on (a sampled run's profile, segments and
 * regions): TLBs reset where checkpoints are or would be taken (plugin_bbv.c) */
static int checkpoint_points;
/* plugin.stop_for_exit on (a region): its stop ends the run, saves nothing */
static int stop_for_exit;
static qemu_plugin_id_t plugin_id;
static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
static void at_exit(qemu_plugin_id_t id, void *ud);
static volatile int kernel_seen;
static uint64_t kernel_base, interval = 100000000;
static char bbv_dir[4096];
/* plugin.profile PATH: the profile on the guest clock (plugin_prof.h), with
 * the programs' symbols (plugin.user_symbols), a PAUSE's extra time
 * (plugin.pause_extra_ps) and kernel stacks every plugin.sample_ps */
static char prof_out[4096], user_syms[4096];
static uint64_t pause_extra_ps, sample_ps;
static int profiling;
static uint64_t engine_insn_ps;          /* what the engine counts an instruction now (vm_engine_insn_ps) */
/* a kernel push or call: its store's address is the new stack pointer (mem userdata bit; the
 * instruction's index in its block stays below it: at most 512) */
#define STACK_OP (1u << 15)
static int global_bbv;                   /* plugin.global_bbv on: machine-wide slices too (plugin_bbv.c) */
/* plugin.mem_hops on (a sampled run's fast profile): the slices count the
 * loads and stores that miss a cache filter by hops to their home node,
 * through a memory callback that does only that (plugin_bbv.c) */
static int mem_hops;
static struct qemu_plugin_register *r_rax, *r_rdi, *r_rsi;
static int stalls;                       /* charge modeled stalls to the vCPU clocks */
typedef struct { uint64_t value, when_ps; unsigned writer; } lockline_t;
static GHashTable *locklines;            /* line -> last change (stalls on only; round-robin: one writer) */
static uint64_t line_mask;
static __thread GByteArray *regbuf;      /* per host thread: MTTCG runs vCPUs in parallel */
static uint32_t *sync_tick;              /* per vCPU: blocks since the model's clock last followed the engine's */

/* --- execution callbacks ------------------------------------------------------- */
/* The extra wait of an atomic access (see the top): the load half waits for
 * the last change by another vCPU; the store half records a change. */
static uint64_t lock_causality(unsigned vcpu, qemu_plugin_meminfo_t info, uint64_t line, unsigned store) {
    lockline_t *l = g_hash_table_lookup(locklines, (gpointer)(uintptr_t)line);
    uint64_t now = qemu_plugin_vcpu_clock_ps();
    if (!store) return l && l->writer != vcpu && l->when_ps > now ? l->when_ps - now : 0;
    qemu_plugin_mem_value v = qemu_plugin_mem_get_value(info);
    uint64_t val = v.type == QEMU_PLUGIN_MEM_VALUE_U8 ? v.data.u8 : v.type == QEMU_PLUGIN_MEM_VALUE_U16 ? v.data.u16
                 : v.type == QEMU_PLUGIN_MEM_VALUE_U32 ? v.data.u32 : v.data.u64;
    if (!l) {
        l = g_new(lockline_t, 1);
        l->value = ~val;
        g_hash_table_insert(locklines, (gpointer)(uintptr_t)line, l);
    }
    if (l->value != val) {
        l->value = val;
        l->when_ps = now;
        l->writer = vcpu;
    }
    return 0;
}

/* What the model says a vCPU waits for: on its clock, or, in a functional
 * warm-up, kept apart (uncharged). */
static inline void charge(unsigned vcpu, uint64_t ps, int what) {
    if (!ps || !stalls) return;
    if (functional) {
        uncharged[vcpu] += (int64_t)ps;
        return;
    }
    qemu_plugin_vcpu_stall_ps(ps);
    if (profiling && what >= 0) prof_charge(vcpu, what, ps);
}

/* The core starts charging: the engine counts the core's best case per
 * instruction from now on (series patch 0008) and the model its charges
 * against that. Once: at a restored run's first vCPU, a booted run's price
 * marker, the end of a region's functional warm-up. */
static void core_charges(void) {
    if (!core || !stalls || charging) return;
    if (!qemu_plugin_set_insn_ps(vm_insn_ps(M))) {
        fprintf(stderr, "vmlab-timing: the engine refused %" PRIu64 " ps per instruction; the core's time is "
                        "charged on top of a cycle an instruction\n", vm_insn_ps(M));
        return;
    }
    vm_set_engine_insn_ps(M, vm_insn_ps(M));
    engine_insn_ps = vm_engine_insn_ps(M);
    charging = 1;
}

static void tb_exec(unsigned int vcpu, void *ud) {
    const tbinfo_t *t = ud;
    if (profiling) prof_block(vcpu, t->psym, t->n, t->npause, (int)t->halt, engine_insn_ps);
    uint64_t ps = t->blk ? vm_core_begin(M, (int)vcpu, t->blk) : 0;  /* the previous block's rest, its branch */
    /* idle jumps, PAUSE (model.h): every 16th block of a vCPU is soon enough, and the engine's clock is not
     * free to read. The engine counts a block's instructions when it starts it: this one's are not the model's
     * yet, and what the core just charged is not on the engine's clock yet either. */
    if (stalls && !(sync_tick[vcpu]++ & 15)) {
        uint64_t clock = qemu_plugin_vcpu_clock_ps();
        int64_t e = (int64_t)clock + uncharged[vcpu] + (functional ? 0 : (int64_t)ps) -
                    (int64_t)t->n * (int64_t)vm_engine_insn_ps(M);
        if (e > 0) vm_sync_time(M, (int)vcpu, (uint64_t)e);
        if (profiling) prof_observe(vcpu, clock);
    }

    uint64_t fetch_ps = fetch && pricing ? vm_fetch(M, (int)vcpu, t->pc, t->bytes, t->sym, (int)t->kind) : 0;
    uint64_t window_ps = t->blk ? 0 : vm_insns(M, (int)vcpu, t->n, (int)t->kind);  /* non-zero: a full window */
    charge(vcpu, ps + fetch_ps + window_ps, -1);  /* one charge: the engine sees what it always saw */
    if (profiling && stalls && !functional && (ps | fetch_ps | window_ps)) {
        if (ps) prof_charge(vcpu, PROF_CORE_PREV, ps);
        if (fetch_ps) prof_charge(vcpu, PROF_FETCH, fetch_ps);
        if (window_ps) prof_charge(vcpu, PROF_CORE, window_ps);
    }
    if (warmup_left) {  /* restored runs only, priced from the restore; one thread (icount) */
        warmup_left = warmup_left > t->n ? warmup_left - t->n : 0;
        /* its length as the model counted it (the core executes a block when the next one starts) */
        if (!warmup_left) vm_warmup_done(M, vm_total_insns(M));
    }
    if (t->bb) bbv_exec(vcpu, t->bb, t->n, t->pc, (int)t->spin, (int)t->halt);
}

/* A serialising instruction of a core block is about to run (udata: its index):
 * the core executes up to it, so a barrier's wait is on the vCPU's clock before
 * the guest reads that clock (lfence; rdtsc in the vDSO's clock_gettime). */
static void serial_insn(unsigned int vcpu, void *ud) {
    charge(vcpu, vm_core_upto(M, (int)vcpu, (uint32_t)(uintptr_t)ud), PROF_CORE);
}

/* fast mode, plugin.mem_hops on: the access's line for the cache filter
 * only; a spinning block's are left out, as its instructions are (udata:
 * the block) */
static void mem_hop(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *ud) {
    if (((const tbinfo_t *)ud)->spin) return;
    struct qemu_plugin_hwaddr *hw = qemu_plugin_get_hwaddr(info, vaddr);
    if (hw && !qemu_plugin_hwaddr_is_io(hw)) bbv_mem(vcpu, qemu_plugin_hwaddr_phys_addr(hw));
}

static int hop_of(int cpu, uint64_t paddr) { return vm_hop_class(M, cpu, paddr); }

static void at_boundary(uint64_t b, uint64_t insns) {
    if (functional && b == functional_slices) {
        functional = 0;
        core_charges();
        for (int c = 0; c < vm_ncpus(M); c++) {
            if (uncharged[c] > 0) vm_shift_time(M, c, (uint64_t)uncharged[c]);  /* behind: the next sync */
            uncharged[c] = 0;
        }
    }
    if (b == region_warmup_slices) vm_warmup_done(M, insns);
}

static void mem_access(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *ud) {
    uintptr_t u = (uintptr_t)ud;
    struct qemu_plugin_hwaddr *hw = qemu_plugin_get_hwaddr(info, vaddr);
    if (!hw || qemu_plugin_hwaddr_is_io(hw)) {
        vm_io_access(M, (int)vcpu);
        if (core)  /* the core executes its instruction (as an L1 hit) and moves past it */
            charge(vcpu, vm_core_access(M, (int)vcpu, (uint32_t)((u >> 4) & 0x7ff), UINT64_MAX, vaddr,
                                        (unsigned)(u & 15) | VM_F_IO, (uint32_t)(u >> 16)), PROF_MEM);
        return;
    }
    unsigned flags = (unsigned)(u & 15);
    uint32_t sym = (uint32_t)(u >> 16);
    if (qemu_plugin_mem_is_store(info)) flags |= VM_F_WRITE;
    else if (!(flags & VM_F_ATOMIC) && qemu_plugin_mem_size_shift(info) == 3) flags |= VM_F_WIDE;
    uint64_t pa = qemu_plugin_hwaddr_phys_addr(hw), *slot = NULL, ps;
    if (core) {  /* registers carry the dependences: no values asked for */
        ps = vm_core_access(M, (int)vcpu, (uint32_t)((u >> 4) & 0x7ff), pa, vaddr, flags, sym);
    } else {
        ps = vm_access(M, (int)vcpu, pa, vaddr, flags, sym, &slot);
    }
    if (slot) {  /* an 8-byte load still arriving: the model wants its value (it may be an address) */
        qemu_plugin_mem_value v = qemu_plugin_mem_get_value(info);
        *slot = v.type == QEMU_PLUGIN_MEM_VALUE_U64 ? v.data.u64 : 0;
    }
    /* a lock's hand-off wait is the guest's, not the model's: none in a functional warm-up */
    uint64_t lock_ps = stalls && !functional && (flags & VM_F_ATOMIC)
                           ? lock_causality(vcpu, info, pa & ~line_mask, flags & VM_F_WRITE) : 0;
    charge(vcpu, ps + lock_ps, -1);  /* one charge: the engine sees what it always saw */
    if (profiling && stalls && !functional) {
        if (ps) prof_charge(vcpu, PROF_MEM, ps);
        if (lock_ps) prof_charge(vcpu, PROF_LOCK, lock_ps);
    }
    if ((u & STACK_OP) && profiling && prof_sample_due(vcpu)) prof_stack(vcpu, vaddr);
}

uint64_t read_reg(struct qemu_plugin_register *r) {
    uint64_t v = 0;
    if (!regbuf) regbuf = g_byte_array_new();
    g_byte_array_set_size(regbuf, 0);
    int n = qemu_plugin_read_register(r, regbuf);
    if (n > 0) memcpy(&v, regbuf->data, n < 8 ? (size_t)n : 8);  /* x86 is little-endian, like the host */
    return v;
}

/* a vCPU's modeled clock, for the slices file of a detailed run (plugin_bbv.c) */
static uint64_t model_clock(int cpu) { return (uint64_t)((int64_t)vm_cpu_time_ps(M, cpu) - uncharged[cpu]); }

/* after qemu_plugin_reset: the same callbacks, now with the pricing on */
static void reinstall(qemu_plugin_id_t id) {
    qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
    qemu_plugin_register_atexit_cb(id, at_exit, NULL);
}

/* x86 phase marker: `xchg %bx,%bx` (66 87 db, a no-op) with
 * rax = VMLAB_PHASE_MAGIC ('VML') << 8 | op, rdi = phase id, rsi = instance. */
static void magic(unsigned int vcpu, void *ud) {  /* ud: its index in its block */
    if (!r_rax) return;
    uint64_t rax = read_reg(r_rax);
    if ((rax >> 8) != VMLAB_PHASE_MAGIC) return;
    if ((rax & 0xff) == VMLAB_OP_PRICE) {
        if (warmup_left) {  /* the experiment starts here: a warm-up never runs into it */
            if (core) charge(vcpu, vm_core_upto(M, (int)vcpu, (uint32_t)(uintptr_t)ud), PROF_CORE);  /* to the marker */
            vm_warmup_done(M, vm_total_insns(M));
            warmup_left = 0;
        }
        if (!pricing) {
            pricing = 1;
            core_charges();
            qemu_plugin_reset(plugin_id, reinstall);
        }
        return;
    }
    uint64_t id = read_reg(r_rdi), instance = read_reg(r_rsi);
    vm_phase(M, (int)vcpu, (int)(rax & 0xff), id, instance);
    if (profiling) prof_phase(vcpu, (int)(rax & 0xff), id, instance);
}

/* --- translation ----------------------------------------------------------------- */
/* Lock operations: x86 lock-prefixed instructions and xchg with memory;
 * Alpha load-locked / store-conditional. */
static int is_atomic(const uint8_t *b, size_t n) {
    if (is_alpha && n == 4) {
        unsigned op = b[3] >> 2;
        return op == 0x2a || op == 0x2b || op == 0x2e || op == 0x2f;
    }
    if (!is_x86) return 0;
    size_t i = 0;
    int lock = 0;
    for (; i < n; i++) {
        uint8_t c = b[i];
        if (c == 0xf0) lock = 1;
        else if (!(c == 0xf2 || c == 0xf3 || c == 0x2e || c == 0x36 || c == 0x3e || c == 0x26 || c == 0x64 ||
                   c == 0x65 || c == 0x66 || c == 0x67))
            break;
    }
    if (lock) return 1;
    if (i < n && b[i] >= 0x40 && b[i] <= 0x4f) i++;  /* REX */
    if (i + 1 < n && (b[i] == 0x86 || b[i] == 0x87)) return (b[i + 1] >> 6) != 3;  /* xchg r, m */
    return 0;
}

/* x86 push r64, push imm, call rel32, call r/m64: a store at the new stack pointer */
static int is_push_or_call(const uint8_t *b, size_t n) {
    if (!is_x86 || !n) return 0;
    size_t i = (b[0] >= 0x40 && b[0] <= 0x4f) ? 1 : 0;  /* REX */
    if (i >= n) return 0;
    uint8_t op = b[i];
    if ((op >= 0x50 && op <= 0x57) || op == 0x68 || op == 0x6a || op == 0xe8) return 1;
    return op == 0xff && i + 1 < n && (((b[i + 1] >> 3) & 7) == 2 || ((b[i + 1] >> 3) & 7) == 6);
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
    (void)id;
    uint64_t pc = qemu_plugin_tb_vaddr(tb);
    size_t n = qemu_plugin_tb_n_insns(tb);
    tbinfo_t *t = g_new0(tbinfo_t, 1);  /* lives as long as QEMU may run the block */
    t->n = (uint32_t)n;
    if (pc >= kernel_base) {
        t->kind = VM_KERNEL;
        kernel_seen = 1;
    } else {
        t->kind = kernel_seen ? VM_USER : VM_BOOT;
    }
    if (bbv_on()) t->bb = bbv_block_id(pc, n);
    t->pc = pc;
    t->sym = t->kind == VM_USER ? VM_SYM_USER : t->kind == VM_KERNEL && detailed ? vm_symbol(M, pc) : VM_SYM_BOOT;
    if (profiling)  /* a kernel block's symbol is the model's when it looked it up (detailed) */
        t->psym = t->kind == VM_BOOT ? VM_SYM_BOOT : t->kind == VM_KERNEL && detailed ? t->sym
                                                   : prof_symbol(pc, t->kind == VM_USER);
    if (n) {
        struct qemu_plugin_insn *last = qemu_plugin_tb_get_insn(tb, n - 1);
        t->bytes = (uint32_t)(qemu_plugin_insn_vaddr(last) + qemu_plugin_insn_size(last) - pc);
    }
    if (core && pricing && n) {
        t->blk = g_malloc0(sizeof *t->blk + n * sizeof(vm_insn_t));  /* lives as long as the block may run */
        t->blk->pc = pc;
        t->blk->next_pc = pc + t->bytes;
        t->blk->n = (uint32_t)n;
        t->blk->sym = t->sym;
        t->blk->kind = (int)t->kind;
    }
    qemu_plugin_register_vcpu_tb_exec_cb(tb, tb_exec, QEMU_PLUGIN_CB_NO_REGS, t);
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        uint8_t bytes[16];
        size_t len = qemu_plugin_insn_data(insn, bytes, sizeof bytes);
        if (t->blk) {
            if (is_x86) vm_decode_x86(bytes, len, qemu_plugin_insn_vaddr(insn), &t->blk->in[i]);
            else vm_decode_alpha(bytes, len, qemu_plugin_insn_vaddr(insn), &t->blk->in[i]);
            if (t->blk->in[i].flags & (VM_I_SERIAL | VM_I_CLOCK))
                qemu_plugin_register_vcpu_insn_exec_cb(insn, serial_insn, QEMU_PLUGIN_CB_NO_REGS, (void *)(uintptr_t)i);
        }
        if (is_x86 && len == 3 && bytes[0] == 0x66 && bytes[1] == 0x87 && bytes[2] == 0xdb)
            qemu_plugin_register_vcpu_insn_exec_cb(insn, magic, QEMU_PLUGIN_CB_R_REGS, (void *)(uintptr_t)i);
        if (is_x86 && len == 2 && bytes[0] == 0xf3 && bytes[1] == 0x90) t->spin = 1, t->npause++;  /* PAUSE */
        if (is_x86 && len == 1 && bytes[0] == 0xf4) t->halt = 1;  /* HLT */
        if (mem_hops && t->bb)
            qemu_plugin_register_vcpu_mem_cb(insn, mem_hop, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW, t);
        if (!detailed || !pricing) continue;
        if (is_x86) mmu_instrument(insn, bytes, len);
        uint64_t va = qemu_plugin_insn_vaddr(insn);
        unsigned flags;
        uint32_t sym;
        if (va >= kernel_base) {
            flags = VM_F_KERNEL;
            sym = vm_symbol(M, va);
        } else {
            flags = t->kind == VM_USER ? VM_F_USER : 0;
            sym = t->kind == VM_USER ? VM_SYM_USER : VM_SYM_BOOT;
        }
        if (is_atomic(bytes, len)) flags |= VM_F_ATOMIC;
        if (profiling && sample_ps && va >= kernel_base && is_push_or_call(bytes, len)) flags |= STACK_OP;
        /* userdata carries the symbol, the instruction's index in its block and the flags: nothing to
         * allocate (a block has at most 512 instructions: TCG_MAX_INSNS) */
        qemu_plugin_register_vcpu_mem_cb(insn, mem_access, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW,
                                         (void *)(((uintptr_t)sym << 16) | ((uintptr_t)(i & 0xfff) << 4) | flags));
    }
}

static void vcpu_init(qemu_plugin_id_t id, unsigned int vcpu) {
    (void)id;
    (void)vcpu;
    /* after the accelerator's configuration (plugins load before it): a run priced from the start */
    if (pricing && !functional) core_charges();
    if (!is_x86 || r_rax) return;
    GArray *regs = qemu_plugin_get_registers();
    for (guint i = 0; regs && i < regs->len; i++) {
        qemu_plugin_reg_descriptor *d = &g_array_index(regs, qemu_plugin_reg_descriptor, i);
        if (!strcmp(d->name, "rax")) r_rax = d->handle;
        else if (!strcmp(d->name, "rdi")) r_rdi = d->handle;
        else if (!strcmp(d->name, "rsi")) r_rsi = d->handle;
    }
    if (detailed && vm_tlb_on(M)) mmu_setup(M, regs);
    if (regs) g_array_free(regs, TRUE);
    if (!(r_rax && r_rdi && r_rsi)) {
        r_rax = NULL;
        fprintf(stderr, "vmlab-timing: rax/rdi/rsi not readable; phase markers are ignored\n");
    }
}

static void at_exit(qemu_plugin_id_t id, void *ud) {
    (void)id;
    (void)ud;
    bbv_close();
    if (core)
        for (int c = 0; c < vm_ncpus(M); c++) vm_core_end(M, c);
    if (vm_write_results(M, NULL)) fprintf(stderr, "vmlab-timing: cannot write the results\n");
    if (prof_write()) fprintf(stderr, "vmlab-timing: cannot write the profile %s\n", prof_out);
}

static int read_plugin_keys(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[4200], key[64], val[4096];
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "%63s %4095s", key, val) == 2) {
            if (!strcmp(key, "plugin.bbv_dir")) snprintf(bbv_dir, sizeof bbv_dir, "%s", val);
            else if (!strcmp(key, "plugin.interval")) interval = strtoull(val, NULL, 10);
            else if (!strcmp(key, "plugin.global_bbv")) global_bbv = !strcmp(val, "on");
            else if (!strcmp(key, "plugin.mem_hops")) mem_hops = !strcmp(val, "on");
            else if (!strcmp(key, "plugin.stalls")) stalls = !strcmp(val, "on");
            else if (!strcmp(key, "plugin.price_from_marker")) pricing = strcmp(val, "on") != 0;
            else if (!strcmp(key, "plugin.warmup_insns")) warmup_total = warmup_left = strtoull(val, NULL, 10);
            else if (!strcmp(key, "plugin.kernel_up")) kernel_seen = !strcmp(val, "on");
            else if (!strcmp(key, "plugin.region_warmup_slices")) region_warmup_slices = strtoull(val, NULL, 10);
            else if (!strcmp(key, "plugin.functional_slices")) functional_slices = strtoull(val, NULL, 10);
            else if (!strcmp(key, "plugin.stop_after_slices")) stop_after_slices = strtoull(val, NULL, 10);
            else if (!strcmp(key, "plugin.first_slice_done")) first_slice_done = strtoull(val, NULL, 10);
            else if (!strcmp(key, "plugin.checkpoint_points")) checkpoint_points = !strcmp(val, "on");
            else if (!strcmp(key, "plugin.stop_for_exit")) stop_for_exit = !strcmp(val, "on");
            else if (!strcmp(key, "plugin.profile")) snprintf(prof_out, sizeof prof_out, "%s", val);
            else if (!strcmp(key, "plugin.user_symbols")) snprintf(user_syms, sizeof user_syms, "%s", val);
            else if (!strcmp(key, "plugin.pause_extra_ps")) pause_extra_ps = strtoull(val, NULL, 10);
            else if (!strcmp(key, "plugin.sample_ps")) sample_ps = strtoull(val, NULL, 10);
            else if (!strncmp(key, "plugin.", 7)) {
                /* a key the host wrote that this plugin does not know: a run priced otherwise than
                   asked must not start (timing/plugin_config.py PLUGIN_KEYS lists them) */
                fprintf(stderr, "vmlab-timing: %s: unknown key %s\n", path, key);
                fclose(f);
                return -1;
            }
        }
    fclose(f);
    return 0;
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv) {
    const char *config = NULL;
    for (int i = 0; i < argc; i++)
        if (!strncmp(argv[i], "config=", 7)) config = argv[i] + 7;
    if (!config) {
        fprintf(stderr, "vmlab-timing: missing argument config=PATH\n");
        return -1;
    }
    if (!info->system_emulation) {
        fprintf(stderr, "vmlab-timing: needs system emulation (qemu-system-*)\n");
        return -1;
    }
    is_x86 = !strcmp(info->target_name, "x86_64");
    is_alpha = !strcmp(info->target_name, "alpha");
    char err[1024] = "";
    M = vm_model_new(config, err, sizeof err);
    if (!M) {
        fprintf(stderr, "vmlab-timing: %s\n", err);
        return -1;
    }
    if (vm_ncpus(M) != info->system.smp_vcpus) {
        fprintf(stderr, "vmlab-timing: %s: cpus %d, but QEMU runs %d vCPUs\n", config, vm_ncpus(M),
                info->system.smp_vcpus);
        return -1;
    }
    detailed = vm_mode_detailed(M);
    fetch = vm_fetch_on(M) && vm_tlb_on(M) && is_x86;  /* a fetch needs the walker for its physical address */
    kernel_base = vm_kernel_base(M);
    /* the core needs each instruction decoded: x86 through capstone, Alpha by its formats */
    core = detailed && vm_core_on(M) && ((is_x86 && !vm_decode_x86_init()) || is_alpha);
    if (detailed && vm_core_on(M) && !core) {  /* the engine runs at the core's best case: no fallback */
        fprintf(stderr, "vmlab-timing: the core needs a decoder: %s\n",
                is_x86 ? "capstone did not open (libcapstone)" : "none for this guest ISA");
        return -1;
    }
    if (read_plugin_keys(config)) return -1;
    stalls = stalls && detailed;
    if (stalls && !qemu_plugin_vcpu_stall_ps(0)) {
        fprintf(stderr, "vmlab-timing: plugin.stalls on, but this QEMU keeps no per-vCPU clocks "
                        "(-icount ...,vcpu-clock=on); stalls are not charged\n");
        stalls = 0;
    }
    /* until the core charges, the engine counts a cycle an instruction, and the model against it */
    if (core) vm_set_engine_insn_ps(M, vm_cycle_ps(M));
    locklines = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
    sync_tick = calloc(vm_ncpus(M), sizeof *sync_tick);
    uncharged = calloc(vm_ncpus(M), sizeof *uncharged);  /* 0 but in a functional warm-up */
    line_mask = (uint64_t)vm_line_bytes(M) - 1;
    bbv_init(bbv_dir, interval, vm_ncpus(M), global_bbv);
    if (prof_out[0]) {
        char perr[512];
        if (prof_init(M, prof_out, user_syms, pause_extra_ps, detailed ? sample_ps : 0, kernel_base, perr,
                      sizeof perr)) {
            fprintf(stderr, "vmlab-timing: %s\n", perr);
            return -1;
        }
        profiling = 1;
        engine_insn_ps = vm_engine_insn_ps(M);
    }
    mem_hops = mem_hops && !detailed && global_bbv && bbv_on();  /* a fast profile's */
    if (mem_hops) bbv_set_mem(vm_hop_classes(M), vm_line_bytes(M), hop_of);
    if (detailed) bbv_set_clock(model_clock);
    if (checkpoint_points) {
        if (!global_bbv || !bbv_on()) {
            fprintf(stderr, "vmlab-timing: plugin.checkpoint_points needs plugin.global_bbv on\n");
            return -1;
        }
        bbv_set_points(1);
    }
    if (functional_slices) {
        if (!stalls || functional_slices > region_warmup_slices) {
            fprintf(stderr, "vmlab-timing: plugin.functional_slices needs plugin.stalls on and at most "
                            "plugin.region_warmup_slices\n");
            return -1;
        }
        functional = 1;
    }
    if (stop_after_slices || region_warmup_slices) {
        if (!global_bbv) {
            fprintf(stderr, "vmlab-timing: plugin.stop_after_slices needs plugin.global_bbv on\n");
            return -1;
        }
        bbv_set_stop(stop_after_slices, region_warmup_slices ? at_boundary : NULL);
        bbv_set_first_done(first_slice_done);
        bbv_set_stop_for_exit(stop_for_exit);
    }
    plugin_id = id;
    if (!is_x86) pricing = 1;  /* the marker is x86's */
    qemu_plugin_register_vcpu_init_cb(id, vcpu_init);
    qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
    qemu_plugin_register_atexit_cb(id, at_exit, NULL);
    return 0;
}
