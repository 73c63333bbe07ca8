// SPDX-License-Identifier: MIT
// check.h - heap checking (check.c): red zones around each block, painting on allocation and
// release, released blocks held back from reuse (hoard.c). Every block takes this path while
// hl_opt.checking is set; without it nothing here runs.
#ifndef HL_CHECK_H
#define HL_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "live.h"
#include "thread.h"

// A checked block for the program (t ready, not busy): laid out, painted, recorded.
// align 16 for the malloc family; fn decides which aligned function is asked.
void* check_alloc(hl_thread_t* t, size_t size, size_t align, int fn, int is_zeroed);
// realloc of the checked block old (removed by record_realloc_begin; t busy): a new block, the
// contents copied, the old one released as by free. NULL (old put back) when out of memory.
void* check_realloc(hl_thread_t* t, const hl_block_t* old, size_t size, int fn);
// realloc while tracing is off, of a block that may be checked: 1 and *out when it was one.
int check_realloc_untraced(void* p, size_t size, void** out);
// A checked block just released (t busy): its red zone before it checked, painted, maybe held
// back. Returns the pointer to give the allocator, or NULL when nothing must be given now.
void* check_release(hl_thread_t* t, const hl_block_t* b, uint32_t release_stack, int fn);
// The allocator's pointer of a block released untraced (tracing off): p unless checked.
void* check_real_untraced(const hl_block_t* b, void* p);
void check_at_exit(void); // the blocks held back, checked (writer lock held, world stopped)

#endif
