/* Coherence invariants of the timing model (timing/model_*.c) under random
 * traffic (built with them by tests/test_timing_model.py, with tiny caches to
 * force evictions). model_int.h: the model's internals, to check them. */
#include "model_int.h"
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
static int check(model_t *m, uint64_t *lines, int nl, long step) {
  for (int k = 0; k < nl; k++) {
    uint64_t line = lines[k], pa = line << m->line_shift;
    size_t g = pa >> GRAN_SHIFT;
    uint64_t idx = (m->gran_off[g] + (pa & ((1ull << GRAN_SHIFT) - 1))) >> m->line_shift;
    uint64_t e = m->dir[idx];
    int nE = 0, nS = 0; uint64_t holders = 0;
    for (int c = 0; c < m->ncpus; c++) {
      cpu_t *p = &m->cpu[c];
      int i2 = c_find(&p->l2, line), i1 = c_find(&p->l1, line);
      int s2 = i2 >= 0 ? (int)(c_set(&p->l2, line)[i2] & 3) : 0;
      int s1 = i1 >= 0 ? (int)(c_set(&p->l1, line)[i1] & 3) : 0;
      if (i1 >= 0 && i2 < 0) { printf("step %ld: line %lx cpu %d in L1 not L2\n", step, line, c); return 1; }
      if (i1 >= 0 && s1 != s2) { printf("step %ld: line %lx cpu %d L1 st %d L2 st %d\n", step, line, c, s1, s2); return 1; }
      if (i2 >= 0) { holders |= 1ull << c; if (s2 >= S_E) nE++; else nS++; }
    }
    if ((e & ~DIR_EXCL) != holders) { printf("step %ld: line %lx dir %lx holders %lx\n", step, line, e, holders); return 1; }
    if (nE > 1 || (nE && nS)) { printf("step %ld: line %lx nE %d nS %d\n", step, line, nE, nS); return 1; }
    if (!!(e & DIR_EXCL) != (nE == 1)) { printf("step %ld: line %lx excl bit %d nE %d\n", step, line, !!(e&DIR_EXCL), nE); return 1; }
  }
  return 0;
}
int main(int argc, char **argv) {
  char err[512];
  model_t *m = vm_model_new(argv[1], err, sizeof err);
  if (!m) { puts(err); return 1; }
  int nl = 300; uint64_t lines[300];
  srand(1);
  for (int k = 0; k < nl; k++) { uint64_t pa = ((uint64_t)rand() % (m->ngran)) << GRAN_SHIFT; pa += (rand() % 64) * 64 * 16; lines[k] = pa >> 6; }
  for (long s = 0; s < 2000000; s++) {
    int c = rand() % m->ncpus; int k = rand() % nl; int r = rand() % 10;
    unsigned f = r < 6 ? 0 : r < 9 ? VM_F_WRITE : VM_F_ATOMIC;
    vm_access(m, c, lines[k] << 6, lines[k] << 6, f | VM_F_USER, 1, NULL);
    if (s % 7 == 0) vm_insns(m, c, 3, VM_USER);
    if (s % 97 == 0 && check(m, lines, nl, s)) return 1;
  }
  vm_model_free(m);
  puts("ok");
  return 0;
}
