// SPDX-License-Identifier: MIT
// live_spill.h - the live table's second level (live_spill.c), behind the direct map (live.c).
#ifndef HL_LIVE_SPILL_H
#define HL_LIVE_SPILL_H

#include "agent.h"

// What a slot of either level holds: the rest goes to the second level's side list.
#define HL_ADDR_BITS 47
#define HL_SIZE_BITS 40

static inline int fits(const hl_block_t* b) {
    return (b->addr >> HL_ADDR_BITS) == 0 && (b->size >> HL_SIZE_BITS) == 0;
}

extern _Atomic int hl_spill_used; // set once the first block went there

void spill_insert(const hl_block_t* b);
// live_remove / live_lookup (release = 0) for the blocks held here; HL_BLOCK_EMPTY if not here
int spill_take(uintptr_t addr, hl_block_t* out, int release, uint32_t release_stack);
void spill_for_each(void (*fn)(const hl_block_t* b, void* arg), void* arg);
uint64_t spill_count(void);
void spill_lock_all(void);
void spill_unlock_all(void);
void spill_reset_after_fork(void);

#endif
