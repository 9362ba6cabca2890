/* vmlab timing model: decoding a guest instruction once, when its block is
 * translated, into what the dataflow core needs (model.h vm_insn_t): the
 * registers it reads to form its address, the ones it reads for its
 * operation and the ones it writes (flags included), its execution class,
 * whether the loaded value is its result, and how it leaves the block.
 * QEMU-free, so the C tests decode known bytes with it.
 *
 * Register numbers (the scoreboard's, below VM_NREG):
 *   x86-64  0-15 rax rcx rdx rbx rsp rbp rsi rdi r8-r15 (every width of
 *           each: a partial write counts as the whole), 16 the flags,
 *           17-48 xmm/ymm/zmm 0-31, 49 the x87/MMX stack, 50 the AVX-512 masks
 *   Alpha   0-30 the integer registers, 32-62 the FP registers (r31 and f31
 *           read as zero and are no dependence)
 *
 *   decode_x86.c   through capstone (Debian's libcapstone-dev)
 *   decode_alpha.c the Alpha's fixed formats, by the opcode masks of the
 *                  Alpha Architecture Reference Manual
 */
#ifndef VMLAB_DECODE_H
#define VMLAB_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

enum { VM_R_FLAGS = 16, VM_R_VEC = 17, VM_R_X87 = 49, VM_R_MASK = 50, VM_R_ALPHA_FP = 32 };

/* Opens the x86-64 decoder (0; -1 if capstone cannot). */
int vm_decode_x86_init(void);
/* Decodes the instruction of len bytes at pc. Returns 0; -1 when it cannot:
 * *in is then a one-cycle ALU operation with no registers, VM_I_UNKNOWN. */
int vm_decode_x86(const uint8_t *bytes, size_t len, uint64_t pc, vm_insn_t *in);
/* The Alpha's 4-byte little-endian instruction at pc. */
int vm_decode_alpha(const uint8_t *bytes, size_t len, uint64_t pc, vm_insn_t *in);

#endif
