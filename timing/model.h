/* vmlab memory-system timing model: prices guest memory accesses on a
 * simulated topology (an out-of-order core's outstanding misses, store
 * buffer and L2 streamer: model_core.h; private L1D/L2 per CPU, a full-map MESI directory at
 * each line's home node, torus or socket hops, DRAM per node, queueing on
 * links and memory controllers). Pure C with no QEMU dependency, so it can
 * be driven by the QEMU plugin (plugin.c) or by a test harness.
 *
 * Deterministic: the same access sequence gives the same figures. Single
 * writer: the caller serialises accesses (QEMU's round-robin TCG under
 * -icount does).
 */
#ifndef VMLAB_MODEL_H
#define VMLAB_MODEL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define VM_F_WRITE  1u   /* store */
#define VM_F_ATOMIC 2u   /* read-modify-write (lock prefix, xchg, ll/sc): needs the line exclusive */
#define VM_F_KERNEL 4u   /* executed by kernel code */
#define VM_F_USER   8u   /* executed by user code (neither: firmware / decompressor at boot) */
#define VM_F_WIDE   16u  /* an 8-byte load: its value may be an address (see vm_access) */
#define VM_F_IO     32u  /* went to MMIO (no home node): the core executes its instruction, nothing priced */

/* Execution kinds for the user/kernel split. */
enum { VM_BOOT = 0, VM_KERNEL = 1, VM_USER = 2, VM_KINDS = 3 };

/* Reserved symbol indices; kernel text symbols follow. */
enum { VM_SYM_BOOT = 0, VM_SYM_USER = 1, VM_SYM_KERNEL_OTHER = 2, VM_SYM_FIRST = 3 };

/* Phase markers (the guest's magic instruction carries one of these). */
enum { VM_PHASE_BEGIN = 1, VM_PHASE_END = 2 };

typedef struct model model_t;

/* Reads the run's config (written by config_text() in timing/__init__.py).
 * On error returns NULL and writes one line into err. */
model_t *vm_model_new(const char *config_path, char *err, size_t errlen);
void vm_model_free(model_t *m);

int vm_ncpus(const model_t *m);
int vm_mode_detailed(const model_t *m);   /* 0: fast (counts + BBVs only) */
uint64_t vm_kernel_base(const model_t *m);
uint32_t vm_line_bytes(const model_t *m);
uint64_t vm_cycle_ps(const model_t *m);  /* the topology's cycle (the engine's time per instruction at 1 IPC) */
/* Hops from cpu's node to paddr's home node (-1: no node's memory), and how
 * many such classes the machine has (its largest hop count + 1): the sampled
 * profile's memory-by-distance counts (plugin_bbv.c), in every mode. */
int vm_hop_class(const model_t *m, int cpu, uint64_t paddr);
int vm_hop_classes(const model_t *m);

/* Symbol of a kernel text address (VM_SYM_KERNEL_OTHER if none). */
uint32_t vm_symbol(const model_t *m, uint64_t vaddr);
/* The symbol table: how many (reserved ones first), each one's name and start address. */
uint32_t vm_nsymbols(const model_t *m);
const char *vm_symbol_name(const model_t *m, uint32_t sym);
uint64_t vm_symbol_addr(const model_t *m, uint32_t sym);

/* n instructions executed by cpu, of kind VM_BOOT/KERNEL/USER. Returns the
 * stall they cause (ps): a full reorder window behind a miss still out. */
uint64_t vm_insns(model_t *m, int cpu, uint32_t n, int kind);

/* One data access at guest-physical paddr (virtual vaddr). Returns the
 * modeled stall in picoseconds beyond the instruction's own cycle: with an
 * out-of-order core only what the core must wait for now (model_core.h),
 * with a blocking one the access's whole latency beyond an L1 hit.
 * An 8-byte load (VM_F_WIDE) whose data is still arriving may hold an address
 * a later access depends on: then *value_slot (if value_slot is not NULL) is
 * set to where the caller writes the value the load returned, before its
 * next call for this cpu; otherwise it is set to NULL. Asking for the value
 * only then keeps the caller from reading every load's value. Accesses
 * outside every node's memory are counted and cost nothing. */
uint64_t vm_access(model_t *m, int cpu, uint64_t paddr, uint64_t vaddr, unsigned flags, uint32_t sym,
                   uint64_t **value_slot);

/* Count an access that went to MMIO (no home node). */
void vm_io_access(model_t *m, int cpu);

/* Guest phase marker on cpu: op VM_PHASE_BEGIN / VM_PHASE_END. */
void vm_phase(model_t *m, int cpu, int op, uint64_t id, uint64_t instance);

/* The engine's clock of cpu (ps) when it is ahead of the model's: time the
 * model does not price passed (the engine's PAUSE cost, a halted vCPU's
 * jump to the machine's time on waking). The model's clock moves up to it,
 * so the misses in flight and the bandwidth calendars see the CPUs where the
 * guest has them. Never moves a clock back. */
void vm_sync_time(model_t *m, int cpu, uint64_t engine_ps);

/* Address translation (model_tlb.h), with a [tlb] in the config. The walker
 * reads the guest's page tables through its host: root() gives the running
 * CPU's page-table base (CR3) and VM_MMU_* flags, read() 8 bytes of
 * guest-physical RAM; each returns 0 when it cannot. Without them (or with
 * paging off) nothing is translated and nothing is priced for it. */
enum { VM_MMU_PAGING = 1, VM_MMU_LA57 = 2 };
typedef struct {
    int (*root)(void *ctx, int cpu, uint64_t *cr3, unsigned *flags);
    int (*read)(void *ctx, uint64_t pa, uint64_t *val);
    void *ctx;
} vm_mmu_t;
void vm_set_mmu(model_t *m, const vm_mmu_t *mmu);
int vm_tlb_on(const model_t *m);     /* translation is modeled */
int vm_fetch_on(const model_t *m);   /* instruction fetch is modeled (an l1i in the config) */

/* What the guest flushed on cpu: a CR3 write (every non-global entry and
 * the paging-structure caches), INVLPG vaddr (its page's entries, in every
 * size, and the paging-structure caches), a CR4.PGE toggle (everything). */
enum { VM_FLUSH_NONGLOBAL = 1, VM_FLUSH_PAGE = 2, VM_FLUSH_ALL = 3 };
void vm_tlb_flush(model_t *m, int cpu, int what, uint64_t vaddr);

/* cpu fetches a block's bytes of code at virtual pc: translated through the
 * ITLB, each line through the L1I, the L2 and the code page's home node.
 * sym, kind: the block's, as for vm_access.
 * Returns the stall: the front end waits for the translation and the
 * block's slowest line (its lines are fetched together). */
uint64_t vm_fetch(model_t *m, int cpu, uint64_t pc, uint32_t bytes, uint32_t sym, int kind);

/* Instructions the model has executed on every CPU together (a warm-up's
 * length as the core counts it: it executes a block's instructions lazily). */
uint64_t vm_total_insns(const model_t *m);

/* Modeled time of a cpu so far, in picoseconds. */
uint64_t vm_cpu_time_ps(const model_t *m, int cpu);
/* Move every time a CPU's state holds (its clock, misses in flight, store
 * buffer) d earlier: the end of a functional warm-up (timing/plugin.c). */
void vm_shift_time(model_t *m, int cpu, uint64_t d);

/* Writes every result as JSON to the config's `out` path (or to path if
 * not NULL). Returns 0 on success. */
int vm_write_results(model_t *m, const char *path);
/* s as a JSON string (quotes and backslashes escaped, control bytes dropped): the results' and the profile's. */
void vm_json_str(FILE *f, const char *s);
/* The end of a warm-up of `insns` instructions (plugin.warmup_insns): what
 * the machine holds (caches, directory, outstanding misses, streams, queues)
 * stays warm; every figure counted so far is dropped from the results. */
void vm_warmup_done(model_t *m, uint64_t insns);

/* Bytes of model state allocated (caches, directory, tables), and bytes of
 * the directory actually touched so far (it is allocated lazily). */
size_t vm_state_bytes(const model_t *m);

/* --- the core (model_exec.c): instructions executed as the modeled core does ---
 * With a core in the config (`width`, `exec` lines: topologies/core.py), a
 * caller that decodes the guest's instructions (timing/decode.h) hands the
 * model each translated block's instructions; the model keeps, per CPU, when
 * every architectural register is ready, dispatches `width` instructions a
 * cycle into a reorder window, issues each when its sources are ready and an
 * execution unit of its class is free, completes it after its class's
 * latency (a load: when its data arrives, from the memory side below),
 * retires in order, and predicts the block-ending branches. The CPU's clock
 * is the dispatch clock: it stalls on a full window, a misprediction, a
 * barrier or a full store buffer. Without a decoder (or a core) vm_insns and
 * vm_access price a plain access stream as before. */
/* The classes of instruction, in the order of the config's `exec` lines
 * (topologies/core.py CLASSES: a test checks it against this list). */
#define VM_EXEC_CLASSES(X) X(ALU, "alu") X(MUL, "mul") X(DIV32, "div32") X(DIV64, "div64") X(FPADD, "fpadd") \
    X(FPMUL, "fpmul") X(FPDIV, "fpdiv") X(VEC, "vec") X(LOAD, "load") X(STORE, "store") X(BRANCH, "branch") \
    X(SERIAL, "serial")
#define VM_X_ENUM(id, name) VM_X_##id,
enum { VM_EXEC_CLASSES(VM_X_ENUM) VM_X_CLASSES };
#undef VM_X_ENUM
/* How a block-ending instruction leaves it (predicted at the next block). */
enum { VM_B_NONE, VM_B_COND, VM_B_JUMP, VM_B_IJUMP, VM_B_CALL, VM_B_ICALL, VM_B_RET, VM_B_OTHER };
#define VM_NREG 64         /* architectural registers the scoreboard tracks (decode.h numbers them) */
#define VM_REG_NONE 255
#define VM_I_PURELOAD 1u   /* the loaded value is the result (mov, pop): no operation after the load */
#define VM_I_INDEX 2u      /* the address has an index register (the longer load-to-use) */
#define VM_I_UNKNOWN 4u    /* not decoded: priced as a one-cycle ALU operation, counted */
#define VM_I_SERIAL 8u     /* waits for every earlier instruction and store (and later ones wait for it) */
#define VM_I_MEM 16u       /* accesses memory: its access comes (a block cut short by a fault stops there) */
#define VM_I_NOSB 32u      /* with VM_I_SERIAL: waits for earlier instructions, not for stores to drain (lfence) */
#define VM_I_CLOCK 64u     /* reads the clock (rdtsc): the core executes up to it before it runs */
typedef struct {
    uint8_t cls, br, flags, nsrc, ndst, naddr, nupd;
    uint8_t src[6], dst[3], addr[2];
    uint8_t upd[3];        /* pointers it steps (rsp, rsi, rdi, rcx of a rep): ready a cycle after their own value */
    uint64_t target;       /* a direct branch's target */
} vm_insn_t;
typedef struct {
    uint64_t pc, next_pc;  /* next_pc: the fall-through */
    uint32_t n, sym;
    int kind;
    vm_insn_t in[];
} vm_block_t;

int vm_core_on(const model_t *m);      /* the config has a core (width, exec) and it is out-of-order */
uint64_t vm_insn_ps(const model_t *m); /* the engine's time per instruction: the core's best case */
/* The engine counts ps per instruction (its cycle, or the core's best case
 * once the core's stalls are charged): vm_insns advances the clock by that,
 * and the core's calls return what its clock moved beyond it. */
void vm_set_engine_insn_ps(model_t *m, uint64_t ps);
uint64_t vm_engine_insn_ps(const model_t *m);  /* what it counts now (its cycle unless set) */
/* cpu starts block b: the rest of its previous block is executed, that
 * block's branch resolved against b's pc (a misprediction redirects the
 * front end), b becomes current. A previous block left for a block that does
 * not follow it, with a memory instruction whose access never came, was cut
 * short there by a fault: only the instructions before it ran
 * (vm_core_executed says how many). Returns the time to charge the engine:
 * what the core's clock moved beyond the engine's time per instruction. */
uint64_t vm_core_begin(model_t *m, int cpu, const vm_block_t *b);
/* An access by instruction idx of cpu's current block: the instructions
 * before it are executed, then it, with this access (a second access of an
 * instruction already executed is its store or second load). Returns the
 * time to charge, as above. *value_slot as vm_access's (always NULL here:
 * registers carry the dependences). */
uint64_t vm_core_access(model_t *m, int cpu, uint32_t idx, uint64_t paddr, uint64_t vaddr, unsigned flags,
                        uint32_t sym);
/* Instructions up to and including idx of cpu's current block executed, before
 * instruction idx runs in the engine: a serialising instruction (lfence before
 * rdtsc) so that what it waits for is charged before the guest reads its
 * clock. Returns the time to charge, as above. */
uint64_t vm_core_upto(model_t *m, int cpu, uint32_t idx);
/* How many instructions of the block before the current one the core
 * executed (its length, or less when a fault cut it short). */
uint32_t vm_core_executed(const model_t *m, int cpu);
/* The rest of cpu's current block executed (at the end of the run). */
uint64_t vm_core_end(model_t *m, int cpu);

#endif
