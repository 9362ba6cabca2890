/* vmlab timing model: Alpha instructions decoded by their fixed formats
 * (Alpha Architecture Reference Manual, "Instruction Formats"; decode.h).
 * Every instruction is 32 bits: the opcode in bits 31:26, Ra in 25:21,
 * Rb in 20:16; operate instructions take Rb or an 8-bit literal (bit 12)
 * and write Rc (4:0); memory instructions address Rb + a displacement;
 * branches test Ra and go to pc + 4 + 4 * disp21. R31 and F31 read as zero.
 */
#include "decode.h"

#include <string.h>

static void reg(uint8_t *list, uint8_t *n, uint8_t cap, unsigned r, int fp) {
    if (r == 31 || *n >= cap) return;
    list[(*n)++] = (uint8_t)(fp ? VM_R_ALPHA_FP + r : r);
}

int vm_decode_alpha(const uint8_t *b, size_t len, uint64_t pc, vm_insn_t *in) {
    memset(in, 0, sizeof *in);
    in->cls = VM_X_ALU;
    if (len != 4) {
        in->flags = VM_I_UNKNOWN;
        return -1;
    }
    uint32_t w = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    unsigned op = w >> 26, ra = (w >> 21) & 31, rb = (w >> 16) & 31, rc = w & 31, lit = (w >> 12) & 1;
    unsigned fn = (w >> 5) & 0x7f;
    int32_t disp21 = (int32_t)((w & 0x1fffff) << 11) >> 11;
    switch (op) {
    case 0x00: case 0x1e:  /* CALL_PAL, HW_REI: into and out of the PALcode, serialising */
        in->cls = VM_X_SERIAL;
        in->flags = VM_I_SERIAL;
        in->br = VM_B_OTHER;
        return 0;
    case 0x19: case 0x1d:  /* HW_MFPR, HW_MTPR: an internal processor register read or written (PALcode only) */
        reg(in->src, &in->nsrc, sizeof in->src, rb, 0);
        reg(in->dst, &in->ndst, sizeof in->dst, ra, 0);
        return 0;
    case 0x1b: case 0x1f:  /* HW_LD, HW_ST: PALcode's physical loads and stores */
        in->cls = op == 0x1b ? VM_X_LOAD : VM_X_STORE;
        in->flags = VM_I_MEM | (op == 0x1b ? VM_I_PURELOAD : 0);
        reg(in->addr, &in->naddr, sizeof in->addr, rb, 0);
        if (op == 0x1b) reg(in->dst, &in->ndst, sizeof in->dst, ra, 0);
        else reg(in->src, &in->nsrc, sizeof in->src, ra, 0);
        return 0;
    case 0x08: case 0x09:  /* LDA, LDAH: an address computed, nothing loaded */
        reg(in->src, &in->nsrc, sizeof in->src, rb, 0);
        reg(in->dst, &in->ndst, sizeof in->dst, ra, 0);
        return 0;
    case 0x0a: case 0x0b: case 0x0c: case 0x28: case 0x29: case 0x2a: case 0x2b:  /* integer loads */
    case 0x20: case 0x21: case 0x22: case 0x23:                                   /* FP loads */
        in->cls = VM_X_LOAD;
        in->flags = VM_I_PURELOAD | (ra != 31 ? VM_I_MEM : 0);  /* a load into r31/f31: a prefetch hint */
        reg(in->addr, &in->naddr, sizeof in->addr, rb, 0);
        reg(in->dst, &in->ndst, sizeof in->dst, ra, op >= 0x20 && op <= 0x23);
        return 0;
    case 0x0d: case 0x0e: case 0x0f: case 0x2c: case 0x2d: case 0x2e: case 0x2f:  /* integer stores */
    case 0x24: case 0x25: case 0x26: case 0x27:                                   /* FP stores */
        in->cls = VM_X_STORE;
        in->flags = VM_I_MEM;
        reg(in->addr, &in->naddr, sizeof in->addr, rb, 0);
        reg(in->src, &in->nsrc, sizeof in->src, ra, op >= 0x24 && op <= 0x27);
        if (op == 0x2e || op == 0x2f) reg(in->dst, &in->ndst, sizeof in->dst, ra, 0);  /* STx_C: success */
        return 0;
    case 0x10: case 0x11: case 0x12: case 0x13: case 0x1c:  /* integer operate (0x13: multiplies) */
        in->cls = op == 0x13 ? VM_X_MUL : VM_X_ALU;
        reg(in->src, &in->nsrc, sizeof in->src, ra, op == 0x1c && fn >= 0x70);  /* FTOIx read an FP register */
        if (!lit) reg(in->src, &in->nsrc, sizeof in->src, rb, 0);
        /* CMOVxx (INTL 0x14..0x66, low bits 100 or 110): Rc keeps its value when the test fails */
        if (op == 0x11 && (fn & 0x0f) >= 0x04 && (fn & 0x0f) <= 0x06 && (fn & 0x01) == 0)
            reg(in->src, &in->nsrc, sizeof in->src, rc, 0);
        reg(in->dst, &in->ndst, sizeof in->dst, rc, 0);
        if (op == 0x1c && fn >= 0x30 && fn <= 0x3f) in->cls = VM_X_VEC;  /* MVI: PERR, MINxx, MAXxx, PKxx */
        return 0;
    case 0x14: case 0x15: case 0x16: case 0x17: {  /* FP operate; 0x14 holds ITOFx and SQRTx */
        unsigned f = (w >> 5) & 0x3f;  /* the operation, without the rounding and trap qualifiers */
        int from_int = op == 0x14 && (f == 0x04 || f == 0x14 || f == 0x24);  /* ITOFS/F/T */
        reg(in->src, &in->nsrc, sizeof in->src, ra, !from_int);
        reg(in->src, &in->nsrc, sizeof in->src, rb, 1);
        reg(in->dst, &in->ndst, sizeof in->dst, rc, 1);
        if (op == 0x14) in->cls = from_int ? VM_X_ALU : VM_X_FPDIV;  /* SQRT */
        else if (op == 0x17) in->cls = VM_X_FPADD;                    /* copies, conversions, moves */
        else if (f == 0x02 || f == 0x22) in->cls = VM_X_FPMUL;        /* MULS/MULT (MULF/MULG) */
        else if (f == 0x03 || f == 0x23) in->cls = VM_X_FPDIV;        /* DIVS/DIVT */
        else in->cls = VM_X_FPADD;
        return 0;
    }
    case 0x18:  /* MB, WMB, TRAPB, EXCB: barriers; RPCC reads the cycle counter */
        if ((w & 0xffff) == 0xc000) {  /* RPCC */
            reg(in->dst, &in->ndst, sizeof in->dst, ra, 0);
            return 0;
        }
        if ((w & 0xffff) == 0x4000 || (w & 0xffff) == 0x4400) {  /* MB, WMB: the memory barriers */
            in->cls = VM_X_SERIAL;
            in->flags = VM_I_SERIAL;
        } else if ((w & 0xffff) == 0x0000 || (w & 0xffff) == 0x0400) {
            in->flags = VM_I_SERIAL;  /* TRAPB, EXCB: wait for what is before them, cost nothing more */
        }
        return 0;
    case 0x1a: {  /* JMP, JSR, RET, JSR_COROUTINE: to Rb, the return address into Ra */
        unsigned hint = (w >> 14) & 3;
        in->cls = VM_X_BRANCH;
        reg(in->src, &in->nsrc, sizeof in->src, rb, 0);
        reg(in->dst, &in->ndst, sizeof in->dst, ra, 0);
        in->br = hint == 2 ? VM_B_RET : hint == 1 || hint == 3 ? VM_B_ICALL : VM_B_IJUMP;
        return 0;
    }
    case 0x30: case 0x34:  /* BR, BSR */
        in->cls = VM_X_BRANCH;
        reg(in->dst, &in->ndst, sizeof in->dst, ra, 0);
        in->br = op == 0x34 || ra != 31 ? VM_B_CALL : VM_B_JUMP;
        in->target = pc + 4 + (uint64_t)((int64_t)disp21 * 4);
        return 0;
    default:
        break;
    }
    if (op >= 0x31 && op <= 0x3f) {  /* conditional branches: FP (0x31-0x33, 0x35-0x37), integer (0x38-0x3f) */
        in->cls = VM_X_BRANCH;
        reg(in->src, &in->nsrc, sizeof in->src, ra, op < 0x38);
        in->br = VM_B_COND;
        in->target = pc + 4 + (uint64_t)((int64_t)disp21 * 4);
        return 0;
    }
    in->flags = VM_I_UNKNOWN;
    return -1;
}
