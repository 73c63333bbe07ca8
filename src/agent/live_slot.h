// SPDX-License-Identifier: MIT
// live_slot.h - one live-table slot, packed into 24 bytes (a program may hold millions of
// blocks and every malloc and free touches one slot; its size decides the cache misses):
//   w0: address (47 bits) | fn (5) | state (2) | guarded (1) | internal (1) | seq bits 32-39 (8)
//   w1: requested size (40 bits) | owner thread index (24)
//   w2: seq bits 0-31 (32) | allocation stack (32); once FREED, seq bits 0-31 hold the stack
//       that released the block
// w0 is never 0 for a used slot and never looks like a heap address (the state bits are set),
// so a slot cannot pass for a pointer to the leak scan.
#ifndef HL_LIVE_SLOT_H
#define HL_LIVE_SLOT_H

#include <string.h>

#include "agent.h"

#define HL_ADDR_BITS 47
#define HL_SIZE_BITS 40

typedef struct slot_s {
    uint64_t w0, w1, w2;
} slot_t;

static inline int fits(const hl_block_t* b) {
    return (b->addr >> HL_ADDR_BITS) == 0 && (b->size >> HL_SIZE_BITS) == 0;
}

static inline int w0_state(uint64_t w0) { return (int)((w0 >> 52) & 3); }
static inline uintptr_t w0_addr(uint64_t w0) { return (uintptr_t)(w0 & ((1ull << HL_ADDR_BITS) - 1)); }
static inline int slot_state(const slot_t* s) { return w0_state(s->w0); }
static inline uintptr_t slot_addr(const slot_t* s) { return w0_addr(s->w0); }
static inline uint64_t w0_with_state(uint64_t w0, int state) {
    return (w0 & ~(3ull << 52)) | ((uint64_t)state << 52);
}
static inline void slot_set_state(slot_t* s, int state) { s->w0 = w0_with_state(s->w0, state); }

static inline slot_t pack(const hl_block_t* b, int state) {
    slot_t s;
    s.w0 = (uint64_t)b->addr | ((uint64_t)b->fn & 31) << 47 | (uint64_t)(state & 3) << 52 |
           (uint64_t)b->guarded << 54 | (uint64_t)b->is_internal << 55 |
           ((b->seq >> 32) & 0xff) << 56;
    s.w1 = (uint64_t)b->size | (uint64_t)(b->thread & 0xffffff) << HL_SIZE_BITS;
    s.w2 = (b->seq & 0xffffffffu) | (uint64_t)b->stack << 32;
    return s;
}

// The interface's view. A FREED block reports the stack that released it in `thread`.
static inline void unpack(const slot_t* s, hl_block_t* b) {
    memset(b, 0, sizeof *b);
    b->addr = slot_addr(s);
    b->fn = (s->w0 >> 47) & 31;
    b->state = (s->w0 >> 52) & 3;
    b->guarded = (s->w0 >> 54) & 1;
    b->is_internal = (s->w0 >> 55) & 1;
    b->size = s->w1 & ((1ull << HL_SIZE_BITS) - 1);
    b->stack = (uint32_t)(s->w2 >> 32);
    if (b->state == HL_BLOCK_FREED) {
        b->thread = (uint32_t)s->w2;
        b->seq = 0;
    } else {
        b->thread = (uint32_t)(s->w1 >> HL_SIZE_BITS);
        b->seq = (s->w0 >> 56) << 32 | (s->w2 & 0xffffffffu);
    }
}

#endif
