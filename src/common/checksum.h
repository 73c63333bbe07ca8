// SPDX-License-Identifier: MIT
// checksum.h - the 32-bit check of a trace chunk's decompressed bytes (format.h), computable
// over the chunk in parts of any length (the writer feeds a chunk piecewise). Not
// cryptographic: it tells a damaged or mis-decoded chunk from a good one, at a few cycles per
// 8 bytes (a 1 MiB chunk in a fraction of a millisecond).
#ifndef HL_CHECKSUM_H
#define HL_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct hl_checksum_s {
    uint64_t h;
    uint64_t len;
    uint8_t tail[8]; // bytes not yet folded in (len % 8 of them)
} hl_checksum_t;

static inline void hl_checksum_init(hl_checksum_t* c) {
    c->h = 0x9E3779B97F4A7C15ull;
    c->len = 0;
}

static inline uint64_t hl_checksum_mix(uint64_t h, uint64_t w) {
    h = (h ^ w) * 0xff51afd7ed558ccdull;
    return h ^ (h >> 29);
}

static inline void hl_checksum_update(hl_checksum_t* c, const void* data, size_t n) {
    const uint8_t* p = data;
    unsigned have = (unsigned)(c->len & 7);
    c->len += n;
    if (have) {
        while (have < 8 && n) {
            c->tail[have++] = *p++;
            n--;
        }
        if (have < 8)
            return;
        uint64_t w;
        memcpy(&w, c->tail, 8);
        c->h = hl_checksum_mix(c->h, w);
    }
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c->h = hl_checksum_mix(c->h, w);
    }
    memcpy(c->tail, p, n);
}

static inline uint32_t hl_checksum_final(const hl_checksum_t* c) {
    uint64_t w = 0;
    for (unsigned i = 0; i < (unsigned)(c->len & 7); i++)
        w |= (uint64_t)c->tail[i] << (8 * i);
    uint64_t h = hl_checksum_mix(c->h ^ c->len, w) * 0xc4ceb9fe1a85ec53ull;
    return (uint32_t)(h ^ (h >> 32));
}

// The checksum of one buffer.
static inline uint32_t hl_checksum32(const void* data, size_t n) {
    hl_checksum_t c;
    hl_checksum_init(&c);
    hl_checksum_update(&c, data, n);
    return hl_checksum_final(&c);
}

#endif
