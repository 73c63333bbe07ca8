// SPDX-License-Identifier: MIT
// encode.c - records into the raw bytes of a chunk (layout: src/common/format.h; the field
// encoders are inline in encode.h). Runs on the writer thread or under the writer lock; grows
// its buffer with agent pages, never malloc.
#define _GNU_SOURCE
#include <string.h>

#include "encode.h"
#include "os.h"

int enc_grow(hl_enc_t* e, size_t more) {
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

void enc_bytes(hl_enc_t* e, const void* p, size_t n) {
    enc_u(e, n);
    memcpy(e->buf + e->len, p, n);
    e->len += n;
}
