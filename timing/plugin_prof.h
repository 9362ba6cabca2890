/* vmlab timing plugin: the profile on the guest clock (plugin_prof.c).
 *
 * Every vCPU's modeled time split over the symbols its instructions
 * belonged to, as the engine's clock advanced: each block's instructions at
 * the engine's time per instruction, its PAUSEs at their extra latency, and
 * the stalls the model charged (the core's beyond its best case, data
 * accesses with their walks, lock hand-offs, instruction fetch), each
 * column apart; a vCPU's halted time is idle. The symbol of a block is
 * looked up once, at translation. The split is checked against the
 * engine's clock wherever the plugin reads it (a wake after HLT, a phase
 * marker, the model's periodic sync): what the columns do not explain is
 * kept as `drift`, per vCPU. Call paths are sampled every `sample_ps` of a
 * vCPU's busy time (detailed mode): in user mode its symbol (no walk), in
 * the kernel at its next push or call (the access gives the stack
 * pointer), by reading the kernel stack for return addresses whose call
 * instruction calls the frame below.
 */
#ifndef VMLAB_PLUGIN_PROF_H
#define VMLAB_PLUGIN_PROF_H

#include <stdint.h>

#include "model.h"

enum { PROF_CORE, PROF_CORE_PREV, PROF_MEM, PROF_FETCH, PROF_LOCK };

/* out: the profile's JSON; user_symbols: "start end name dso" lines of the
 * guest programs' text symbols (or NULL); pause_extra_ps: what a PAUSE adds
 * to the engine's clock beyond its instruction; sample_ps: 0 for no stacks. */
int prof_init(model_t *m, const char *out, const char *user_symbols, uint64_t pause_extra_ps,
              uint64_t sample_ps, uint64_t kernel_base, char *err, size_t errlen);
int prof_on(void);
/* At translation: the profile's symbol of a block at pc (kernel text from
 * the model's System.map, user text from the programs' tables). */
uint32_t prof_symbol(uint64_t pc, int user);
/* At the start of a block's execution, before anything is charged: n
 * instructions, npause PAUSEs, halt: it ends in a HLT. */
void prof_block(unsigned vcpu, uint32_t sym, uint32_t n, uint32_t npause, int halt, uint64_t insn_ps);
/* A stall the plugin just put on vcpu's clock (PROF_CORE_PREV: the
 * previous block's rest, which the core charges when the next one starts). */
void prof_charge(unsigned vcpu, int what, uint64_t ps);
/* The engine's clock of vcpu, read by the plugin inside a callback: the
 * split is checked against it. */
void prof_observe(unsigned vcpu, uint64_t clock_ps);
/* A phase marker (model.h VM_PHASE_BEGIN / END): the machine's phase. */
void prof_phase(unsigned vcpu, int op, uint64_t id, uint64_t instance);
/* A kernel push or call by vcpu stored at rsp: a stack sample if one is due. */
void prof_stack(unsigned vcpu, uint64_t rsp);
int prof_sample_due(unsigned vcpu);
/* At exit. */
int prof_write(void);

#endif
