// SPDX-License-Identifier: MIT
// frame.h - raw records made a trace file, framed as the agent frames them (format.h): the file
// header, then one zstd stream whose flushed parts are the chunks, each with its checksum. The
// records come as fuzz_trace.c and pack.c take them: chunks of raw record bytes, each a varint
// length and its bytes (unpack.c writes traces this way).
#ifndef HL_TEST_FRAME_H
#define HL_TEST_FRAME_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "../../src/common/checksum.h"
#include "../../src/common/format.h"
#include "../../src/common/varint.h"

typedef struct fr_span_s {
    const uint8_t* p;
    size_t n;
} fr_span_t;

// The chunks of data: a varint length and as many bytes (fewer when data ends first; a length
// that does not decode ends the list), at most max of them. Returns their count.
static inline size_t fr_split(const uint8_t* data, size_t size, fr_span_t* out, size_t max) {
    size_t k = 0, at = 0;
    while (at < size && k < max) {
        uint64_t len;
        const uint8_t* p = data + at;
        if (varint_get(&p, data + size, &len) != 0)
            break;
        at = (size_t)(p - data);
        if (len > size - at)
            len = size - at;
        if (len > HL_CHUNK_RAW_MAX)
            len = HL_CHUNK_RAW_MAX;
        out[k++] = (fr_span_t){data + at, (size_t)len};
        at += (size_t)len;
    }
    return k;
}

typedef struct fr_writer_s {
    ZSTD_CCtx* z;
    uint8_t* stored; // one chunk's compressed bytes
    size_t cap;
} fr_writer_t;

static inline int fr_put(int fd, const void* p, size_t n) {
    return write(fd, p, n) == (ssize_t)n ? 0 : -1;
}

static inline void fr_le32(uint8_t* p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

// raw as the stream's next chunk (with the frame's end when is_last), written to fd.
static inline int fr_chunk(fr_writer_t* w, int fd, const uint8_t* raw, size_t n, int is_last) {
    size_t need = ZSTD_compressBound(n) + 64;
    if (need > w->cap) {
        uint8_t* fresh = realloc(w->stored, need);
        if (!fresh)
            return -1;
        w->stored = fresh;
        w->cap = need;
    }
    ZSTD_inBuffer in = {raw, n, 0};
    ZSTD_outBuffer out = {w->stored, w->cap, 0};
    size_t left;
    do {
        left = ZSTD_compressStream2(w->z, &out, &in, is_last ? ZSTD_e_end : ZSTD_e_flush);
        if (ZSTD_isError(left) || (left && out.pos == out.size))
            return -1;
    } while (left);
    uint8_t ch[HL_CHUNK_HEADER_SIZE];
    fr_le32(ch, HL_CHUNK_MAGIC);
    fr_le32(ch + 4, (uint32_t)out.pos);
    fr_le32(ch + 8, (uint32_t)n);
    fr_le32(ch + 12, hl_checksum32(raw, n));
    return fr_put(fd, ch, sizeof ch) || fr_put(fd, w->stored, out.pos);
}

// The whole trace of chunks c[0..n) written to fd from where it stands. 0, or -1.
static inline int fr_trace(fr_writer_t* w, int fd, const fr_span_t* c, size_t n) {
    if (!w->z && !(w->z = ZSTD_createCCtx()))
        return -1;
    ZSTD_CCtx_reset(w->z, ZSTD_reset_session_and_parameters);
    ZSTD_CCtx_setParameter(w->z, ZSTD_c_compressionLevel, 1);
    uint8_t hdr[HL_FILE_HEADER_SIZE];
    memcpy(hdr, HL_TRACE_MAGIC, 8);
    fr_le32(hdr + 8, HL_TRACE_VERSION);
    fr_le32(hdr + 12, 0);
    if (fr_put(fd, hdr, sizeof hdr) != 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (fr_chunk(w, fd, c[i].p, c[i].n, i + 1 == n) != 0)
            return -1;
    return 0;
}

#endif
