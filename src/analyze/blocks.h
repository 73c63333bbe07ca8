// SPDX-License-Identifier: MIT
// blocks.h - the live blocks of a trace being read, by id (thread << 40 | seq), for both passes.
// Entries are the caller's structs of one size whose first member is `uint64_t key`; key 0 marks
// a free entry (ids are never 0: threads count from 1).
//
// A program frees most blocks soon after making them, so each thread's latest ids live in a
// window indexed by seq: no hashing, no probing, and a trace read in order walks it in order.
// The window grows while a quarter of it is alive or it keeps leaving live blocks behind; a
// block it leaves behind (alive across that many of its thread's allocations) moves to an
// open-addressing table, as does a block older than its thread's window (one inherited at
// fork).
#ifndef HL_BLOCKS_H
#define HL_BLOCKS_H

#include <stddef.h>
#include <stdint.h>

typedef struct bs_window_s {
    uint64_t base; // the block with seq s is ring[s & (cap - 1)] while base <= s < base + cap
    size_t cap;    // a power of two; 0 until the thread's first block
    size_t live;   // blocks in the ring
    size_t moved;  // blocks moved to the table since the ring last grew
    char* ring;
} bs_window_t;

typedef struct bs_s {
    size_t esize;
    bs_window_t* windows; // by thread index
    size_t nwindows;
    char* table; // the older blocks
    size_t table_cap, in_table;
    size_t used; // live blocks
    size_t most; // the most live at once
} bs_t;

typedef struct bs_iter_s {
    size_t window, i;
} bs_iter_t;

static inline uint64_t bs_key(uint64_t thread, uint64_t seq) { return (thread << 40) | seq; }

void bs_init(bs_t* s, size_t esize);
void bs_free(bs_t* s);
// The entry for key, zeroed but for its key (a key already there is reused: a repeated id in a
// damaged trace); NULL when memory runs out.
void* bs_put(bs_t* s, uint64_t key);
void* bs_find(const bs_t* s, uint64_t key);
void bs_del(bs_t* s, void* entry);
// Every live entry, in no order: for (bs_iter_t it = {0}; (e = bs_next(s, &it));)
void* bs_next(const bs_t* s, bs_iter_t* it);
void bs_shrink(bs_t* s); // the table sized for what it holds now

#endif
