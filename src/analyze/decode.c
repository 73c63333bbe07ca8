// SPDX-License-Identifier: MIT
// decode.c - a chunk's records into rd_record_t (layouts in reader.h). ALLOC and FREE are
// nearly every record of a trace: they take the first branch, fill only their own fields and
// read most varints in one byte.
#include "decode.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../common/compiler.h"
#include "../common/format.h"
#include "../common/varint.h"

enum { DEC_OK, DEC_MALFORMED, DEC_BAD_SITE, DEC_NOMEM };

// Times are microseconds in the trace and nanoseconds in the reader: beyond this (292 years)
// a time cannot be one.
#define RD_TIME_US_MAX (INT64_MAX / 1000)
// Every segment of a MODULE record takes three varints of at least a byte each.
#define RD_SEG_FIELDS 3
#define RD_SEGS_MAX 4096 // segments of one module: ELF program headers are far fewer

// Where decoding stands inside one chunk.
typedef struct cur_s {
    const uint8_t* p;
    const uint8_t* end;
    int bad;            // a field ran past the chunk or overflowed
    const char* why;    // what was wrong with the first bad field
    int is_heap_clean;  // the record holds a heap event: all but the heap fields are zero
    int64_t last_us;    // "dt" fields: the chunk's previous timed record (microseconds)
    uint64_t last_ip, last_stack;
    uint64_t bad_site;  // the site a FREE named that was not defined
    rd_dec_t* d;
} cur_t;

void rd_dec_init(rd_dec_t* d) {
    memset(d, 0, sizeof *d);
    sites_init(&d->sites);
    idmap_init(&d->threads);
}

void rd_dec_free(rd_dec_t* d) {
    sites_free(&d->sites);
    idmap_free(&d->threads);
    free(d->segs);
    free(d->last_site);
    memset(d, 0, sizeof *d);
}

static HL_COLD void bad(cur_t* c, const char* why) {
    if (!c->bad) {
        c->bad = 1;
        c->why = why;
    }
}

static inline uint64_t get_u(cur_t* c) {
    // Most fields of the busy records (sites, stack ids, small sizes) fit one byte.
    if (hl_likely(c->p < c->end && *c->p < 0x80))
        return *c->p++;
    uint64_t v = 0;
    if (!c->bad && varint_get(&c->p, c->end, &v) != 0)
        bad(c, "a number runs past the chunk's end or beyond 64 bits");
    return v;
}
static int64_t get_s(cur_t* c) { return zigzag_decode(get_u(c)); }
static rd_str_t get_str(cur_t* c) {
    rd_str_t s = {0};
    uint64_t n = get_u(c);
    if (c->bad || n > (uint64_t)(c->end - c->p)) {
        bad(c, "a string longer than the rest of its chunk");
        return s;
    }
    s.ptr = (const char*)c->p;
    s.len = (size_t)n;
    c->p += n;
    return s;
}
// A "dt" field: it also sets the time of the heap events that follow.
static int64_t get_time(cur_t* c) {
    int64_t us;
    if (__builtin_add_overflow(c->last_us, get_s(c), &us) || us > RD_TIME_US_MAX ||
        us < -RD_TIME_US_MAX) {
        bad(c, "a time beyond 292 years");
        return c->d->now_ns;
    }
    c->last_us = us;
    c->d->now_ns = us * 1000; // the trace counts microseconds
    return c->d->now_ns;
}
// A stack id or a function, which the analyzer keeps in 32 and 5 bits.
static uint32_t get_stack(cur_t* c) {
    uint64_t v = get_u(c);
    if (v > UINT32_MAX)
        bad(c, "a stack id beyond 32 bits");
    return (uint32_t)v;
}
static int get_fn(cur_t* c) {
    uint64_t v = get_u(c);
    if (v > HL_REC_FN_MASK)
        bad(c, "an unknown function");
    return (int)(v & HL_REC_FN_MASK);
}
static uint64_t get_thread(cur_t* c) {
    uint64_t v = get_u(c);
    if (v > RD_THREAD_INDEX_MAX)
        bad(c, "a thread index beyond 16777215");
    return v;
}

static int ensure_segs(rd_dec_t* d, size_t n) {
    if (n <= d->segs_cap)
        return 0;
    size_t cap = d->segs_cap ? d->segs_cap : 256;
    while (cap < n)
        cap *= 2;
    uint64_t* fresh = realloc(d->segs, cap * sizeof *fresh);
    if (!fresh)
        return -1;
    d->segs = fresh;
    d->segs_cap = cap;
    return 0;
}

// The slot of the current thread's latest ALLOC site, found after a SWITCH by the thread's
// number (threads are numbered as they come, so the slots grow with the threads the trace
// names, not with their indices); NULL when memory runs out.
static HL_COLD uint32_t* last_site_find(rd_dec_t* d) {
    uint32_t k = idmap_add(&d->threads, d->thread);
    if (!k)
        return NULL;
    if (k >= d->last_site_cap) {
        size_t cap = d->last_site_cap ? d->last_site_cap * 2 : 64;
        uint32_t* fresh = realloc(d->last_site, cap * sizeof *fresh);
        if (!fresh)
            return NULL;
        memset(fresh + d->last_site_cap, 0, (cap - d->last_site_cap) * sizeof *fresh);
        d->last_site = fresh;
        d->last_site_cap = cap;
    }
    d->cur = k;
    return &d->last_site[k];
}
static inline uint32_t* last_site_of(rd_dec_t* d) {
    return hl_likely(d->cur != 0) ? &d->last_site[d->cur] : last_site_find(d);
}

// ALLOC, FREE and FREE_TEMP: the function in the tag, the thread and time implied.
static inline int decode_heap(cur_t* c, rd_record_t* r, int wire) {
    rd_dec_t* d = c->d;
    if (hl_unlikely(!c->is_heap_clean)) {
        memset(r, 0, sizeof *r);
        c->is_heap_clean = 1;
    }
    r->wire_tag = wire;
    r->fn = wire & HL_REC_FN_MASK;
    r->thread = d->thread;
    r->time_ns = d->now_ns;
    int kind = wire & ~HL_REC_FN_MASK;
    if (kind == REC_ALLOC) {
        uint64_t size = get_u(c);
        uint32_t stack = get_stack(c);
        if (hl_unlikely(c->bad))
            return DEC_MALFORMED;
        r->tag = REC_ALLOC;
        r->is_temporary = 0;
        uint32_t site = sites_name(&d->sites, size, stack, &r->u[3]);
        if (hl_unlikely(!site))
            return DEC_NOMEM;
        uint32_t* last = last_site_of(d);
        if (hl_unlikely(!last))
            return DEC_NOMEM;
        *last = site;
        r->u[0] = size;
        r->u[1] = stack;
        r->u[2] = site;
        return DEC_OK;
    }
    uint64_t site;
    if (kind == REC_FREE_TEMP) { // the thread's latest ALLOC: 0 when it made none
        const uint32_t* last = last_site_of(d);
        if (hl_unlikely(!last))
            return DEC_NOMEM;
        site = *last;
    } else {
        site = get_u(c);
        if (hl_unlikely(c->bad))
            return DEC_MALFORMED;
    }
    if (hl_unlikely(site == 0 || site > d->sites.n)) {
        c->bad_site = site;
        return DEC_BAD_SITE;
    }
    const sites_site_t* s = &d->sites.v[site];
    r->tag = REC_FREE;
    r->is_temporary = kind == REC_FREE_TEMP;
    r->u[0] = s->size;
    r->u[1] = s->stack;
    r->u[2] = site;
    r->u[3] = 0;
    return DEC_OK;
}

// FREE_EXPLICIT: a release the writer could not name by site.
static int decode_free_explicit(cur_t* c, rd_record_t* r) {
    rd_dec_t* d = c->d;
    r->tag = REC_FREE;
    r->fn = get_fn(c);
    r->is_temporary = get_u(c) != 0;
    r->u[0] = get_u(c);
    uint32_t stack = get_stack(c);
    if (c->bad)
        return DEC_MALFORMED;
    r->u[1] = stack;
    r->u[2] = sites_find(&d->sites, r->u[0], stack);
    if (!r->u[2] && sites_add_early(&d->sites, r->u[0], stack) != 0)
        return DEC_NOMEM;
    r->thread = d->thread;
    r->time_ns = d->now_ns;
    return DEC_OK;
}

// ALLOC_STATS: values and arenas counted by the record itself, each count bounded by the bytes
// left (a varint takes one at least) and by the format's limits; values and arena fields past
// the ones this version knows are skipped, those it knows and the record lacks read as not
// available (values) or 0 (arena fields).
static int decode_alloc_stats(cur_t* c, rd_record_t* r) {
    rd_dec_t* d = c->d;
    r->time_ns = get_time(c);
    r->u[0] = get_u(c);
    uint64_t available = get_u(c);
    uint64_t n = get_u(c);
    if (!c->bad && (n > HL_AS_VALUES_MAX || n > (uint64_t)(c->end - c->p)))
        bad(c, "more allocator values than the record holds");
    if (c->bad)
        return DEC_MALFORMED;
    for (uint64_t k = 0; k < n; k++) {
        uint64_t v = get_u(c);
        if (k < HL_AS_COUNT)
            r->u[2 + k] = v;
    }
    uint64_t known = n < HL_AS_COUNT ? n : HL_AS_COUNT;
    r->u[1] = available & ((1ull << known) - 1);
    r->u[2 + HL_AS_COUNT] = get_u(c);
    uint64_t m = get_u(c), fields = get_u(c);
    if (!c->bad && (m > HL_AS_ARENAS_MAX || fields > HL_AS_ARENA_FIELDS_MAX ||
                    m * fields > (uint64_t)(c->end - c->p) || m > r->u[2 + HL_AS_COUNT]))
        bad(c, "more arenas or arena fields than the record holds");
    if (c->bad)
        return DEC_MALFORMED;
    if (ensure_segs(d, (size_t)m * HL_AS_ARENA_FIELDS) != 0)
        return DEC_NOMEM;
    for (uint64_t i = 0; i < m; i++)
        for (uint64_t k = 0; k < fields || k < HL_AS_ARENA_FIELDS; k++) {
            uint64_t v = k < fields ? get_u(c) : 0;
            if (k < HL_AS_ARENA_FIELDS)
                d->segs[i * HL_AS_ARENA_FIELDS + k] = v;
        }
    r->nsegs = (uint32_t)m;
    r->segs = d->segs;
    return c->bad ? DEC_MALFORMED : DEC_OK;
}

static int decode_other(cur_t* c, rd_record_t* r, int wire) {
    rd_dec_t* d = c->d;
    memset(r, 0, sizeof *r);
    c->is_heap_clean = 0;
    r->tag = r->wire_tag = wire;
    switch (wire) {
    case REC_INFO:
        for (int i = 0; i < 6; i++)
            r->u[i] = get_u(c);
        r->s[0] = get_str(c);
        r->s[1] = get_str(c);
        r->u[6] = get_u(c);
        break;
    case REC_MODULE: {
        r->u[0] = get_u(c);
        r->u[1] = get_u(c);
        r->s[0] = get_str(c);
        r->s[1] = get_str(c);
        uint64_t n = get_u(c);
        if (!c->bad && (n > RD_SEGS_MAX || n * RD_SEG_FIELDS > (uint64_t)(c->end - c->p)))
            bad(c, "more segments than the record holds");
        if (c->bad)
            return DEC_MALFORMED;
        if (ensure_segs(d, (size_t)n * 3) != 0)
            return DEC_NOMEM;
        for (uint64_t i = 0; i < n * 3; i++)
            d->segs[i] = get_u(c);
        r->nsegs = (uint32_t)n;
        r->segs = d->segs;
        break;
    }
    case REC_MODULE_GONE:
        r->u[0] = get_u(c);
        break;
    case REC_THREAD:
        r->u[0] = get_thread(c);
        r->u[1] = get_u(c);
        break;
    case REC_STACK: {
        c->last_stack += (uint64_t)get_s(c);
        r->u[0] = c->last_stack;
        uint64_t back = get_u(c);
        if (back == 0 || back > r->u[0])
            bad(c, "a stack whose parent does not come before it");
        r->u[1] = r->u[0] - back;
        c->last_ip += (uint64_t)get_s(c);
        r->u[2] = c->last_ip;
        break;
    }
    case REC_MMAP:
        for (int i = 0; i < 4; i++)
            r->u[i] = get_u(c);
        r->u[4] = get_stack(c);
        r->thread = d->thread;
        r->time_ns = d->now_ns;
        break;
    case REC_MUNMAP:
        r->u[0] = get_u(c);
        r->u[1] = get_u(c);
        r->thread = d->thread;
        r->time_ns = d->now_ns;
        break;
    case REC_SAMPLE:
        r->time_ns = get_time(c);
        for (int i = 0; i < 4; i++)
            r->u[i] = get_u(c);
        break;
    case REC_ERROR:
        r->u[0] = get_u(c);
        r->u[1] = get_thread(c);
        r->time_ns = get_time(c);
        r->u[2] = get_stack(c);
        r->u[3] = get_u(c);
        r->u[4] = (uint64_t)get_fn(c);
        r->u[5] = get_u(c);
        if (r->u[5]) {
            r->u[6] = get_u(c);
            r->u[7] = get_stack(c);
            r->u[8] = (uint64_t)get_fn(c);
            r->u[9] = get_stack(c);
        }
        break;
    case REC_INHERIT: {
        r->u[0] = get_u(c);
        r->u[1] = get_u(c);
        uint32_t stack = get_stack(c);
        r->fn = get_fn(c);
        if (c->bad)
            return DEC_MALFORMED;
        r->u[2] = stack;
        r->u[3] = (uint64_t)r->fn;
        r->u[4] = sites_name(&d->sites, r->u[1], stack, &r->u[5]);
        if (!r->u[4])
            return DEC_NOMEM;
        break;
    }
    case REC_SCAN:
        r->time_ns = get_time(c);
        r->u[0] = get_u(c);
        r->u[1] = get_u(c);
        d->last_verdict = 0;
        break;
    case REC_VERDICT: {
        r->u[0] = get_u(c);
        d->last_verdict += (uint64_t)get_s(c);
        r->u[1] = d->last_verdict;
        r->u[2] = get_u(c);
        uint32_t stack = get_stack(c);
        r->fn = get_fn(c);
        r->u[5] = get_u(c);
        if (c->bad)
            return DEC_MALFORMED;
        r->u[3] = stack;
        r->u[4] = (uint64_t)r->fn;
        r->u[6] = sites_find(&d->sites, r->u[2], stack);
        break;
    }
    case REC_END:
        r->time_ns = get_time(c);
        r->u[0] = get_u(c);
        r->u[1] = get_u(c);
        break;
    case REC_EXEC:
        r->time_ns = get_time(c);
        r->s[0] = get_str(c);
        break;
    case REC_THREAD_NAME:
        r->u[0] = get_thread(c);
        r->time_ns = get_time(c);
        r->s[0] = get_str(c);
        break;
    case REC_TIME:
        r->time_ns = get_time(c);
        break;
    case REC_SWITCH:
        r->u[0] = r->thread = get_thread(c);
        if (!c->bad && r->thread != d->thread) {
            d->thread = r->thread;
            d->cur = 0; // its slot is found when a heap event needs it
        }
        break;
    case REC_FREE_EXPLICIT:
        return decode_free_explicit(c, r);
    case REC_ERROR_CHANGE: {
        r->u[0] = (uint64_t)get_s(c);
        r->u[1] = get_u(c);
        r->u[2] = get_u(c);
        if (r->u[2] > HL_CHANGE_BYTES || r->u[2] > r->u[1]) {
            bad(c, "an error change of more bytes than it spans or may carry");
            return DEC_MALFORMED;
        }
        // seen bytes in u[3..4], expected in u[5..6], 8 to a word, first in the low byte
        for (int half = 0; half < 2; half++)
            for (uint64_t k = 0; k < r->u[2]; k++) {
                uint64_t v = get_u(c);
                if (v > 255)
                    bad(c, "an error change byte above 255");
                r->u[3 + half * 2 + k / 8] |= (v & 255) << (8 * (k % 8));
            }
        break;
    }
    case REC_ALLOC_STATS:
        return decode_alloc_stats(c, r);
    case REC_NOTE:
        r->thread = d->thread;
        r->u[0] = get_u(c);
        r->u[1] = get_u(c);
        r->u[2] = get_u(c);
        break;
    default:
        bad(c, "an unknown tag");
        return DEC_MALFORMED;
    }
    return c->bad ? DEC_MALFORMED : DEC_OK;
}

static inline int decode_record(cur_t* c, rd_record_t* r) {
    int wire = *c->p++;
    if (hl_likely(wire >= REC_ALLOC && wire < REC_FREE_TEMP + HL_REC_FN_MASK + 1))
        return decode_heap(c, r, wire);
    return decode_other(c, r, wire);
}

int rd_dec_chunk(rd_dec_t* d, const uint8_t* raw, size_t n, uint64_t chunk_at, rd_callback_t cb,
                 void* arg, rd_result_t* res) {
    cur_t c = {.p = raw, .end = raw + n, .d = d};
    rd_record_t r;
    while (c.p < c.end) {
        const uint8_t* at = c.p;
        int rc = decode_record(&c, &r);
        if (hl_unlikely(rc != DEC_OK)) {
            unsigned long long pos = (unsigned long long)(at - raw), chunk = chunk_at;
            if (rc == DEC_NOMEM) {
                snprintf(res->message, sizeof res->message,
                         "out of memory at byte %llu of the chunk at byte %llu", pos, chunk);
                return -ENOMEM;
            }
            res->is_corrupt = 1;
            if (rc == DEC_BAD_SITE)
                snprintf(res->message, sizeof res->message,
                         "a release names site %llu, but %u sites are defined so far (record at "
                         "byte %llu of the chunk at byte %llu)",
                         (unsigned long long)c.bad_site, d->sites.n, pos, chunk);
            else
                snprintf(res->message, sizeof res->message,
                         "malformed record (tag %u: %s) at byte %llu of the chunk at byte %llu",
                         *at, c.why ? c.why : "a field runs past the chunk's end", pos, chunk);
            return -EINVAL;
        }
        res->records++;
        if (cb(&r, arg) != 0)
            return 1;
    }
    return 0;
}
