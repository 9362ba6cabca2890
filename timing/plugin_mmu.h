/* vmlab timing plugin: the QEMU side of address translation (plugin_mmu.c). */
#ifndef VMLAB_PLUGIN_MMU_H
#define VMLAB_PLUGIN_MMU_H

#include <glib.h>
#include <qemu-plugin.h>

#include "model.h"

/* plugin.c: a register of the running vCPU, as 8 bytes (little-endian). */
uint64_t read_reg(struct qemu_plugin_register *r);

/* Finds the control registers and GPRs in the vCPU's register list and
 * gives the model its page-table reader (x86-64 guests). Returns 0 if the
 * registers are not there: translation stays unpriced. */
int mmu_setup(model_t *m, GArray *regs);

/* At translation: an instruction that flushes TLBs (MOV to CR3 or CR4,
 * INVLPG, INVPCID) gets a callback that tells the model. */
void mmu_instrument(struct qemu_plugin_insn *insn, const uint8_t *b, size_t n);

#endif
