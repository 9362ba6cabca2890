/* vmlab timing model: x86-64 instructions decoded through capstone (see
 * decode.h). Capstone gives the operands with their access (read, write)
 * and the implicit registers; this file turns them into the core's view:
 * address registers apart from operand registers, the class from the
 * mnemonic and capstone's groups, and the branch kind.
 *
 * Choices (docs/timing-model.md, "The core"):
 * - a zeroing idiom (xor/sub/pxor/xorps of a register with itself) reads
 *   nothing, as the renamer breaks the dependence;
 * - a partial-register write is a write of the whole register;
 * - push, pop, call, ret and leave address memory through rsp (rbp)
 *   implicitly: those are their address registers;
 * - integer SIMD is one class (vec), whatever the operation;
 * - macro-fusion (cmp+jcc as one) is not modeled: both take a dispatch slot.
 */
#include "decode.h"

#include <capstone/capstone.h>
#include <string.h>

static csh cs;
static cs_insn *ci;
static uint8_t regmap[X86_REG_ENDING];

static int gpr_of(const char *n) {
    static const char *const base[16][4] = {
        {"rax", "eax", "ax", "al"}, {"rcx", "ecx", "cx", "cl"}, {"rdx", "edx", "dx", "dl"},
        {"rbx", "ebx", "bx", "bl"}, {"rsp", "esp", "sp", "spl"}, {"rbp", "ebp", "bp", "bpl"},
        {"rsi", "esi", "si", "sil"}, {"rdi", "edi", "di", "dil"}};
    for (int r = 0; r < 8; r++)
        for (int w = 0; w < 4; w++)
            if (!strcmp(n, base[r][w])) return r;
    if (!strcmp(n, "ah")) return 0;
    if (!strcmp(n, "ch")) return 1;
    if (!strcmp(n, "dh")) return 2;
    if (!strcmp(n, "bh")) return 3;
    if (n[0] == 'r' && n[1] >= '0' && n[1] <= '9') {  /* r8..r15 with b/w/d */
        int v = n[1] - '0';
        const char *s = n + 2;
        if (*s >= '0' && *s <= '9') v = v * 10 + (*s++ - '0');
        if (v >= 8 && v <= 15 && (!*s || ((*s == 'b' || *s == 'w' || *s == 'd') && !s[1]))) return v;
    }
    return -1;
}

/* capstone's register -> the scoreboard's (decode.h), VM_REG_NONE if none
 * (rip, segments, control and debug registers) */
static uint8_t map_name(const char *n) {
    int g = gpr_of(n);
    if (g >= 0) return (uint8_t)g;
    if (!strcmp(n, "rflags") || !strcmp(n, "eflags") || !strcmp(n, "flags")) return VM_R_FLAGS;
    if ((!strncmp(n, "xmm", 3) || !strncmp(n, "ymm", 3) || !strncmp(n, "zmm", 3)) && n[3]) {
        int v = 0;
        for (const char *s = n + 3; *s; s++) {
            if (*s < '0' || *s > '9') return VM_REG_NONE;
            v = v * 10 + (*s - '0');
        }
        return v < 32 ? (uint8_t)(VM_R_VEC + v) : VM_REG_NONE;
    }
    if (!strncmp(n, "st(", 3) || !strncmp(n, "mm", 2) || !strcmp(n, "fpsw") || !strcmp(n, "fpcw") ||
        !strcmp(n, "fptag"))
        return VM_R_X87;
    if (n[0] == 'k' && n[1] >= '0' && n[1] <= '7' && !n[2]) return VM_R_MASK;
    return VM_REG_NONE;
}

int vm_decode_x86_init(void) {
    if (ci) return 0;
    if (cs_open(CS_ARCH_X86, CS_MODE_64, &cs) != CS_ERR_OK) return -1;
    cs_option(cs, CS_OPT_DETAIL, CS_OPT_ON);
    ci = cs_malloc(cs);
    if (!ci) return -1;
    for (int r = 0; r < X86_REG_ENDING; r++) {
        const char *n = cs_reg_name(cs, (unsigned)r);
        regmap[r] = n ? map_name(n) : VM_REG_NONE;
    }
    return 0;
}

static void add(uint8_t *list, uint8_t *n, uint8_t cap, unsigned capreg) {
    uint8_t r = capreg < X86_REG_ENDING ? regmap[capreg] : VM_REG_NONE;
    if (r == VM_REG_NONE) return;
    for (uint8_t i = 0; i < *n; i++)
        if (list[i] == r) return;
    if (*n < cap) list[(*n)++] = r;
}

static int starts(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }
static int ends(const char *s, const char *p) {
    size_t a = strlen(s), b = strlen(p);
    return a >= b && !strcmp(s + a - b, p);
}
static int fp_suffix(const char *s) { return ends(s, "sd") || ends(s, "ss") || ends(s, "pd") || ends(s, "ps"); }

/* The loaded value is the result: moves and pops (and their vector forms). */
static int pure_load(const char *mn) {
    static const char *const names[] = {"mov", "movzx", "movsx", "movsxd", "movabs", "movq", "movd", "movdqa",
                                        "movdqu", "movaps", "movups", "movapd", "movupd", "movsd", "movss",
                                        "lddqu", "movntdqa", "pop", "lodsb", "lodsw", "lodsd", "lodsq",
                                        "vmovdqa", "vmovdqu", "vmovaps", "vmovups", "vmovapd", "vmovupd",
                                        "vmovq", "vmovd", "vmovsd", "vmovss", "vmovdqa64", "vmovdqu64",
                                        "vmovdqa32", "vmovdqu32", "vmovdqu8", "vmovdqu16", "vpbroadcastq",
                                        "vbroadcastss", "vbroadcastsd"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(mn, names[i])) return 1;
    return 0;
}

/* What waits for everything before it (VM_I_SERIAL), by the Intel SDM's list
 * of serialising instructions (vol. 3A, 9.3: CPUID, IRET, INVD, INVLPG,
 * LGDT, LIDT, LLDT, LTR, MOV to a control or debug register, WBINVD, WRMSR,
 * XSETBV), MFENCE, and what enters or leaves the kernel (SYSCALL, SYSRET,
 * SYSENTER, SYSEXIT, INT, UD2: not in the list, but each changes privilege
 * and its microcode drains the pipeline; its cost, the serial class's, is an
 * estimate), HLT, port I/O and the extended-state saves. Not barriers:
 * CLI/STI, STAC/CLAC, SWAPGS, RDMSR, reading a control register, SFENCE
 * (stores drain in order anyway); LFENCE and RDTSCP wait for the
 * instructions before them, not for stores (VM_I_NOSB); RDTSC and RDTSCP
 * read the clock (VM_I_CLOCK). */
static unsigned serial_flags(unsigned id, const cs_x86 *x) {
    switch (id) {
    case X86_INS_CPUID: case X86_INS_IRET: case X86_INS_IRETD: case X86_INS_IRETQ: case X86_INS_INVD:
    case X86_INS_INVLPG: case X86_INS_LGDT: case X86_INS_LIDT: case X86_INS_LLDT: case X86_INS_LTR:
    case X86_INS_WBINVD: case X86_INS_WRMSR: case X86_INS_XSETBV: case X86_INS_MFENCE:
    case X86_INS_SYSCALL: case X86_INS_SYSRET: case X86_INS_SYSENTER: case X86_INS_SYSEXIT: case X86_INS_INT:
    case X86_INS_INT3: case X86_INS_INTO: case X86_INS_UD2: case X86_INS_HLT:
    case X86_INS_IN: case X86_INS_OUT: case X86_INS_INSB: case X86_INS_INSW: case X86_INS_INSD:
    case X86_INS_OUTSB: case X86_INS_OUTSW: case X86_INS_OUTSD:
    case X86_INS_XSAVE: case X86_INS_XSAVEOPT: case X86_INS_XRSTOR: case X86_INS_XSAVEC: case X86_INS_XSAVES:
    case X86_INS_XRSTORS: case X86_INS_FXSAVE: case X86_INS_FXRSTOR: case X86_INS_FXSAVE64:
    case X86_INS_FXRSTOR64: case X86_INS_XSAVE64: case X86_INS_XRSTOR64:
        return VM_I_SERIAL;
    case X86_INS_LFENCE:
        return VM_I_SERIAL | VM_I_NOSB;
    case X86_INS_RDTSCP:
        return VM_I_SERIAL | VM_I_NOSB | VM_I_CLOCK;
    case X86_INS_RDTSC:
        return VM_I_CLOCK;
    case X86_INS_MOV:  /* to a control or debug register */
        if (x->op_count == 2 && x->operands[0].type == X86_OP_REG &&
            x->operands[0].reg >= X86_REG_CR0 && x->operands[0].reg <= X86_REG_DR15)
            return VM_I_SERIAL;
        return 0;
    default:
        return 0;
    }
}

static int in_group(const cs_detail *d, uint8_t g) {
    for (uint8_t i = 0; i < d->groups_count; i++)
        if (d->groups[i] == g) return 1;
    return 0;
}

static int vector_group(const cs_detail *d) {
    for (uint8_t i = 0; i < d->groups_count; i++) {
        uint8_t g = d->groups[i];
        if ((g >= X86_GRP_3DNOW && g <= X86_GRP_XOP && g != X86_GRP_CMOV && g != X86_GRP_MODE32 &&
             g != X86_GRP_MODE64 && g != X86_GRP_BMI && g != X86_GRP_BMI2 && g != X86_GRP_ADX &&
             g != X86_GRP_RTM && g != X86_GRP_HLE && g != X86_GRP_FSGSBASE) ||
            g == X86_GRP_FPU)
            return 1;
    }
    return 0;
}

/* The class of the operation (a load-op's operation, after its load). */
static uint8_t op_class(unsigned id, const char *mn, const cs_x86 *x, const cs_detail *d) {
    switch (id) {
    case X86_INS_IMUL: case X86_INS_MUL: case X86_INS_MULX:
        return VM_X_MUL;
    case X86_INS_DIV: case X86_INS_IDIV:
        return x->op_count && x->operands[0].size == 8 ? VM_X_DIV64 : VM_X_DIV32;
    default:
        break;
    }
    const char *m = mn[0] == 'v' ? mn + 1 : mn;
    if (m[0] == 'f' && in_group(d, X86_GRP_FPU)) {  /* x87 */
        if (starts(m, "fdiv") || starts(m, "fsqrt")) return VM_X_FPDIV;
        if (starts(m, "fmul")) return VM_X_FPMUL;
        return VM_X_FPADD;
    }
    if (strstr(m, "sqrt") || (starts(m, "div") && fp_suffix(m))) return VM_X_FPDIV;
    if ((starts(m, "mul") && fp_suffix(m)) || starts(m, "fmadd") || starts(m, "fmsub") || starts(m, "fnmadd") ||
        starts(m, "fnmsub"))
        return VM_X_FPMUL;
    if (((starts(m, "add") || starts(m, "sub") || starts(m, "min") || starts(m, "max")) && fp_suffix(m)) ||
        starts(m, "cvt") || starts(m, "comis") || starts(m, "ucomis") || starts(m, "round") || starts(m, "hadd"))
        return VM_X_FPADD;
    if (vector_group(d)) return VM_X_VEC;
    return VM_X_ALU;
}

static void unknown(vm_insn_t *in) {
    memset(in, 0, sizeof *in);
    in->cls = VM_X_ALU;
    in->flags = VM_I_UNKNOWN;
}

int vm_decode_x86(const uint8_t *bytes, size_t len, uint64_t pc, vm_insn_t *in) {
    const uint8_t *code = bytes;
    size_t size = len;
    uint64_t addr = pc;
    if (!ci || !cs_disasm_iter(cs, &code, &size, &addr, ci)) {
        unknown(in);
        return -1;
    }
    memset(in, 0, sizeof *in);
    const cs_detail *d = ci->detail;
    const cs_x86 *x = &d->x86;
    unsigned id = ci->id;
    const char *mn = ci->mnemonic;
    int lea = id == X86_INS_LEA, reads_mem = 0, writes_mem = 0;
    /* a zeroing idiom: the same register twice, nothing read */
    int zero_op = id == X86_INS_XOR || id == X86_INS_SUB || id == X86_INS_PXOR || id == X86_INS_XORPS ||
                  id == X86_INS_XORPD || id == X86_INS_VPXOR || id == X86_INS_VXORPS || id == X86_INS_VXORPD ||
                  id == X86_INS_SBB || id == X86_INS_PSUBQ || id == X86_INS_VPSUBQ;
    /* the same register twice as the sources: xor eax,eax; vpxor xmm0,xmm1,xmm1 */
    int zeroing = zero_op && ((x->op_count == 2 && x->operands[0].type == X86_OP_REG &&
                               x->operands[1].type == X86_OP_REG && x->operands[0].reg == x->operands[1].reg) ||
                              (x->op_count == 3 && x->operands[1].type == X86_OP_REG &&
                               x->operands[2].type == X86_OP_REG && x->operands[1].reg == x->operands[2].reg));
    for (uint8_t i = 0; i < x->op_count; i++) {
        const cs_x86_op *o = &x->operands[i];
        if (o->type == X86_OP_REG) {
            if ((o->access & CS_AC_READ) && !zeroing) add(in->src, &in->nsrc, sizeof in->src, o->reg);
            if (o->access & CS_AC_WRITE || (!o->access && i == 0)) add(in->dst, &in->ndst, sizeof in->dst, o->reg);
        } else if (o->type == X86_OP_MEM) {
            uint8_t *list = lea ? in->src : in->addr, *n = lea ? &in->nsrc : &in->naddr;
            uint8_t cap = lea ? sizeof in->src : sizeof in->addr;
            if (o->mem.base != X86_REG_INVALID && o->mem.base != X86_REG_RIP) add(list, n, cap, o->mem.base);
            if (o->mem.index != X86_REG_INVALID) {
                add(list, n, cap, o->mem.index);
                in->flags |= VM_I_INDEX;
            }
            if (!lea) {
                reads_mem |= (o->access & CS_AC_READ) != 0;
                writes_mem |= (o->access & CS_AC_WRITE) != 0;
            }
        }
    }
    /* a move to memory (capstone 4 marks some VEX stores' memory operand read) */
    if (pure_load(mn) && x->op_count >= 2 && x->operands[0].type == X86_OP_MEM && id != X86_INS_POP) {
        reads_mem = 0;
        writes_mem = 1;
    }
    /* implicit registers; the stack instructions address through rsp (rbp) */
    int stack = id == X86_INS_PUSH || id == X86_INS_POP || id == X86_INS_CALL || id == X86_INS_RET ||
                id == X86_INS_LEAVE || id == X86_INS_PUSHFQ || id == X86_INS_POPFQ || id == X86_INS_ENTER;
    for (uint8_t i = 0; i < d->regs_read_count; i++) {
        unsigned r = d->regs_read[i];
        if (stack && (r == X86_REG_RSP || r == X86_REG_RBP)) add(in->addr, &in->naddr, sizeof in->addr, r);
        else add(in->src, &in->nsrc, sizeof in->src, r);
    }
    for (uint8_t i = 0; i < d->regs_write_count; i++) add(in->dst, &in->ndst, sizeof in->dst, d->regs_write[i]);
    /* the pointers it steps, from their own values: rsp of a stack instruction; rsi, rdi (and rcx under a rep)
     * of a string instruction */
    int string = id == X86_INS_MOVSB || id == X86_INS_MOVSW || id == X86_INS_MOVSQ || id == X86_INS_STOSB ||
                 id == X86_INS_STOSW || id == X86_INS_STOSD || id == X86_INS_STOSQ || id == X86_INS_LODSB ||
                 id == X86_INS_LODSW || id == X86_INS_LODSD || id == X86_INS_LODSQ || id == X86_INS_SCASB ||
                 id == X86_INS_SCASW || id == X86_INS_SCASD || id == X86_INS_SCASQ || id == X86_INS_CMPSB ||
                 id == X86_INS_CMPSW || id == X86_INS_CMPSD || id == X86_INS_CMPSQ ||
                 ((id == X86_INS_MOVSD || id == X86_INS_MOVSS) && x->op_count == 2 &&
                  x->operands[0].type == X86_OP_MEM && x->operands[1].type == X86_OP_MEM);
    for (uint8_t i = 0; i < in->ndst;) {
        uint8_t r = in->dst[i];
        if ((stack && r == regmap[X86_REG_RSP]) || (string && (r == regmap[X86_REG_RSI] ||
                                                               r == regmap[X86_REG_RDI] ||
                                                               r == regmap[X86_REG_RCX]))) {
            if (in->nupd < sizeof in->upd) in->upd[in->nupd++] = r;
            in->dst[i] = in->dst[--in->ndst];
        } else {
            i++;
        }
    }
    /* what capstone 4 leaves out: cmpxchg writes rax and the flags, xadd the flags; x87 arithmetic reads and
     * writes its stack */
    if (id == X86_INS_CMPXCHG) {
        add(in->dst, &in->ndst, sizeof in->dst, X86_REG_RAX);
        add(in->dst, &in->ndst, sizeof in->dst, X86_REG_EFLAGS);
    } else if (id == X86_INS_XADD) {
        add(in->dst, &in->ndst, sizeof in->dst, X86_REG_EFLAGS);
    }
    if (in_group(d, X86_GRP_FPU) && mn[0] == 'f' && !in->ndst) {
        in->dst[in->ndst++] = VM_R_X87;
        if (in->nsrc < sizeof in->src) in->src[in->nsrc++] = VM_R_X87;
    }
    if (stack) {
        if (id == X86_INS_POP || id == X86_INS_RET || id == X86_INS_LEAVE || id == X86_INS_POPFQ) reads_mem = 1;
        else writes_mem = 1;
    }
    /* its access will come (a nop or a prefetch with a memory operand reads nothing) */
    if ((reads_mem || writes_mem) && id != X86_INS_NOP && !starts(mn, "prefetch") && !starts(mn, "clflush") &&
        !starts(mn, "clwb"))
        in->flags |= VM_I_MEM;
    in->cls = op_class(id, mn, x, d);
    if (reads_mem && (pure_load(mn) || id == X86_INS_LEAVE)) {
        in->cls = VM_X_LOAD;
        in->flags |= VM_I_PURELOAD;
    } else if (writes_mem && !reads_mem && (in->cls == VM_X_ALU || in->cls == VM_X_VEC) &&
               (pure_load(mn) || starts(mn, "mov") || stack || starts(mn, "stos"))) {
        in->cls = VM_X_STORE;
    }
    /* branches */
    int imm = x->op_count == 1 && x->operands[0].type == X86_OP_IMM;
    if (id == X86_INS_LOOP || id == X86_INS_LOOPE || id == X86_INS_LOOPNE || id == X86_INS_JRCXZ ||
        id == X86_INS_JECXZ) {
        in->br = VM_B_COND;
    } else if (in_group(d, X86_GRP_CALL)) {
        in->br = imm ? VM_B_CALL : VM_B_ICALL;
    } else if (in_group(d, X86_GRP_RET)) {
        in->br = VM_B_RET;
    } else if (in_group(d, X86_GRP_JUMP)) {
        in->br = id == X86_INS_JMP ? (imm ? VM_B_JUMP : VM_B_IJUMP) : VM_B_COND;
    }
    if (in->br) {
        if (imm) in->target = (uint64_t)x->operands[0].imm;
        if (!reads_mem || in->br == VM_B_RET) in->cls = VM_X_BRANCH;
        in->flags &= (uint8_t)~VM_I_PURELOAD;
    }
    unsigned sf = serial_flags(id, x);
    in->flags |= (uint8_t)sf;
    if ((sf & VM_I_SERIAL) && !(sf & VM_I_NOSB)) {
        in->cls = VM_X_SERIAL;
        if (in->br == VM_B_NONE && (in_group(d, X86_GRP_INT) || in_group(d, X86_GRP_IRET) || id == X86_INS_SYSCALL ||
                                    id == X86_INS_SYSRET || id == X86_INS_SYSENTER || id == X86_INS_SYSEXIT))
            in->br = VM_B_OTHER;
    }
    return 0;
}
