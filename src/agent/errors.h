// SPDX-License-Identifier: MIT
// errors.h - heap errors, written straight to the trace (errors.c); the guard bytes and red
// zones that catch writes outside a block are layout.h's.
#ifndef HL_ERRORS_H
#define HL_ERRORS_H

#include <stddef.h>
#include <stdint.h>

#include "layout.h"
#include "live.h"

// block: the block involved (NULL: none); release_stack: where it was released before (0: n/a).
// An overflow is reported with the guard bytes found changed.
void error_report(int kind, int fn, uintptr_t addr, const hl_block_t* block,
                  uint32_t release_stack);
// The same with the bytes found changed; with no_call_stack, no stack of the current call (a
// change found later than it was made: the call that found it is not the culprit).
void error_report_change(int kind, int fn, uintptr_t addr, const hl_block_t* block,
                         uint32_t release_stack, const hl_change_t* c, int no_call_stack);
// The same under the writer lock, with no stack (at exit, the world stopped).
void error_put_change_locked(int kind, uintptr_t addr, const hl_block_t* block,
                             uint32_t release_stack, const hl_change_t* c);
void error_check_guards_at_exit(void); // caller holds the writer lock

#endif
