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
void writer_start_later(void);          // a fork child's: once it needs one (writer_start_due)
void writer_flush_sync(void);           // drain everything now, write it out (caller: any thread)
// The heap as the trace says it, every event made so far drained first; with `ring`, that
// ring's own counts too (caller: any program thread).
void writer_stats(hl_heap_totals_t* out, const hl_ring_t* ring, hl_ring_stats_t* ring_out);
void writer_modules_changed(void);      // after dlopen/dlclose, on the program thread that made it
void writer_reset_after_fork(uint32_t parent_threads);
void writer_session_reset(void); // a new trace in this process (attach again): nothing emitted
void writer_wait_gone(void);     // after the end, attached: until the writer thread has exited
void writer_clock_init(void);
int64_t writer_now_ns(void);
int writer_thread_id(void);     // tid of the writer thread, 0 when none runs
int writer_is_fork_child(void); // this trace belongs to a forked child
void writer_lock(void);         // serialises direct writes from other threads
void writer_unlock(void);
int writer_lock_is_mine(void); // does the calling thread hold it?
int writer_lock_within(long long ns); // writer_lock, or -1 after waiting about ns for it
hl_enc_t* writer_encoder_locked(void); // drains, returns the encoder (writer lock held)
// A block the C library releases at exit (libc_exit.h): a FREE that names it in full, as
// glibc's own free of it would have made (its record stays in the live table).
void writer_free_at_exit_locked(const hl_block_t* b);
// Ends the open chunk and, with it, the trace's long compression window (chunk_release_window):
// at exit, before the scan maps its working memory, so the two do not add up at the program's
// peak. Writer lock held.
void writer_release_window_locked(void);
void writer_end_locked(int how, int value);
void writer_flush_if_large_locked(void); // cut the chunk once it is large
void writer_exec_locked(const char* path);
void writer_flush_locked(void); // drain everything, write it out (writer lock held)
// A reachability scan while the program runs, on the writer thread (control.c), lock held:
// stops every program thread, drains the rings (the trace holds every event before the scan),
// writes SCAN and VERDICT records, resumes, writes them out. 0, or -1 when not every thread
// would stop (nothing written then).
// From a program thread (heaplens_leak_check), self is its roots (scan_prepare_caller); from the
// writer, NULL. what: which blocks the scan lists, and its tally (all_stopped is set here).
// On the writer thread, lock held: the stack id's STACK records are in the trace from here on
// (a watched block's release stack, which no event of the trace names).
void writer_ensure_stack_locked(uint32_t id);
struct hl_scan_request_s;
struct hl_thread_roots_s;
int writer_scan_now_locked(const struct hl_thread_roots_s* self,
                           const struct hl_scan_request_s* what);
// On the writer thread (control.c), lock held. stop: the trace ends as at exit (the scan, END
// "stop"), the hooks pass calls through; start: a new trace in a new file, beginning with the
// blocks live now. 0, or -1 (not in the phase for it, or not every thread would stop).
int writer_stop_locked(void);
void writer_set_next_depth(int depth); // frames per stack from the next start (control.c)
int writer_start_again_locked(void);
// An ERROR record, written at once (errors are rare; the record carries everything the report
// needs, so it may overtake the ring events of the same block).
void writer_put_error(int kind, uint32_t thread, uint32_t call_stack, uintptr_t addr, int fn,
                      const hl_block_t* block, uint32_t release_stack);
void writer_put_error_locked(int kind, uint32_t thread, uint32_t call_stack, uintptr_t addr, int fn,
                             const hl_block_t* block, uint32_t release_stack);
// The bytes an ERROR just written found changed (an ERROR_CHANGE record after it).
struct hl_change_s;
void writer_put_change_locked(const struct hl_change_s* c);
// --allocator-stats: asks the writer for the trace's last sample and waits for it (bounded).
// From the thread about to end the trace, before it stops the world or takes the writer lock.
void writer_alloc_stats_final(void);

#endif
