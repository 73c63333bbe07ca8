// SPDX-License-Identifier: MIT
// record.h - the hot path behind every hook (record.c): unwind, intern, live table, one event
// into the thread's ring.
#ifndef HL_RECORD_H
#define HL_RECORD_H

#include <stddef.h>

#include "../common/compiler.h"
#include "live.h"
#include "options.h"
#include "thread.h"

enum { HL_AS_GUARDED = 1, HL_AS_HEADED = 2 }; // how a block was laid out (record_alloc_as)
void record_alloc_as(hl_thread_t* t, void* p, size_t size, int fn, int how);
// The same with the stack already unwound (0: unwind here).
void record_alloc_with(hl_thread_t* t, void* p, size_t size, int fn, int how, uint32_t stack);
HL_INLINE void record_alloc(hl_thread_t* t, void* p, size_t size, int fn) {
    record_alloc_as(t, p, size, fn, hl_opt.guard > 0 ? HL_AS_GUARDED : 0);
}
// The pointer to pass to the real release function (p, or the start of p's header), or NULL
// when nothing must be passed (the call was a heap error that the allocator would crash on).
void* record_free(hl_thread_t* t, void* p, int fn);
// The same for a release the agent does not record (tracing off, or inside the agent).
void* record_free_untraced(void* p);
void record_mmap(hl_thread_t* t, void* p, size_t len, int prot, int flags);
void record_munmap(hl_thread_t* t, void* p, size_t len);
size_t record_usable_size(void* p);
void record_note(hl_thread_t* t, int what, uint32_t a, uint32_t b); // REC_NOTE, in order
void record_note_block(hl_thread_t* t, int what, const hl_block_t* b); // naming b's site // requested size of a guarded block, else (size_t)-1
void record_internal_alloc(void* p, size_t size);
void record_internal_free(void* p);
// realloc: 0 = old block removed into *old; 1 = unknown block, pass through; 2 = heap error,
// do not call the allocator; -1 = tracing off.
int record_realloc_begin(hl_thread_t* t, void* p, hl_block_t* old);
void record_realloc_undo(hl_thread_t* t, const hl_block_t* old);
void record_realloc_done(hl_thread_t* t, const hl_block_t* old, void* q, size_t size, int fn);

#endif
