// SPDX-License-Identifier: MIT
// reader.h - the streaming trace decoder. It trusts nothing: every length and varint is
// bounds-checked, and a damaged or truncated trace ends the stream with a message naming the
// byte offset. Records reach the caller through one callback per record, in file order.
//
// The reader resolves what format.h leaves implicit, so no caller needs to: the current thread
// and time of heap events, absolute addresses and stack ids instead of deltas, and the size and
// stack of the block a FREE names by its site.
#ifndef HL_READER_H
#define HL_READER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct rd_str_s {
    const char* ptr; // not NUL-terminated; valid during the callback only
    size_t len;
} rd_str_t;

// One decoded record. Fields a tag does not list below are zero. Times are nanoseconds.
//
// tag is format.h's tag, except that every heap event comes as one of two kinds, whatever its
// encoding: REC_ALLOC (ALLOC 0x40|fn) and REC_FREE (FREE 0x60|fn, FREE_TEMP 0x80|fn,
// FREE_EXPLICIT); wire_tag is the tag byte as written.
//
// Heap events (REC_ALLOC, REC_FREE, REC_MMAP, REC_MUNMAP) carry the current thread in `thread`
// (the last SWITCH) and the current time in time_ns (the last timed record's).
//
//   REC_ALLOC        u[0] size, u[1] stack, u[2] site, u[3] early: releases of this (size,
//                    stack) by FREE_EXPLICIT read before any ALLOC named it (the site is new;
//                    those releases came with u[2] = 0 and belong to it); fn
//   REC_FREE         u[0] size, u[1] stack, u[2] site (0: a FREE_EXPLICIT of a pair no ALLOC
//                    named yet); fn, is_temporary (FREE_TEMP, or FREE_EXPLICIT's flag)
//   REC_INHERIT      u[0] addr, u[1] size, u[2] stack, u[3] fn, u[4] site, u[5] early (as for
//                    ALLOC); fn; time_ns 0 (alive when the trace began)
//   REC_MMAP         u[0] addr, u[1] length, u[2] prot, u[3] flags, u[4] stack
//   REC_MUNMAP       u[0] addr, u[1] length
//   REC_SWITCH       u[0] thread (also in `thread`)
//   REC_TIME         time_ns
//   REC_INFO         u[0] pid, u[1] ppid, u[2] start_realtime_ns, u[3] depth, u[4] guard_bytes,
//                    u[5] flags, u[6] trace_generation; s[0] exe, s[1] argv (NUL-separated)
//   REC_MODULE       u[0] id, u[1] bias; s[0] path, s[1] build_id; nsegs, segs
//   REC_MODULE_GONE  u[0] id
//   REC_THREAD       u[0] index, u[1] tid
//   REC_STACK        u[0] id, u[1] parent (0: none), u[2] ip
//   REC_SAMPLE       time_ns; u[0] heap_bytes, u[1] heap_blocks, u[2] mapped_bytes, u[3] rss
//   REC_ERROR        time_ns; u[0] kind, u[1] thread, u[2] call_stack, u[3] addr, u[4] fn,
//                    u[5] has_block, and with a block u[6] size, u[7] alloc_stack,
//                    u[8] alloc_fn, u[9] free_stack
//   REC_ERROR_CHANGE u[0] offset (int64_t), u[1] length, u[2] n, u[3..4] n seen bytes,
//                    u[5..6] n expected bytes (8 to a word, the first in the low byte)
//   REC_SCAN         time_ns; u[0] flags, u[1] live_blocks
//   REC_VERDICT      u[0] kind, u[1] addr, u[2] size, u[3] stack, u[4] fn, u[5] leader (the
//                    absolute address; 0: none), u[6] site of (size, stack) (0: none); fn
//   REC_END          time_ns; u[0] how, u[1] value
//   REC_EXEC         time_ns; s[0] path
//   REC_THREAD_NAME  time_ns; u[0] thread; s[0] name
//   REC_ALLOC_STATS  time_ns; u[0] source (HL_AS_SRC_*), u[1] available (bit k: value k),
//                    u[2 + k] value k (HL_AS_*; 0 where not available), u[2 + HL_AS_COUNT]
//                    arenas; nsegs arenas listed, segs nsegs x HL_AS_ARENA_FIELDS values
typedef struct rd_record_s {
    int tag;
    int wire_tag;
    int fn;           // HL_FN_* of REC_ALLOC, REC_FREE, REC_INHERIT, REC_VERDICT
    int is_temporary; // REC_FREE
    uint64_t thread;  // heap events and REC_SWITCH
    int64_t time_ns;
    uint64_t u[16];
    rd_str_t s[2];        // string fields in order
    uint32_t nsegs;       // REC_MODULE: segment count; REC_ALLOC_STATS: arenas listed
    const uint64_t* segs; // REC_MODULE: nsegs x (vaddr, memsz, flags); REC_ALLOC_STATS: arenas
} rd_record_t;

typedef int (*rd_callback_t)(const rd_record_t* rec, void* arg); // non-zero stops the stream

typedef struct rd_result_s {
    int is_truncated;   // the file ends inside a chunk (the process died, disk filled)
    int is_corrupt;     // a chunk failed its checksum or did not decode, or a record is malformed
    uint64_t chunks;
    uint64_t records;
    char message[256];  // why decoding stopped early, with the byte offset
    unsigned word_size; // the traced machine's pointer size in bytes (the header's flags)
    int is_big_endian;  // ... and its byte order
} rd_result_t;

// Decode the trace at path, calling cb for every record. Returns 0 when the file is a trace
// (even a damaged or truncated one: see result; a damaged chunk ends what can be read, since
// every chunk decodes with the history of the ones before it), or -errno / -EINVAL with
// result->message set when it is not one or cannot be read at all.
int rd_read_file(const char* path, rd_callback_t cb, void* arg, rd_result_t* result);

// The same in steps, for a trace still being written (heaplens run reads it while its program
// runs). rd_stream_open: 0, or as rd_read_file when the file is not a trace. rd_stream_read with
// max_chunks 0 reads to the end as rd_read_file does; with max_chunks > 0 it follows the file:
// RD_MORE after that many chunks, RD_WAIT where the file ends (inside a chunk too: nothing is
// taken for truncated), the next call going on from there; 0 when damage or cb ended it,
// -ENOMEM. The result accumulates over the calls.
#define RD_MORE 1
#define RD_WAIT 2
typedef struct rd_stream_s rd_stream_t;
int rd_stream_open(const char* path, rd_stream_t** out, rd_result_t* result);
int rd_stream_read(rd_stream_t* s, rd_callback_t cb, void* arg, rd_result_t* result,
                   unsigned max_chunks);
void rd_stream_close(rd_stream_t* s);

#endif
