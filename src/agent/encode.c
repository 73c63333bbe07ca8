// SPDX-License-Identifier: MIT
// encode.c - records into the raw bytes of a chunk (layout: src/common/format.h). Runs on the
// writer thread or under the writer lock; grows its buffer with agent pages, never malloc.
#define _GNU_SOURCE
#include <string.h>

#include "../common/varint.h"
#include "agent.h"
#include "encode.h"

int enc_reserve(hl_enc_t* e, size_t more) {
    if (e->len + more <= e->cap)
        return 0;
    size_t cap = e->cap ? e->cap : (1u << 20);
    while (cap < e->len + more)
        cap *= 2;
    uint8_t* fresh = os_map(cap);
    if (!fresh)
        return -1;
    if (e->buf) {
        memcpy(fresh, e->buf, e->len);
        os_unmap(e->buf, e->cap);
    }
    e->buf = fresh;
    e->cap = cap;
    return 0;
}

void enc_u(hl_enc_t* e, uint64_t v) { e->len = (size_t)(varint_put(e->buf + e->len, v) - e->buf); }
void enc_s(hl_enc_t* e, int64_t v) {
    e->len = (size_t)(varint_put_signed(e->buf + e->len, v) - e->buf);
}
void enc_tag(hl_enc_t* e, int tag) { e->buf[e->len++] = (uint8_t)tag; }

void enc_bytes(hl_enc_t* e, const void* p, size_t n) {
    enc_u(e, n);
    memcpy(e->buf + e->len, p, n);
    e->len += n;
}

// Times are written in microseconds: events a few hundred nanoseconds apart then share one
// value, and their deltas (mostly 0) compress to almost nothing.
void enc_time(hl_enc_t* e, int64_t t_ns) {
    int64_t t = t_ns / 1000;
    enc_s(e, t - e->last_time);
    e->last_time = t;
}

void enc_addr(hl_enc_t* e, uint64_t a) {
    enc_s(e, (int64_t)(a - e->last_addr));
    e->last_addr = a;
}
