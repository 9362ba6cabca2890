/* vmlab timing plugin: basic-block vectors for SimPoint (plugin_bbv.c). */
#ifndef VMLAB_PLUGIN_BBV_H
#define VMLAB_PLUGIN_BBV_H

#include <stddef.h>
#include <stdint.h>

/* Vectors into dir: per vCPU every `interval` of its own instructions, and
 * (global) machine-wide every `interval` instructions of all vCPUs together.
 * global needs one vCPU at a time (round-robin TCG under -icount). */
void bbv_init(const char *dir, uint64_t interval, int ncpus, int global);
/* Detailed runs: each slice's line also says every vCPU's modeled clock at
 * its end (ps), read through clock(cpu), so a slice's modeled time is known. */
void bbv_set_clock(uint64_t (*clock)(int cpu));
int bbv_on(void);
#define BBV_MAX_HOPS 16
/* Memory counts on: each slice counts the non-spin accesses that miss a
 * small per-vCPU cache filter, by hop class (0..classes-1, hop(cpu, paddr)
 * of a miss; -1: not node memory): bbv_mem for each access. */
void bbv_set_mem(int classes, unsigned line_bytes, int (*hop)(int cpu, uint64_t paddr));
void bbv_mem(unsigned vcpu, uint64_t paddr);
/* At translation: the block's id (from 1), the same for the same pc and length. */
uint32_t bbv_block_id(uint64_t pc, size_t n);
/* At execution: vcpu ran block bb (n instructions, at pc); spin: it holds a
 * spin-wait hint (x86 PAUSE), so the machine-wide slices leave it out;
 * halt: it ends in a HLT (x86), for the machine's idle time. */
void bbv_exec(unsigned vcpu, uint32_t bb, uint32_t n, uint64_t pc, int spin, int halt);
/* Regions (SimPoint's checkpoints and measured slices): at machine-wide
 * slice boundary `after` (where slice `after` starts; 0: never) the machine
 * is stopped for the host (qemu_plugin_machine_stop, series patch 0008),
 * asked again at every later block while a modelled disk request keeps it
 * from stopping; the stop is logged to bbv.stops. boundary(b, insns), if
 * given, is called at every boundary b with the machine's instructions so far. */
void bbv_set_stop(uint64_t after, void (*boundary)(uint64_t b, uint64_t insns));
/* The first slice already ran n non-spin instructions before this run (a
 * checkpoint taken n late): its boundary comes n sooner, as in the profile. */
void bbv_set_first_done(uint64_t n);
/* The stop ends a run that will not be saved (a region's end): never
 * refused, a disk request outstanding or not. */
void bbv_set_stop_for_exit(int on);
/* Checkpoint points on (sampled runs): every vCPU's TLB is reset at a run's
 * first block and after each boundary's first stoppable block, where a
 * checkpoint would be taken, so runs restored from checkpoints go on as the
 * profile did; each slice's row says how far into it its start boundary's
 * point came (`point_late`, -1: not within it). */
void bbv_set_points(int on);
/* At exit: the last partial intervals, and the files closed. */
void bbv_close(void);

#endif
