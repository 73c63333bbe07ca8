// SPDX-License-Identifier: MIT
// live_levels.h - what the live table's three places share. A block is found in its own header
// or trailer (live_header.c: blocks of malloc, calloc and realloc while guards are on), else in the
// direct map (live.c), else in the second level (live_spill.c).
#ifndef HL_LIVE_LEVELS_H
#define HL_LIVE_LEVELS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/compiler.h"
#include "live.h"

// What a slot of either table holds: the rest goes to the second level's side list.
#if UINTPTR_MAX == 0xffffffffu
#define HL_ADDR_BITS 32 // a 32-bit process: every address
#else
#define HL_ADDR_BITS 47
#endif
#define HL_SIZE_BITS 40
#define HL_MAX_REGIONS 65536 // regions of 16 MiB: 1 TiB of heap address space

// A directory of regions, one per 16 MiB of address space, made on first use (live_regions.c).
#define HL_REGION_SHIFT 24
typedef struct region_dir_s {
    _Atomic(void*)* at; // by address >> HL_REGION_SHIFT; NULL: the directory could not be made
    uint32_t* made;     // directory indices of the regions made, in order
    _Atomic uint32_t nmade;
    _Atomic int lock;
} region_dir_t;

void region_dir_init(region_dir_t* d);
// a's region, made of `bytes` from map() if new; NULL when it cannot be.
void* region_dir_make(region_dir_t* d, uintptr_t a, void* (*map)(size_t), size_t bytes);
void* region_dir_nth(region_dir_t* d, uint32_t i, uintptr_t* base); // i < nmade
void region_dir_reset_after_fork(region_dir_t* d);
static inline void* region_dir_get(const region_dir_t* d, uintptr_t a) {
    return atomic_load_explicit(&d->at[a >> HL_REGION_SHIFT], memory_order_acquire);
}

// Beyond the addresses the direct map covers (never, for a 32-bit process: the shift is made
// on 64 bits so that it is defined there too).
static inline int addr_beyond(uintptr_t a) {
    return ((uint64_t)a >> HL_ADDR_BITS) != 0;
}

static inline int fits(const hl_block_t* b) {
    return !addr_beyond(b->addr) && (b->size >> HL_SIZE_BITS) == 0;
}

// The headers' marks (live_header.c).
extern _Atomic int hl_headers_used; // set once the first header was written
void header_init(void);
void header_insert(const hl_block_t* b); // b->addr has room (live_header_room)
int trailer_insert(const hl_block_t* b); // 1: its trailer holds it; 0: it does not fit one
void trailer_prefetch(uintptr_t addr);    // a hint: addr's mark and glibc's size word before it
// As live_remove / live_lookup (release = 0) for a header block at addr: HL_BLOCK_LIVE (the
// block in *out), HL_BLOCK_FREED (a header block was released there last; *out untouched) or
// HL_BLOCK_EMPTY.
int header_take(uintptr_t addr, hl_block_t* out, int release);
void header_for_each(void (*fn)(const hl_block_t* b, void* arg), void* arg);
void header_reset_after_fork(void);
void header_epoch_rebase(uint32_t now, uint32_t floor);
int header_set_ignored(uintptr_t addr);

extern _Atomic int hl_spill_used; // set once the first block went there

void spill_insert(const hl_block_t* b);
void spill_epoch_rebase(uint32_t now, uint32_t floor);
int spill_set_ignored(uintptr_t addr);
// live_remove / live_lookup (release = 0) for the blocks held here; HL_BLOCK_EMPTY if not here
int spill_take(uintptr_t addr, hl_block_t* out, int release, uint32_t release_stack);
void spill_for_each(void (*fn)(const hl_block_t* b, void* arg), void* arg);
uint64_t spill_count(void);
void spill_lock_all(void);
void spill_unlock_all(void);
void spill_reset_after_fork(void);
void spill_clear(void); // every slot empty (a new session)

#endif
