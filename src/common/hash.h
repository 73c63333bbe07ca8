// SPDX-License-Identifier: MIT
// hash.h - the string hash the analyzer's tables share (64-bit FNV-1a).
#ifndef HL_HASH_H
#define HL_HASH_H

#include <stdint.h>

static inline uint64_t hl_str_hash(const char* s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

#endif
