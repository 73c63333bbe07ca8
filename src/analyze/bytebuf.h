// SPDX-License-Identifier: MIT
// bytebuf.h - bytes appended to a buffer that doubles as it fills. An append that finds no
// memory, or would pass `max` (when set), marks the buffer failed, and a failed buffer takes
// nothing more: a writer appends freely and looks at `failed` once, at the end.
#ifndef HL_BYTEBUF_H
#define HL_BYTEBUF_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define BYTEBUF_FIRST 256 // the first allocation, in bytes

typedef struct bytebuf_s {
    uint8_t* p;
    size_t len, cap;
    size_t max; // 0: no bound but memory
    int failed;
} bytebuf_t;

static inline void bytebuf_put(bytebuf_t* b, const void* src, size_t n) {
    if (b->failed)
        return;
    if ((b->max && n > b->max - b->len) || n > SIZE_MAX / 2 - b->len) {
        b->failed = 1;
        return;
    }
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : BYTEBUF_FIRST;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t* fresh = realloc(b->p, cap);
        if (!fresh) {
            b->failed = 1;
            return;
        }
        b->p = fresh;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->len, src, n);
    b->len += n;
}

#endif
