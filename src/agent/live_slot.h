// SPDX-License-Identifier: MIT
// live_slot.h - a slot of the live table's second level (live_spill.c), packed into 24 bytes:
//   w0: address (47 bits) | fn (5) | state (2) | guarded (1) | internal (1)
//   w1: requested size (40 bits) | owner thread index (24)
//   w2: 0, or once FREED the stack that released the block (32) | allocation stack (32)
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

static inline int slot_state(const slot_t* s) {
    return (int)((s->w0 >> 52) & 3);
}
static inline uintptr_t slot_addr(const slot_t* s) {
    return (uintptr_t)(s->w0 & ((1ull << HL_ADDR_BITS) - 1));
}
static inline void slot_set_state(slot_t* s, int state) {
    s->w0 = (s->w0 & ~(3ull << 52)) | ((uint64_t)state << 52);
}

static inline slot_t pack(const hl_block_t* b, int state) {
    slot_t s;
    s.w0 = (uint64_t)b->addr | ((uint64_t)b->fn & 31) << 47 | (uint64_t)(state & 3) << 52 |
           (uint64_t)b->guarded << 54 | (uint64_t)b->is_internal << 55;
    s.w1 = (uint64_t)b->size | (uint64_t)(b->thread & 0xffffff) << HL_SIZE_BITS;
    s.w2 = (uint64_t)b->stack << 32;
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
    b->thread = b->state == HL_BLOCK_FREED ? (uint32_t)s->w2 : (uint32_t)(s->w1 >> HL_SIZE_BITS);
}

#endif
