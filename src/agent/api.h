// SPDX-License-Identifier: MIT
// api.h - what the hot path asks of the in-program API (api_hooks.c): one read-mostly word says
// whether any watch, threshold or paused thread exists; only then are the cold calls made.
#ifndef HL_API_H
#define HL_API_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "live.h"
#include "thread.h"

enum { HL_API_WATCH = 1, HL_API_THRESHOLDS = 2, HL_API_PAUSED = 4, HL_API_IGNORED = 8 };
extern _Atomic int hl_api_hooks; // HL_API_* in use by some thread

// An allocation by a paused thread: kept as internal (its release recognised, never reported).
void api_alloc_paused(void* p, size_t size, int fn, int how);
// After an allocation was recorded, with thresholds set.
void api_after_alloc(hl_thread_t* t, size_t size);
// A live block is about to be released (HEAPLENS_FREED) or resized (HEAPLENS_RESIZED);
// release_stack is where (0: not unwound yet).
void api_on_release(hl_thread_t* t, const hl_block_t* b, int event, uint32_t release_stack);

// A watch's callback: heaplens_watch_fn (include/heaplens.h), or, with_stack, the agent's own
// (the shell's watch) told the release's stack as well.
typedef void (*hl_watch_stack_fn)(void* ptr, int event, const void* where, uint32_t stack,
                                  void* arg);
int api_watch_set(uintptr_t addr, void* cb, void* arg, int with_stack);
int api_thresholds_set(size_t block_bytes, size_t delta_bytes, uint64_t delta_ns, void* cb,
                       void* arg);
void api_after_fork_child(void); // every lock of the API's free in the child

// Runs fn on a program thread as the program, outside the agent (busy cleared, restored).
#define API_AS_PROGRAM(t, call)                                                                   \
    do {                                                                                          \
        int was_busy_ = (t)->busy;                                                                \
        (t)->busy = 0;                                                                            \
        (t)->in_callback++;                                                                       \
        call;                                                                                     \
        (t)->in_callback--;                                                                       \
        (t)->busy = was_busy_;                                                                    \
    } while (0)

#endif
