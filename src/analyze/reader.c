// SPDX-License-Identifier: MIT
// reader.c - decodes the trace format of src/common/format.h. Reads one chunk at a time, so
// memory is bounded by the largest chunk, not by the trace.
#include "reader.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "../common/format.h"
#include "../common/varint.h"

#define hl_likely_reader(x) __builtin_expect(!!(x), 1)

typedef struct dec_s {
    const uint8_t* p;
    const uint8_t* end;
    int bad;
    int64_t last_time;
    uint64_t last_addr;
    uint64_t last_ip;
    uint64_t last_stack;
    uint64_t** allocs; // ALLOC records per thread so far (FREE refers back to them)
    size_t* nallocs;
} dec_t;

static uint64_t* alloc_count(dec_t* d, uint64_t thread) {
    if (thread > (1u << 24))
        return NULL;
    if (thread >= *d->nallocs) {
        size_t cap = *d->nallocs ? *d->nallocs : 64;
        while (cap <= thread)
            cap *= 2;
        uint64_t* fresh = realloc(*d->allocs, cap * sizeof *fresh);
        if (!fresh)
            return NULL;
        memset(fresh + *d->nallocs, 0, (cap - *d->nallocs) * sizeof *fresh);
        *d->allocs = fresh;
        *d->nallocs = cap;
    }
    return &(*d->allocs)[thread];
}

static inline uint64_t get_u(dec_t* d) {
    // Most fields of the busy records (deltas, ids, small sizes) fit one byte.
    if (hl_likely_reader(d->p < d->end && *d->p < 0x80))
        return *d->p++;
    uint64_t v = 0;
    if (!d->bad && varint_get(&d->p, d->end, &v) != 0)
        d->bad = 1;
    return v;
}
static int64_t get_s(dec_t* d) { return zigzag_decode(get_u(d)); }
static rd_str_t get_str(dec_t* d) {
    rd_str_t s = {0};
    uint64_t n = get_u(d);
    if (d->bad || n > (uint64_t)(d->end - d->p)) {
        d->bad = 1;
        return s;
    }
    s.ptr = (const char*)d->p;
    s.len = (size_t)n;
    d->p += n;
    return s;
}
static int64_t get_time(dec_t* d) {
    d->last_time += get_s(d);
    return d->last_time * 1000; // the trace counts microseconds
}

static uint64_t* scratch;
static size_t scratch_cap;

static int ensure_scratch(size_t n) {
    if (n <= scratch_cap)
        return 0;
    size_t cap = scratch_cap ? scratch_cap : 256;
    while (cap < n)
        cap *= 2;
    uint64_t* fresh = realloc(scratch, cap * sizeof *fresh);
    if (!fresh)
        return -1;
    scratch = fresh;
    scratch_cap = cap;
    return 0;
}

// Decodes one record at d->p into r. Returns 0, or -1 on malformed input.
static int decode_record(dec_t* d, rd_record_t* r) {
    int tag = *d->p++;
    // ALLOC and FREE, nearly every record of a trace, set each field they carry; the rest of
    // the record is cleared only for the others.
    if (tag == REC_ALLOC || tag == REC_FREE) {
        r->u[4] = 0;
        r->nsegs = 0;
        r->segs = NULL;
        r->s[0].ptr = r->s[1].ptr = NULL;
        r->s[0].len = r->s[1].len = 0;
    } else {
        memset(r, 0, sizeof *r);
    }
    r->tag = tag;
    switch (r->tag) {
    case REC_INFO:
        for (int i = 0; i < 6; i++)
            r->u[i] = get_u(d);
        r->s[0] = get_str(d);
        r->s[1] = get_str(d);
        r->u[6] = get_u(d);
        break;
    case REC_MODULE: {
        r->u[0] = get_u(d);
        r->u[1] = get_u(d);
        r->s[0] = get_str(d);
        r->s[1] = get_str(d);
        uint64_t n = get_u(d);
        if (d->bad || n > 4096 || ensure_scratch((size_t)n * 3) != 0)
            return -1;
        for (uint64_t i = 0; i < n * 3; i++)
            scratch[i] = get_u(d);
        r->nsegs = (uint32_t)n;
        r->segs = scratch;
        break;
    }
    case REC_MODULE_GONE:
        r->u[0] = get_u(d);
        break;
    case REC_THREAD:
        r->u[0] = get_u(d);
        r->u[1] = get_u(d);
        break;
    case REC_STACK: {
        d->last_stack += (uint64_t)get_s(d);
        r->u[0] = d->last_stack;
        uint64_t back = get_u(d);
        if (back == 0 || back > r->u[0])
            d->bad = 1;
        r->u[1] = r->u[0] - back;
        d->last_ip += (uint64_t)get_s(d);
        r->u[2] = d->last_ip;
        break;
    }
    case REC_ALLOC: {
        r->u[0] = get_u(d);
        uint64_t* count = alloc_count(d, r->u[0]);
        if (!count)
            return -1;
        (*count)++;
        r->time_ns = get_time(d);
        d->last_addr += (uint64_t)get_s(d);
        r->u[1] = d->last_addr;
        r->u[2] = get_u(d);
        r->u[3] = get_u(d);
        r->u[4] = get_u(d);
        break;
    }
    case REC_FREE: {
        r->u[0] = get_u(d);
        r->time_ns = get_time(d);
        r->u[1] = get_u(d);
        int64_t back = get_s(d);
        uint64_t* count = alloc_count(d, r->u[1]);
        if (!count)
            return -1;
        r->u[2] = *count - (uint64_t)back; // the owner's n-th ALLOC
        r->u[3] = get_u(d);
        break;
    }
    case REC_MMAP:
        r->u[0] = get_u(d);
        r->time_ns = get_time(d);
        for (int i = 1; i <= 5; i++)
            r->u[i] = get_u(d);
        break;
    case REC_MUNMAP:
        r->u[0] = get_u(d);
        r->time_ns = get_time(d);
        r->u[1] = get_u(d);
        r->u[2] = get_u(d);
        break;
    case REC_SAMPLE:
        r->time_ns = get_time(d);
        for (int i = 0; i < 4; i++)
            r->u[i] = get_u(d);
        break;
    case REC_ERROR:
        r->u[0] = get_u(d);
        r->u[1] = get_u(d);
        r->time_ns = get_time(d);
        r->u[2] = get_u(d);
        r->u[3] = get_u(d);
        r->u[4] = get_u(d);
        r->u[5] = get_u(d);
        if (r->u[5])
            for (int i = 6; i < 12; i++)
                r->u[i] = get_u(d);
        break;
    case REC_INHERIT:
        for (int i = 0; i < 6; i++)
            r->u[i] = get_u(d);
        break;
    case REC_SCAN:
        r->time_ns = get_time(d);
        r->u[0] = get_u(d);
        r->u[1] = get_u(d);
        break;
    case REC_VERDICT:
        for (int i = 0; i < 5; i++)
            r->u[i] = get_u(d);
        break;
    case REC_END:
        r->time_ns = get_time(d);
        r->u[0] = get_u(d);
        r->u[1] = get_u(d);
        break;
    case REC_EXEC:
        r->time_ns = get_time(d);
        r->s[0] = get_str(d);
        break;
    case REC_THREAD_NAME:
        r->u[0] = get_u(d);
        r->time_ns = get_time(d);
        r->s[0] = get_str(d);
        break;
    default:
        return -1;
    }
    return d->bad ? -1 : 0;
}

static uint32_t le32(const uint8_t* p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int rd_read_file(const char* path, rd_callback_t cb, void* arg, rd_result_t* res) {
    memset(res, 0, sizeof *res);
    FILE* f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        snprintf(res->message, sizeof res->message, "%s", strerror(e));
        return -e;
    }
    uint8_t hdr[HL_FILE_HEADER_SIZE];
    if (fread(hdr, 1, sizeof hdr, f) != sizeof hdr || memcmp(hdr, HL_TRACE_MAGIC, 8) != 0) {
        snprintf(res->message, sizeof res->message, "not a heaplens trace (bad header)");
        fclose(f);
        return -EINVAL;
    }
    if (le32(hdr + 8) != HL_TRACE_VERSION) {
        snprintf(res->message, sizeof res->message, "trace format version %u, this heaplens reads %u",
                 le32(hdr + 8), HL_TRACE_VERSION);
        fclose(f);
        return -EINVAL;
    }
    uint8_t *stored = NULL, *raw = NULL;
    size_t stored_cap = 0;
    raw = malloc(HL_CHUNK_RAW_MAX);
    ZSTD_DCtx* dctx = ZSTD_createDCtx();
    uint64_t offset = HL_FILE_HEADER_SIZE;
    uint64_t* allocs = NULL;
    size_t nallocs = 0;
    int stop = 0;
    while (!stop && raw && dctx) {
        uint8_t ch[HL_CHUNK_HEADER_SIZE];
        size_t got = fread(ch, 1, sizeof ch, f);
        if (got == 0)
            break;
        if (got < sizeof ch) {
            res->is_truncated = 1;
            snprintf(res->message, sizeof res->message, "trace ends inside a chunk header at byte %llu",
                     (unsigned long long)offset);
            break;
        }
        uint32_t magic = le32(ch), slen = le32(ch + 4), rlen = le32(ch + 8);
        if (magic != HL_CHUNK_MAGIC || rlen > HL_CHUNK_RAW_MAX || slen > HL_CHUNK_RAW_MAX * 2u) {
            res->is_corrupt = 1;
            snprintf(res->message, sizeof res->message, "bad chunk header at byte %llu",
                     (unsigned long long)offset);
            break;
        }
        if (slen > stored_cap) {
            uint8_t* fresh = realloc(stored, slen);
            if (!fresh)
                break;
            stored = fresh;
            stored_cap = slen;
        }
        if (fread(stored, 1, slen, f) != slen) {
            res->is_truncated = 1;
            snprintf(res->message, sizeof res->message, "trace ends inside the chunk at byte %llu",
                     (unsigned long long)offset);
            break;
        }
        size_t n = ZSTD_decompressDCtx(dctx, raw, HL_CHUNK_RAW_MAX, stored, slen);
        if (ZSTD_isError(n) || n != rlen) {
            res->is_corrupt = 1;
            snprintf(res->message, sizeof res->message, "chunk at byte %llu does not decode (%s)",
                     (unsigned long long)offset, ZSTD_isError(n) ? ZSTD_getErrorName(n) : "size");
            break;
        }
        res->chunks++;
        dec_t d = {.p = raw, .end = raw + n, .allocs = &allocs, .nallocs = &nallocs};
        while (d.p < d.end) {
            rd_record_t r;
            const uint8_t* at = d.p;
            if (decode_record(&d, &r) != 0) {
                res->is_corrupt = 1;
                snprintf(res->message, sizeof res->message,
                         "malformed record (tag %u) at byte %llu of the chunk at byte %llu", *at,
                         (unsigned long long)(at - raw), (unsigned long long)offset);
                stop = 1;
                break;
            }
            res->records++;
            if (cb(&r, arg) != 0) {
                stop = 1;
                break;
            }
        }
        offset += HL_CHUNK_HEADER_SIZE + slen;
    }
    ZSTD_freeDCtx(dctx);
    free(allocs);
    free(stored);
    free(raw);
    fclose(f);
    return 0;
}
