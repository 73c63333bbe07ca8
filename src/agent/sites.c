// SPDX-License-Identifier: MIT
// sites.c - the writer's numbering of allocation sites: the k-th distinct (size, stack) pair
// written in an ALLOC or INHERIT record is site k (format.h). A FREE names its block's site in
// one small number instead of a size and a stack, and a program's repeating pattern of frees
// stays a repeating pattern of bytes. Writer thread only (or under the writer lock).
//
// The reader numbers sites by the same rule, so the writer must know every pair it has
// written: if the table cannot grow, numbering goes on without it (sites_broken) and FREEs are
// written in full from then on.
#define _GNU_SOURCE
#include <string.h>

#include "../common/compiler.h"
#include "os.h"
#include "sites.h"

typedef struct site_slot_s {
    uint64_t size; // 0 with number 0: empty
    uint32_t stack;
    uint32_t number;
} site_slot_t;

static site_slot_t* slots;
static uint32_t mask;    // capacity - 1
static uint32_t defined; // sites numbered so far (the last number given)
static int is_broken;

static inline uint32_t hash_of(uint64_t size, uint32_t stack) {
    uint64_t h = (size * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)stack * 0xC2B2AE3D27D4EB4Full);
    return (uint32_t)(h >> 32);
}

static HL_COLD int grow(void) {
    uint32_t cap = slots ? (mask + 1) * 2 : 4096;
    // Probed at random: past a few MiB in huge pages, so a probe is not a page walk as well
    // (a program with millions of call paths has as many sites).
    site_slot_t* fresh = os_map_dense_huge((size_t)cap * sizeof *fresh);
    if (!fresh)
        return -1;
    if (slots) {
        for (uint32_t i = 0; i <= mask; i++) {
            if (!slots[i].number)
                continue;
            uint32_t j = hash_of(slots[i].size, slots[i].stack) & (cap - 1);
            while (fresh[j].number)
                j = (j + 1) & (cap - 1);
            fresh[j] = slots[i];
        }
        os_unmap(slots, (size_t)(mask + 1) * sizeof *slots);
    }
    slots = fresh;
    mask = cap - 1;
    return 0;
}

// The pair's slot, or the empty slot where it belongs.
static inline site_slot_t* find(uint64_t size, uint32_t stack) {
    uint32_t i = hash_of(size, stack) & mask;
    for (;; i = (i + 1) & mask) {
        site_slot_t* s = &slots[i];
        if (!s->number || (s->size == size && s->stack == stack))
            return s;
    }
}

void sites_note(uint64_t size, uint32_t stack) {
    if (is_broken)
        return;
    if ((!slots || defined + 1 > (mask + 1) / 2) && grow() != 0) {
        is_broken = 1;
        return;
    }
    site_slot_t* s = find(size, stack);
    if (!s->number)
        *s = (site_slot_t){.size = size, .stack = stack, .number = ++defined};
}

uint32_t sites_number(uint64_t size, uint32_t stack) {
    if (is_broken || !slots)
        return 0;
    return find(size, stack)->number;
}

// A new trace (a fork child's) numbers from 1 again.
void sites_reset(void) {
    if (slots)
        memset(slots, 0, (size_t)(mask + 1) * sizeof *slots);
    defined = 0;
    is_broken = 0;
}
