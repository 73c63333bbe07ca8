// SPDX-License-Identifier: MIT
// lost_set.h - the blocks earlier scans reported lost and the latest found still lost, so that
// a scan can look at those again only (heaplens shell's `leaks leak`). Owned by the scan; read
// and rebuilt only while the world is stopped, by the one thread that scans.
#ifndef HL_LOST_SET_H
#define HL_LOST_SET_H

#include <stddef.h>
#include <stdint.h>

// A block's identity across scans: its address, and the stack and epoch label it was made with,
// so that a later block at the same address is not taken for it.
typedef struct hl_lost_s {
    uintptr_t addr;
    uint32_t stack;
    uint32_t epoch;
} hl_lost_t;

// Walks the set in address order beside a scan's blocks (also in address order).
typedef struct hl_lost_cursor_s {
    size_t next;
} hl_lost_cursor_t;

size_t lost_set_count(void);
// Is the block in the set? Calls come in increasing address order with one cursor.
int lost_set_has(hl_lost_cursor_t* c, uintptr_t addr, uint32_t stack, uint32_t epoch);

// A scan rebuilds the set: begin with room for `cap` blocks (what it found lost, at most),
// add them in address order, then commit (the old set is dropped). -1 when there is no memory:
// the old set stays.
int lost_set_begin(size_t cap);
void lost_set_add(uintptr_t addr, uint32_t stack, uint32_t epoch);
void lost_set_commit(void);

void lost_set_clear(void); // a new session: nothing reported yet

#endif
