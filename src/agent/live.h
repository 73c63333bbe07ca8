// SPDX-License-Identifier: MIT
// live.h - every live heap block, by address (live.c, with live_header.c and live_spill.c).
#ifndef HL_LIVE_H
#define HL_LIVE_H

#include <stddef.h>
#include <stdint.h>

// Plain fields, no bit-fields: the hot path builds one per call, and a bit-field store is a
// read-modify-write of the word it shares (a stall when the word was just written in part).
typedef struct hl_block_s {
    uintptr_t addr;      // 0 = empty slot
    uint64_t size;       // requested bytes
    uint8_t fn;          // allocating HL_FN_*
    uint8_t state;       // HL_BLOCK_*
    uint8_t guarded;     // guard bytes follow the block
    uint8_t is_internal; // made by the agent's own libraries: tracked, never reported
    uint8_t headed;      // its record is in the HL_HEADER bytes before it (live_header.c)
    uint8_t ignored;     // heaplens_ignore: never reported as a leak (live_set_ignored)
    uint8_t trailed;     // its record is in its chunk's last word (live_header.c)
    uint32_t stack;
    uint32_t thread; // owner thread; once FREED, the stack that released the block
    uint32_t epoch;  // the epoch it was allocated in (epoch.h; stored modulo HL_EPOCH_BITS)
} hl_block_t;

enum hl_block_state {
    HL_BLOCK_EMPTY = 0,
    HL_BLOCK_LIVE = 1,
    HL_BLOCK_FREED = 2,
    HL_BLOCK_TOMB = 3
};

// The record a block of malloc, calloc or realloc carries before it while guards are on: the
// allocator is asked for HL_HEADER more bytes, and its pointer is the program's minus these.
#define HL_HEADER 16
int live_header_room(uintptr_t addr); // may a block at addr carry a header? (marks made)
// The record a smaller block carries after it while trailers are on (live_header.c): one word,
// the last of its glibc chunk, after the block and its guard. Its pointer stays the allocator's.
#define HL_TRAILER 8
extern int hl_trailers_on; // trailers used (layout_plain makes their room)
// Trailers on or off (agent start): on only over glibc's malloc, with guard bytes before them.
void live_trailers_set(int on, size_t guard);

void live_init(void);
void live_prefetch(uintptr_t addr); // a hint before live_insert/live_remove of addr
// The writer thread, at each of its passes: slots ahead of a growing heap, and the heap it grew
// by, made present.
void live_prepare(void);
void live_insert(const hl_block_t* b);
// Remove addr; copies what was there to *out. Returns HL_BLOCK_LIVE when a live block was
// removed, HL_BLOCK_FREED when addr is a recently freed block (its last owner in *out; for a
// header or trailer block only out->headed: record.c keeps what it was), or HL_BLOCK_EMPTY
// when the agent never saw it.
int live_remove(uintptr_t addr, hl_block_t* out, uint32_t release_stack);
int live_lookup(uintptr_t addr, hl_block_t* out);
void live_lock_all(void);
void live_unlock_all(void);
// Calls fn for every live block; the caller holds live_lock_all() or the world is stopped.
void live_for_each(void (*fn)(const hl_block_t* b, void* arg), void* arg);
uint64_t live_count(void);
// Relabels every live block allocated before `floor` as allocated at it (epoch.c's rebase).
void live_epoch_rebase(uint32_t now, uint32_t floor);
// Marks the live block at addr ignored (heaplens_ignore): 0, or -1 when none is live there.
int live_set_ignored(uintptr_t addr);
void live_reset_after_fork(void);
void live_clear(void); // a new session: every block forgotten

#endif
