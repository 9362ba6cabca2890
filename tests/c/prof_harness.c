/* The engine side of timing/plugin_prof.c for tests/test_profile_attribution.py:
 * the QEMU plugin calls it makes, with an engine clock the test sets and a
 * guest memory (kernel stack and text) the test writes. */
#include <glib.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

static uint64_t now_ps;
static uint64_t mem_base;
static uint8_t mem[1 << 16];

uint64_t qemu_plugin_vcpu_clock_ps(void) { return now_ps; }

bool qemu_plugin_read_memory_vaddr(uint64_t addr, GByteArray *data, size_t len) {
    if (addr < mem_base || addr + len > mem_base + sizeof mem) return false;
    g_byte_array_set_size(data, 0);
    g_byte_array_append(data, mem + (addr - mem_base), (guint)len);
    return true;
}

void h_clock(uint64_t ps) { now_ps = ps; }
void h_mem_base(uint64_t base) { mem_base = base; }
void h_poke(uint64_t addr, const uint8_t *bytes, size_t n) { memcpy(mem + (addr - mem_base), bytes, n); }
