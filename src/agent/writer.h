// SPDX-License-Identifier: MIT
// writer.h - the background thread that drains the rings and writes the trace (writer.c), and
// the direct writes other threads make under its lock (errors, fork, exec, exit).
#ifndef HL_WRITER_H
#define HL_WRITER_H

#include <stdint.h>

#include "encode.h"
#include "live.h"
#include "ring.h"

typedef struct hl_heap_totals_s {
    uint64_t live_bytes, live_blocks, peak_bytes, peak_blocks;
    int64_t peak_time_ns; // since the agent started, as the trace's times
    uint64_t allocations, frees, bytes_allocated;
} hl_heap_totals_t;

int writer_start(void);                 // lazily, from the first slow path; 0 or -errno
void writer_flush_sync(void);           // drain everything now, write it out (caller: any thread)
// The heap as the trace says it, every event made so far drained first; with `ring`, that
// ring's own counts too (caller: any program thread).
void writer_stats(hl_heap_totals_t* out, const hl_ring_t* ring, hl_ring_stats_t* ring_out);
void writer_modules_changed(void);      // after dlopen/dlclose, on the program thread that made it
void writer_reset_after_fork(uint32_t parent_threads);
void writer_clock_init(void);
int64_t writer_now_ns(void);
int writer_thread_id(void);     // tid of the writer thread, 0 when none runs
int writer_is_fork_child(void); // this trace belongs to a forked child
void writer_lock(void);         // serialises direct writes from other threads
void writer_unlock(void);
hl_enc_t* writer_encoder_locked(void); // drains, returns the encoder (writer lock held)
void writer_end_locked(int how, int value);
void writer_flush_if_large_locked(void); // cut the chunk once it is large
void writer_exec_locked(const char* path);
// An ERROR record, written at once (errors are rare; the record carries everything the report
// needs, so it may overtake the ring events of the same block).
void writer_put_error(int kind, uint32_t thread, uint32_t call_stack, uintptr_t addr, int fn,
                      const hl_block_t* block, uint32_t release_stack);
void writer_put_error_locked(int kind, uint32_t thread, uint32_t call_stack, uintptr_t addr, int fn,
                             const hl_block_t* block, uint32_t release_stack);

#endif
