// SPDX-License-Identifier: MIT
// allocstats.h - the allocator's own statistics and the process's memory figures, for
// --allocator-stats (allocstats.c): REC_ALLOC_STATS records, taken on the writer thread.
#ifndef HL_ALLOCSTATS_H
#define HL_ALLOCSTATS_H

#include <stdint.h>

#include "encode.h"

// With --allocator-stats, before the writer starts (writer_start), on a program thread that is
// busy: finds mallinfo2 / malloc_info (or an allocator's own mallinfo) and whether they describe
// the allocator underneath (once: dlsym takes the loader's lock, which the writer must not), and
// makes the stream malloc_info writes to (once per process, again in a fork child). Its one
// allocation comes from that thread's arena: made on the writer, it would give the writer an
// arena of its own (glibc makes one per thread that allocates: 132 KiB resident, 64 MiB of
// address space), which the program would pay for and the figures would show.
void allocstats_prepare(void);
// Takes a sample into the module's one buffer; returns the CPU nanoseconds the allocator's
// functions took (their walks hold its locks). On the writer thread only, with no agent lock
// held: mallinfo2 and malloc_info take each arena's lock in turn, which a thread inside malloc
// holds (and a thread the agent has stopped may hold for as long as it is stopped).
uint64_t allocstats_take(void);
// Encodes the last sample as REC_ALLOC_STATS at time now_ns; the caller holds the writer lock.
void allocstats_encode(hl_enc_t* e, int64_t now_ns);
// In a fork child: the parent's stream for malloc_info may have been in use by its writer at
// the fork (its lock held by a thread the child does not have); the child makes its own.
void allocstats_reset_after_fork(void);

#endif
