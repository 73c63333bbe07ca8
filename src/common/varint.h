// SPDX-License-Identifier: MIT
// varint.h - LEB128 unsigned varints and zigzag signed deltas, with bounds-checked decoding.
// The trace stores every integer this way: small deltas (time, addresses of neighbouring
// blocks, stack ids) take one or two bytes instead of eight.
#ifndef HL_VARINT_H
#define HL_VARINT_H

#include <stddef.h>
#include <stdint.h>

#define HL_VARINT_MAX 10 // bytes a 64-bit value can take

// Append v at p; returns the byte past the last one written. p needs HL_VARINT_MAX bytes.
static inline uint8_t* varint_put(uint8_t* p, uint64_t v) {
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

static inline uint64_t zigzag_encode(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }
static inline int64_t zigzag_decode(uint64_t v) { return (int64_t)(v >> 1) ^ -(int64_t)(v & 1); }

static inline uint8_t* varint_put_signed(uint8_t* p, int64_t v) {
    return varint_put(p, zigzag_encode(v));
}

// Decode one varint from [*pp, end). On success stores it in *out, advances *pp and returns 0.
// Returns -1 when the input ends inside the varint or the value overflows 64 bits.
static inline int varint_get(const uint8_t** pp, const uint8_t* end, uint64_t* out) {
    const uint8_t* p = *pp;
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (p >= end)
            return -1;
        uint8_t b = *p++;
        if (shift == 63 && b > 1)
            return -1;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *pp = p;
            *out = v;
            return 0;
        }
    }
    return -1;
}

#endif
