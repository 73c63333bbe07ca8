// SPDX-License-Identifier: MIT
// encode.h - field encoders for trace records. Callers reserve room first: enc_reserve(e, n)
// guarantees n more bytes (a varint takes at most HL_VARINT_MAX). The field encoders are inline:
// the writer runs them a few times per event, millions of times a second.
#ifndef HL_ENCODE_H
#define HL_ENCODE_H

#include <stddef.h>
#include <stdint.h>

#include "../common/compiler.h"
#include "../common/varint.h"

// A chunk being encoded: its raw bytes and the state its records are delta-coded against.
typedef struct hl_enc_s {
    uint8_t* buf;
    size_t len, cap;
    int64_t last_time;   // microseconds, of the chunk's last timed record
    int64_t last_mark;   // nanoseconds, of the last TIME written (heap events are this old)
    uint32_t cur_thread; // of the heap events: the last SWITCH (0: none yet in this chunk)
    uint64_t last_verdict_addr;
    uint64_t last_ip;    // STACK records delta-code their address and id against the previous
    uint32_t last_stack; // one in the chunk
} hl_enc_t;

HL_COLD int enc_grow(hl_enc_t* e, size_t more); // 0, or -1 when out of memory

static inline int enc_reserve(hl_enc_t* e, size_t more) {
    return hl_likely(e->len + more <= e->cap) ? 0 : enc_grow(e, more);
}

static inline void enc_tag(hl_enc_t* e, int tag) { e->buf[e->len++] = (uint8_t)tag; }

static inline void enc_u(hl_enc_t* e, uint64_t v) {
    e->len = (size_t)(varint_put(e->buf + e->len, v) - e->buf);
}

static inline void enc_s(hl_enc_t* e, int64_t v) {
    e->len = (size_t)(varint_put_signed(e->buf + e->len, v) - e->buf);
}

void enc_bytes(hl_enc_t* e, const void* p, size_t n);

// Times are written in microseconds: events a few hundred nanoseconds apart then share one
// value, and their deltas (mostly 0) compress to almost nothing. dt against the previous timed
// record.
static inline void enc_time(hl_enc_t* e, int64_t t_ns) {
    int64_t t = t_ns / 1000;
    enc_s(e, t - e->last_time);
    e->last_time = t;
}


#endif
