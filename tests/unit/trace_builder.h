// SPDX-License-Identifier: MIT
// trace_builder.h - writing traces byte by byte for the analyzer's unit tests: the record
// fields (varints, zigzag, strings) into a buffer, then the file header and one zstd chunk
// around it, exactly as src/common/format.h lays them out.
#ifndef HL_TEST_TRACE_BUILDER_H
#define HL_TEST_TRACE_BUILDER_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "../../src/common/format.h"
#include "../../src/common/varint.h"

typedef struct buf_s {
    uint8_t data[2 << 20]; // heap-allocate: calloc(1, sizeof(buf_t))
    size_t len;
    int64_t last_t;               // for delta-coded times
    uint64_t last_addr;           // ALLOC/FREE addresses are deltas against the last ALLOC's
    uint64_t last_stack, last_ip; // REC_STACK deltas
    uint64_t nallocs[4];          // ALLOC records per thread so far (FREE refers back)
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

static inline void le32(uint8_t* p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

// The file: header, then the records of raw as one checksummed zstd chunk. Returns its size.
static inline size_t trace_file(uint8_t* out, size_t cap, const buf_t* raw) {
    memcpy(out, HL_TRACE_MAGIC, 8);
    le32(out + 8, HL_TRACE_VERSION);
    le32(out + 12, 0);
    size_t n = HL_FILE_HEADER_SIZE;
    ZSTD_CCtx* c = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1);
    size_t z = ZSTD_compress2(c, out + n + HL_CHUNK_HEADER_SIZE, cap - n - HL_CHUNK_HEADER_SIZE,
                              raw->data, raw->len);
    ZSTD_freeCCtx(c);
    le32(out + n, HL_CHUNK_MAGIC);
    le32(out + n + 4, (uint32_t)z);
    le32(out + n + 8, (uint32_t)raw->len);
    return n + HL_CHUNK_HEADER_SIZE + z;
}

static inline void write_bytes(const char* path, const uint8_t* data, size_t len) {
    FILE* f = fopen(path, "wb");
    if (f) {
        fwrite(data, 1, len, f);
        fclose(f);
    }
}

#endif
