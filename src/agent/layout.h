// SPDX-License-Identifier: MIT
// layout.h - where the agent puts its own bytes around a program's block (layout.c): the guard
// after it, the 16-byte header before a large one (over glibc, a record's word at the end of a
// smaller one's chunk), and with heap checking on, red zones on both sides. The one place that
// knows how far the allocator's pointer is from the program's.
//
//   plain      [block][guard]                               allocator's pointer = block
//   trailed    [block][guard][rounding][record 8]           allocator's pointer = block
//   headed     [header 16][block][guard] (rounded: see below)  allocator's pointer = block - 16
//   checked    [slack][front record 16][red zone][block][red zone]
//              allocator's pointer = block - front, front = the record + the zone rounded up to
//              the block's alignment; the record holds front (checked against the block's
//              address) so that a release finds the allocator's pointer whatever the alignment.
#ifndef HL_LAYOUT_H
#define HL_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "../common/format.h"
#include "live.h"
#include "options.h"
#include "real.h"

// With guards on, the real block is size + guard bytes; a size near SIZE_MAX must still fail
// the way the allocator fails it, not wrap around.
static inline size_t layout_padded(size_t size) {
    size_t g = (size_t)hl_opt.guard;
    return size > SIZE_MAX - g ? SIZE_MAX : size + g;
}

// A block with `agent_bytes` of the agent's own around it, rounded to 16 bytes so that the
// program's pointer stays 16-aligned in every allocator's size classes. Over glibc's malloc,
// rounded to what fills one of its chunks: a chunk is a multiple of 16 bytes and begins with a
// size_t of glibc's, so a request 16k - sizeof(size_t) bytes long wastes nothing (rounded to 16,
// a header block of 32 bytes took a chunk of 80, where 64 hold it). A size near SIZE_MAX fails
// as the allocator fails it.
static inline size_t layout_filled(size_t block, size_t agent_bytes) {
    size_t word = hl_real.is_glibc ? sizeof(size_t) : 0;
    size_t extra = agent_bytes + 15 + word;
    if (block > SIZE_MAX - extra)
        return SIZE_MAX;
    return ((block + extra) & ~(size_t)15) - word;
}

// A block of malloc, calloc or realloc below header_min: block and guard, and while trailers are
// on (over glibc only) the trailer's word after them, filling the chunk: the word is the chunk's
// last, and the guard's line holds it for most blocks.
static inline size_t layout_plain(size_t size) {
    if (!hl_trailers_on)
        return layout_padded(size);
    return layout_filled(size, (size_t)hl_opt.guard + HL_TRAILER);
}

// A block of malloc, calloc or realloc while guards are on: header, block and guard. A block of
// 0 bytes is laid out as one of 1: its header and guard would fill a chunk to the byte, and its
// pointer be the next chunk's address, which glibc's top pointer and free lists hold (a leaked
// malloc(0) was found reachable through them).
static inline size_t layout_headed_size(size_t size) {
    return layout_filled(size + (size == 0), HL_HEADER + (size_t)hl_opt.guard);
}

// The guard after a block (hl_opt.guard bytes, the red zone after it when checking). The
// default 8 bytes are one unaligned word, filled and checked inline on every call; other sizes
// go out of line.
#define HL_GUARD_WORD_SIZE 8
static inline uint8_t guard_byte(size_t i) {
    return (uint8_t)(0xA5 ^ (i * 0x3B));
}
static inline uint64_t guard_word(void) {
    uint64_t w = 0;
    for (size_t i = 0; i < HL_GUARD_WORD_SIZE; i++)
        w |= (uint64_t)guard_byte(i) << (8 * i);
    return w; // a constant once inlined
}
void guard_fill_bytes(uint8_t* g);
int guard_bytes_are_intact(const uint8_t* g);

static inline void guard_fill(void* p, size_t size) {
    uint8_t* g = (uint8_t*)p + size;
    if (__builtin_expect(hl_opt.guard == HL_GUARD_WORD_SIZE, 1)) {
        uint64_t w = guard_word();
        __builtin_memcpy(g, &w, sizeof w);
        return;
    }
    guard_fill_bytes(g);
}

static inline int guard_is_intact(const hl_block_t* b) {
    const uint8_t* g = (const uint8_t*)b->addr + b->size;
    if (__builtin_expect(hl_opt.guard == HL_GUARD_WORD_SIZE, 1)) {
        uint64_t w;
        __builtin_memcpy(&w, g, sizeof w);
        return w == guard_word();
    }
    return guard_bytes_are_intact(g);
}

// Bytes found changed where the agent left known ones (hl_change_t into an ERROR_CHANGE record).
typedef struct hl_change_s {
    int64_t offset;  // of the first changed byte from the block's start (negative: before it)
    uint64_t length; // from the first changed byte to the last
    uint32_t n;      // bytes kept below, at most HL_CHANGE_BYTES
    uint8_t seen[HL_CHANGE_BYTES], expected[HL_CHANGE_BYTES];
} hl_change_t;

// Checked blocks (hl_opt.checking): the bytes from the allocator's pointer to the program's for
// an alignment, the allocator's size for a block of size bytes (SIZE_MAX when too big).
size_t layout_front(size_t align);
size_t layout_checked_size(size_t front, size_t size);
// Writes the front record and the red zone before the block at p.
void layout_checked_fill(char* p, size_t front);
// The allocator's pointer of the checked block at addr, or NULL when its front record was
// overwritten (the block then cannot be given back safely).
char* layout_checked_real(uintptr_t addr);
// 1 and *c when bytes changed: in the guard or red zone after b, in the zone before it (with
// its front record), in its size bytes painted with v.
int layout_after_change(const hl_block_t* b, hl_change_t* c);
int layout_before_change(const hl_block_t* b, hl_change_t* c);
int layout_paint_change(uintptr_t addr, size_t size, uint8_t v, hl_change_t* c);

#endif
