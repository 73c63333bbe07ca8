// SPDX-License-Identifier: MIT
// errors.h - heap errors, written straight to the trace, and the guard bytes that catch writes
// past a block (errors.c).
#ifndef HL_ERRORS_H
#define HL_ERRORS_H

#include <stddef.h>
#include <stdint.h>

#include "live.h"

// block: the block involved (NULL: none); release_stack: where it was released before (0: n/a)
void error_report(int kind, int fn, uintptr_t addr, const hl_block_t* block,
                  uint32_t release_stack);
void error_check_guards_at_exit(void); // caller holds the writer lock
int guard_is_intact(const hl_block_t* b);
void guard_fill(void* p, size_t size);

#endif
