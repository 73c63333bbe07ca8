// SPDX-License-Identifier: MIT
// hoard.h - released blocks held back from reuse, first in first out up to hl_opt.hoard bytes
// (hoard.c). A block leaving it, and every block in it at exit, is checked for writes made
// after its release.
#ifndef HL_HOARD_H
#define HL_HOARD_H

#include <stdint.h>

typedef struct hl_hoarded_s {
    uintptr_t addr;    // the program's pointer
    char* real;        // the allocator's
    uint64_t size;
    uint32_t stack;         // allocation stack
    uint32_t release_stack; // 0 with --no-release-stacks
    uint8_t fn;             // allocating HL_FN_*
} hl_hoarded_t;

// Holds e back; blocks that leave to keep within the budget are checked and given back here.
// Returns 0, or -1 when it could not be held (no memory for the hoard): the caller gives it back.
int hoard_put(const hl_hoarded_t* e);
void hoard_check_at_exit(void); // writer lock held, world stopped
void hoard_reset_after_fork(void);

#endif
