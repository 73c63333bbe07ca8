// SPDX-License-Identifier: MIT
// decode.h - the records of a chunk's decompressed bytes (format.h), for reader.c. What a trace
// carries from one chunk to the next (sites, current thread and time, the scan's last verdict
// address) lives in rd_dec_t; the deltas that restart at every chunk do not.
#ifndef HL_DECODE_H
#define HL_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "idmap.h"
#include "reader.h"
#include "sites.h"

// Thread indices count every thread of a process lineage that allocated (the agent numbers them
// from 1); 16M of them is far beyond any real one: a larger index is damage.
#define RD_THREAD_INDEX_MAX ((1u << 24) - 1)

typedef struct rd_dec_s {
    sites_t sites;
    uint64_t thread;       // of the heap events: the last SWITCH
    int64_t now_ns;        // of the heap events: the last timed record's time
    uint64_t last_verdict; // VERDICT addresses are deltas within a scan
    idmap_t threads;       // thread index -> its number here
    uint32_t* last_site;   // by thread number: the site of its latest ALLOC (a FREE_TEMP's site)
    size_t last_site_cap;
    uint32_t cur;          // the number of `thread`; 0 until a heap event needs it
    uint64_t* segs;        // REC_MODULE's segments, valid during its callback
    size_t segs_cap;
} rd_dec_t;

void rd_dec_init(rd_dec_t* d);
void rd_dec_free(rd_dec_t* d);

// Decodes the n bytes of one chunk (the one at file offset chunk_at), calling cb for each
// record and counting them in res->records. Returns 0 at the chunk's end, 1 when cb stopped,
// -EINVAL on a malformed record (res->is_corrupt and res->message set), -ENOMEM.
int rd_dec_chunk(rd_dec_t* d, const uint8_t* raw, size_t n, uint64_t chunk_at, rd_callback_t cb,
                 void* arg, rd_result_t* res);

#endif
