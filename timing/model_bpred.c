/* vmlab timing model: branch prediction for the dataflow core (model_exec.c).
 * The plugin sees blocks, not branches: a block ends in at most one branch,
 * and the next block's address says where it went. So the prediction is
 * made and checked when the next block starts (vm_core_begin), which is when
 * the model learns the outcome; what a misprediction costs is charged there,
 * from when the branch resolved.
 *
 *   conditional   gshare (a table of 2-bit counters indexed by the branch's
 *                 address xor the global history), or the 21264's tournament:
 *                 a global predictor as above, a local one (1024 10-bit
 *                 histories per branch address, 1024 3-bit counters) and a
 *                 choice table of 2-bit counters indexed by the global history
 *   indirect      a direct-mapped target buffer (BTB): right if the target is
 *                 the one it last went to
 *   return        a return stack pushed by calls
 *   direct jumps and calls are always right (their target is in the bytes).
 *
 * A block's branch is identified by the block's end (its fall-through), which
 * is unique per branch. When the next block is neither the fall-through nor
 * the target of a direct branch, an interrupt came between: nothing is
 * learned or charged (a call still pushes its return address). A block a
 * fault cut short never reached its branch (model_exec.c cut_at): nothing is
 * resolved. An interrupt right after a return or an indirect branch cannot
 * be told from its target: it is counted as a misprediction.
 */
#include "model_int.h"

int bp_resolve(model_t *m, cpu_t *p, const vm_block_t *prev, uint64_t next_pc) __attribute__((visibility("hidden")));

static inline void bump(uint8_t *c, int up, uint8_t max) {
    if (up && *c < max) (*c)++;
    else if (!up && *c) (*c)--;
}

/* Predicts the conditional branch at pc and learns its outcome; 1 if it was
 * mispredicted. */
static int conditional(const corecfg_t *g, core_t *k, uint64_t pc, int taken) {
    uint64_t hmask = g->bp_history >= 64 ? ~0ull : (1ull << g->bp_history) - 1, emask = g->bp_entries - 1;
    uint64_t h = k->ghist & hmask;
    int pred;
    if (g->predictor == BP_TOURNAMENT) {
        uint8_t *gc = &k->pht[h & emask], *ch = &k->choice[h & emask];
        uint16_t *lh = &k->lhist[(pc >> 2) & (LOCAL_HIST - 1)];
        uint8_t *lc = &k->lpht[*lh & (LOCAL_HIST - 1)];
        int gp = *gc >= 2, lp = *lc >= 4;
        pred = *ch >= 2 ? gp : lp;
        if (gp != lp) bump(ch, gp == taken, 3);
        bump(gc, taken, 3);
        bump(lc, taken, 7);
        *lh = (uint16_t)(((*lh << 1) | (unsigned)taken) & (LOCAL_HIST - 1));
    } else {
        uint8_t *cn = &k->pht[((pc >> 2) ^ h) & emask];
        pred = *cn >= 2;
        bump(cn, taken, 3);
    }
    k->ghist = (k->ghist << 1) | (uint64_t)taken;
    return pred != taken;
}

static void ras_push(const corecfg_t *g, core_t *k, uint64_t ret) {
    k->ras[k->ras_top % g->ras] = ret;
    k->ras_top++;
}

/* An indirect branch at pc went to target: right if the BTB said so. */
static int indirect(const corecfg_t *g, core_t *k, uint64_t pc, uint64_t target) {
    size_t i = (size_t)((pc >> 2) ^ (pc >> 14)) & (g->btb - 1);
    int hit = k->btb_tag[i] == pc && k->btb_target[i] == target;
    k->btb_tag[i] = pc;
    k->btb_target[i] = target;
    return !hit;
}

/* 1: mispredicted, 0: predicted, -1: not an outcome of the branch. */
int bp_resolve(model_t *m, cpu_t *p, const vm_block_t *prev, uint64_t next_pc) {
    const corecfg_t *g = &m->core;
    core_t *k = &p->k;
    const vm_insn_t *in = &prev->in[prev->n - 1];
    uint64_t pc = prev->next_pc;
    int miss = 0;
    switch (in->br) {
    case VM_B_COND:
        if (next_pc != prev->next_pc && next_pc != in->target) return -1;
        miss = conditional(g, k, pc, next_pc != prev->next_pc);
        break;
    case VM_B_JUMP:
        if (next_pc != in->target) return -1;
        break;
    case VM_B_CALL:  /* it ran (the block ran whole): its return address is pushed, interrupted or not */
        ras_push(g, k, prev->next_pc);
        if (next_pc != in->target) return -1;
        break;
    case VM_B_IJUMP:
        miss = indirect(g, k, pc, next_pc);
        break;
    case VM_B_ICALL:
        miss = indirect(g, k, pc, next_pc);
        ras_push(g, k, prev->next_pc);
        break;
    case VM_B_RET:
        if (k->ras_top) {
            k->ras_top--;
            miss = k->ras[k->ras_top % g->ras] != next_pc;
        } else {
            miss = 1;
        }
        break;
    default:
        return -1;
    }
    p->c.branches++;
    p->c.mispredicts += (uint64_t)miss;
    return miss;
}
