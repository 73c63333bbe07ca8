// SPDX-License-Identifier: MIT
// checkopts.h - the heap checking settings' values, read the same way by heaplens run (to refuse
// a bad one in one line) and by the agent (which may be given them by hand): --paint's
// "alloc:0xAA,free:0xDD" (either half alone) and --hoard's SIZE with a K, M or G suffix.
// Neither allocates nor touches errno's callers' state beyond their arguments.
#ifndef HL_CHECKOPTS_H
#define HL_CHECKOPTS_H

#include <stdint.h>
#include <string.h>

// The largest hoard: more than any heap this tool would be asked to hold back (1 TiB).
#define HL_HOARD_MAX (1ull << 40)
// Red zones up to this many bytes on each side (as --guard).
#define HL_REDZONE_MAX 4096

// A byte value: decimal or 0x-prefixed hex, 0..255. Returns -1 when s[0..len) is not one.
static inline int hl_parse_byte(const char* s, size_t len) {
    unsigned v = 0, base = 10;
    if (len > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        s += 2;
        len -= 2;
    }
    if (!len || len > 3)
        return -1;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        unsigned d;
        if (c >= '0' && c <= '9')
            d = (unsigned)(c - '0');
        else if (base == 16 && c >= 'a' && c <= 'f')
            d = (unsigned)(c - 'a' + 10);
        else if (base == 16 && c >= 'A' && c <= 'F')
            d = (unsigned)(c - 'A' + 10);
        else
            return -1;
        v = v * base + d;
    }
    return v <= 255 ? (int)v : -1;
}

// "alloc:V,free:V", either part alone, in either order: *alloc and *free get the byte values
// (-1 for a part not given). Returns 0, or -1 when s is anything else.
static inline int hl_parse_paint(const char* s, int* alloc, int* free_) {
    *alloc = *free_ = -1;
    if (!*s)
        return -1;
    while (*s) {
        size_t len = strcspn(s, ",");
        int* into;
        size_t name;
        if (len > 6 && !strncmp(s, "alloc:", 6)) {
            into = alloc;
            name = 6;
        } else if (len > 5 && !strncmp(s, "free:", 5)) {
            into = free_;
            name = 5;
        } else {
            return -1;
        }
        if (*into >= 0 || (*into = hl_parse_byte(s + name, len - name)) < 0)
            return -1; // a part twice, or not a byte
        s += len;
        if (*s == ',' && !*++s)
            return -1;
    }
    return 0;
}

// A size in bytes: digits with an optional K, M or G (powers of 1024), 1..HL_HOARD_MAX.
// Returns 0 with *out set, or -1.
static inline int hl_parse_size(const char* s, uint64_t* out) {
    uint64_t v = 0;
    const char* p = s;
    for (; *p >= '0' && *p <= '9'; p++) {
        v = v * 10 + (uint64_t)(*p - '0');
        if (v > HL_HOARD_MAX)
            return -1;
    }
    if (p == s)
        return -1;
    unsigned shift = 0;
    switch (*p) {
    case 'k': case 'K': shift = 10; p++; break;
    case 'm': case 'M': shift = 20; p++; break;
    case 'g': case 'G': shift = 30; p++; break;
    default: break;
    }
    if (*p || v == 0 || v > (HL_HOARD_MAX >> shift))
        return -1;
    *out = v << shift;
    return 0;
}

// --guard-pages's rate: "1" (every allocation) or "1/N" (one in N), N from 1 to 2^31.
// Returns 0 with *every = N, or -1.
static inline int hl_parse_rate(const char* s, uint32_t* every) {
    if (!strcmp(s, "1")) {
        *every = 1;
        return 0;
    }
    if (strncmp(s, "1/", 2) != 0 || !s[2])
        return -1;
    uint64_t v = 0;
    for (const char* p = s + 2; *p; p++) {
        if (*p < '0' || *p > '9' || (v = v * 10 + (uint64_t)(*p - '0')) > (1ull << 31))
            return -1;
    }
    if (!v)
        return -1;
    *every = (uint32_t)v;
    return 0;
}

#endif
