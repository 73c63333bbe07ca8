// SPDX-License-Identifier: MIT
// reader.h - the streaming trace decoder. It trusts nothing: every length and varint is
// bounds-checked, and a damaged or truncated trace ends the stream with a message naming the
// byte offset. Records reach the caller through one callback per record, in file order.
#ifndef HL_READER_H
#define HL_READER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct rd_str_s {
    const char* ptr; // not NUL-terminated; valid during the callback only
    size_t len;
} rd_str_t;

// One decoded record. Fields are named after format.h; unused ones are zero.
// REC_FREE's u[2] is the owner's sequence number, already resolved from the trace's
// back-reference. Times are nanoseconds.
typedef struct rd_record_s {
    int tag;
    uint64_t u[16];     // integer fields in the order format.h lists them
    int64_t time_ns;    // absolute time for timed records
    rd_str_t s[2];      // string fields in order
    uint32_t nsegs;       // REC_MODULE: segment count
    const uint64_t* segs; // REC_MODULE: nsegs x (vaddr, memsz, flags)
} rd_record_t;

typedef int (*rd_callback_t)(const rd_record_t* rec, void* arg); // non-zero stops the stream

typedef struct rd_result_s {
    int is_truncated;   // the file ends inside a chunk (the process died, disk filled)
    int is_corrupt;     // a chunk failed its checksum or did not decode
    uint64_t chunks;
    uint64_t records;
    char message[256];  // why decoding stopped early, with the byte offset
} rd_result_t;

// Decode the trace at path, calling cb for every record. Returns 0 when the file is a trace
// (even a truncated one: see result), or -errno / -EINVAL with result->message set when it is
// not one or cannot be read at all.
int rd_read_file(const char* path, rd_callback_t cb, void* arg, rd_result_t* result);

#endif
