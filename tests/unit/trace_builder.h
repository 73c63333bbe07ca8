// SPDX-License-Identifier: MIT
// trace_builder.h - writing traces byte by byte for the analyzer's unit tests, exactly as
// src/common/format.h lays them out: records into a buffer (buf_t, one chunk's raw bytes), and
// a file (tw_t) of chunks that are the flushed parts of one zstd stream, each with its
// checksum. The record helpers keep what the format carries across records: delta bases
// (reset per chunk by tw_chunk), the sites of the file, and the scan's last verdict address.
#ifndef HL_TEST_TRACE_BUILDER_H
#define HL_TEST_TRACE_BUILDER_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "../../src/common/checksum.h"
#include "../../src/common/format.h"
#include "../../src/common/varint.h"

#define TB_SITES_MAX 4096

typedef struct buf_s {
    uint8_t data[2 << 20]; // heap-allocate: calloc(1, sizeof(buf_t))
    size_t len;
    // per chunk (tw_chunk resets them)
    int64_t last_t;               // "dt" fields, in the trace's microseconds
    uint64_t last_stack, last_ip; // REC_STACK deltas
    // per file
    uint64_t last_verdict;        // VERDICT addresses, per scan
    uint64_t site_size[TB_SITES_MAX];
    uint64_t site_stack[TB_SITES_MAX];
    uint32_t nsites;              // sites 1..nsites defined
} buf_t;

static inline void u(buf_t* b, uint64_t v) {
    b->len = (size_t)(varint_put(b->data + b->len, v) - b->data);
}
static inline void sv(buf_t* b, int64_t v) { u(b, zigzag_encode(v)); }
static inline void str(buf_t* b, const char* s) {
    u(b, strlen(s));
    memcpy(b->data + b->len, s, strlen(s));
    b->len += strlen(s);
}
static inline void tag(buf_t* b, int t) { b->data[b->len++] = (uint8_t)t; }
static inline void dt(buf_t* b, int64_t t) { // t: absolute, in the trace's microseconds
    sv(b, t - b->last_t);
    b->last_t = t;
}

// --- records ---------------------------------------------------------------------------------
static inline void rec_info(buf_t* b, uint64_t pid) {
    tag(b, REC_INFO);
    u(b, pid), u(b, 1), u(b, 0), u(b, 32), u(b, 8), u(b, HL_INFO_FROM_START);
    str(b, "/bin/prog");
    str(b, "prog");
    u(b, 0);
}

// The only place that knows REC_STACK's encoding: id:s, id - parent, ip:s.
static inline void rec_stack(buf_t* b, uint64_t id, uint64_t parent, uint64_t ip) {
    tag(b, REC_STACK);
    sv(b, (int64_t)(id - b->last_stack));
    u(b, id - parent);
    sv(b, (int64_t)(ip - b->last_ip));
    b->last_stack = id;
    b->last_ip = ip;
}

static inline void rec_thread(buf_t* b, uint64_t index, uint64_t tid) {
    tag(b, REC_THREAD);
    u(b, index), u(b, tid);
}
static inline void rec_switch(buf_t* b, uint64_t thread) {
    tag(b, REC_SWITCH);
    u(b, thread);
}
static inline void rec_time(buf_t* b, int64_t t) {
    tag(b, REC_TIME);
    dt(b, t);
}

// The site of (size, stack), 0 when no ALLOC or INHERIT named it yet.
static inline uint32_t tb_site(const buf_t* b, uint64_t size, uint64_t stack) {
    for (uint32_t k = 1; k <= b->nsites; k++)
        if (b->site_size[k] == size && b->site_stack[k] == stack)
            return k;
    return 0;
}
static inline uint32_t tb_name_site(buf_t* b, uint64_t size, uint64_t stack) {
    uint32_t k = tb_site(b, size, stack);
    if (!k && b->nsites + 1 < TB_SITES_MAX) {
        k = ++b->nsites;
        b->site_size[k] = size;
        b->site_stack[k] = stack;
    }
    return k;
}

static inline void rec_alloc(buf_t* b, int fn, uint64_t size, uint64_t stack) {
    tag(b, REC_ALLOC | fn);
    u(b, size), u(b, stack);
    tb_name_site(b, size, stack);
}
static inline void rec_free_site(buf_t* b, int fn, uint64_t site) {
    tag(b, REC_FREE | fn);
    u(b, site);
}
static inline void rec_free(buf_t* b, int fn, uint64_t size, uint64_t stack) {
    rec_free_site(b, fn, tb_site(b, size, stack));
}
// A temporary free names no site: it is the current thread's latest ALLOC's, which size and
// stack say for the reader of the test (they are not written).
static inline void rec_free_temp(buf_t* b, int fn, uint64_t size, uint64_t stack) {
    (void)size, (void)stack;
    tag(b, REC_FREE_TEMP | fn);
}
static inline void rec_free_explicit(buf_t* b, int fn, int temporary, uint64_t size,
                                     uint64_t stack) {
    tag(b, REC_FREE_EXPLICIT);
    u(b, (uint64_t)fn), u(b, (uint64_t)temporary), u(b, size), u(b, stack);
}
static inline void rec_inherit(buf_t* b, uint64_t addr, uint64_t size, uint64_t stack, int fn) {
    tag(b, REC_INHERIT);
    u(b, addr), u(b, size), u(b, stack), u(b, (uint64_t)fn);
    tb_name_site(b, size, stack);
}
static inline void rec_mmap(buf_t* b, uint64_t addr, uint64_t len, uint64_t stack) {
    tag(b, REC_MMAP);
    u(b, addr), u(b, len), u(b, 3), u(b, 0x22), u(b, stack);
}
static inline void rec_munmap(buf_t* b, uint64_t addr, uint64_t len) {
    tag(b, REC_MUNMAP);
    u(b, addr), u(b, len);
}
static inline void rec_sample(buf_t* b, int64_t t, uint64_t heap, uint64_t blocks,
                              uint64_t mapped, uint64_t rss) {
    tag(b, REC_SAMPLE);
    dt(b, t);
    u(b, heap), u(b, blocks), u(b, mapped), u(b, rss);
}
static inline void rec_scan(buf_t* b, int64_t t, uint64_t flags, uint64_t live) {
    tag(b, REC_SCAN);
    dt(b, t);
    u(b, flags), u(b, live);
    b->last_verdict = 0;
}
static inline void rec_verdict(buf_t* b, int kind, uint64_t addr, uint64_t size, uint64_t stack,
                               int fn, uint64_t leader) {
    tag(b, REC_VERDICT);
    u(b, (uint64_t)kind);
    sv(b, (int64_t)(addr - b->last_verdict));
    b->last_verdict = addr;
    u(b, size), u(b, stack), u(b, (uint64_t)fn), u(b, leader);
}
// An error with a block: kind, thread 1, call stack, block at addr of size with its
// allocation stack, released at release_stack (0: none).
static inline void rec_error(buf_t* b, int kind, int64_t t, uint64_t call_stack, uint64_t addr,
                             uint64_t size, uint64_t alloc_stack, uint64_t release_stack) {
    tag(b, REC_ERROR);
    u(b, (uint64_t)kind), u(b, 1);
    dt(b, t);
    u(b, call_stack), u(b, addr), u(b, HL_FN_FREE), u(b, 1);
    u(b, size), u(b, alloc_stack), u(b, HL_FN_MALLOC), u(b, release_stack);
}
static inline void rec_error_change(buf_t* b, int64_t offset, uint64_t length, uint32_t n,
                                    const uint8_t* seen, const uint8_t* expected) {
    tag(b, REC_ERROR_CHANGE);
    sv(b, offset), u(b, length), u(b, n);
    for (uint32_t k = 0; k < n; k++)
        u(b, seen[k]);
    for (uint32_t k = 0; k < n; k++)
        u(b, expected[k]);
}
// ALLOC_STATS with n values (value k = values[k]) and m arenas of `fields` fields each
// (field k of arena i = arena_base + 10 * i + k).
static inline void rec_alloc_stats(buf_t* b, int64_t t, int source, uint64_t available, uint64_t n,
                                   const uint64_t* values, uint64_t arenas, uint64_t m,
                                   uint64_t fields, uint64_t arena_base) {
    tag(b, REC_ALLOC_STATS);
    dt(b, t);
    u(b, (uint64_t)source), u(b, available), u(b, n);
    for (uint64_t k = 0; k < n; k++)
        u(b, values[k]);
    u(b, arenas), u(b, m), u(b, fields);
    for (uint64_t i = 0; i < m; i++)
        for (uint64_t k = 0; k < fields; k++)
            u(b, arena_base + 10 * i + k);
}

static inline void rec_end(buf_t* b, int64_t t) {
    tag(b, REC_END);
    dt(b, t);
    u(b, HL_END_EXIT), u(b, 0);
}

// --- the file --------------------------------------------------------------------------------
typedef struct tw_s {
    uint8_t* data;
    size_t len, cap;
    ZSTD_CCtx* z;
    size_t chunk_at[64]; // file offsets of the chunks written
    int nchunks;
} tw_t;

static inline void le32(uint8_t* p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

// The file header, and the stream as the writer sets it up (8 MiB window, long matches).
static inline int tw_open(tw_t* w, size_t cap, uint32_t version) {
    memset(w, 0, sizeof *w);
    w->data = malloc(cap);
    w->cap = cap;
    w->z = ZSTD_createCCtx();
    if (!w->data || !w->z)
        return -1;
    ZSTD_CCtx_setParameter(w->z, ZSTD_c_windowLog, 23);
    ZSTD_CCtx_setParameter(w->z, ZSTD_c_enableLongDistanceMatching, 1);
    memcpy(w->data, HL_TRACE_MAGIC, 8);
    le32(w->data + 8, version);
    le32(w->data + 12, 0);
    w->len = HL_FILE_HEADER_SIZE;
    return 0;
}

// raw's records as the next chunk: flushed, or with the frame's end when is_last. The chunk's
// delta bases restart; raw is emptied for the next one.
static inline int tw_chunk(tw_t* w, buf_t* raw, int is_last) {
    size_t at = w->len;
    ZSTD_inBuffer in = {raw->data, raw->len, 0};
    size_t room = w->cap - at - HL_CHUNK_HEADER_SIZE;
    ZSTD_outBuffer out = {w->data + at + HL_CHUNK_HEADER_SIZE, room, 0};
    size_t left;
    do {
        left = ZSTD_compressStream2(w->z, &out, &in, is_last ? ZSTD_e_end : ZSTD_e_flush);
        if (ZSTD_isError(left) || (left && out.pos == out.size))
            return -1;
    } while (left);
    le32(w->data + at, HL_CHUNK_MAGIC);
    le32(w->data + at + 4, (uint32_t)out.pos);
    le32(w->data + at + 8, (uint32_t)raw->len);
    le32(w->data + at + 12, hl_checksum32(raw->data, raw->len));
    w->len = at + HL_CHUNK_HEADER_SIZE + out.pos;
    if (w->nchunks < 64)
        w->chunk_at[w->nchunks++] = at;
    raw->len = 0;
    raw->last_t = 0;
    raw->last_stack = raw->last_ip = 0;
    return 0;
}

static inline void tw_close(tw_t* w) {
    ZSTD_freeCCtx(w->z);
    free(w->data);
    memset(w, 0, sizeof *w);
}

// A whole file of one chunk with the frame's end, into out. Returns its size (0: too big).
static inline size_t trace_file(uint8_t* out, size_t cap, buf_t* raw) {
    tw_t w;
    size_t n = 0;
    if (tw_open(&w, cap, HL_TRACE_VERSION) == 0 && tw_chunk(&w, raw, 1) == 0) {
        memcpy(out, w.data, w.len);
        n = w.len;
    }
    tw_close(&w);
    return n;
}

static inline void write_bytes(const char* path, const uint8_t* data, size_t len) {
    FILE* f = fopen(path, "wb");
    if (f) {
        fwrite(data, 1, len, f);
        fclose(f);
    }
}

#endif
