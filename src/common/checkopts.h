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

// --guard-sites: heaplens run resolves the REGEX over the symbol tables of the program and its
// libraries and gives the agent the functions' address ranges (the agent runs no regex and
// reads no symbol table), as guard_sites=ENTRY;ENTRY... where ENTRY is KEY@VADDR+LEN,VADDR+LEN...
// (hex, link-time addresses, ascending and disjoint), KEY a module's build-id in hex or its path
// (starting with '/'); "-" alone: the REGEX matched nothing, so no allocation is guarded.
// The agent holds this many ranges at most (the run refuses more): with ~20 bytes a range the
// setting stays under the kernel's 128 KiB limit on one environment string.
#define HL_GSITES_MAX 4096

typedef struct hl_gsites_entry_s {
    const char* key;
    size_t key_len;
    const char* ranges; // VADDR+LEN,... up to end
    const char* end;
} hl_gsites_entry_t;

static inline int hl_gsites_hex(const char** s, const char* end, uint64_t* out) {
    uint64_t v = 0;
    const char* p = *s;
    for (; p < end; p++) {
        int d = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;
        if (d < 0)
            break;
        if (v >> 60)
            return -1;
        v = v << 4 | (uint64_t)d;
    }
    if (p == *s)
        return -1;
    *s = p;
    *out = v;
    return 0;
}

// The next entry from *s (advanced past it): 1, 0 at the end, -1 when malformed.
static inline int hl_gsites_entry(const char** s, hl_gsites_entry_t* e) {
    const char* p = *s;
    if (!*p)
        return 0;
    const char* at = strchr(p, '@');
    const char* semi = strchr(p, ';');
    if (!at || at == p || (semi && (semi < at || !semi[1])))
        return -1;
    e->key = p;
    e->key_len = (size_t)(at - p);
    e->ranges = at + 1;
    e->end = semi ? semi : at + 1 + strlen(at + 1);
    *s = semi ? semi + 1 : e->end;
    return 1;
}

// The next range of an entry's [*s, end): 1 with *vaddr, *len; 0 at the end; -1 when malformed
// (not hex, empty, or below or overlapping the previous one, whose end is *floor).
static inline int hl_gsites_range(const char** s, const char* end, uint64_t* floor,
                                  uint64_t* vaddr, uint64_t* len) {
    if (*s >= end)
        return 0;
    if (hl_gsites_hex(s, end, vaddr) || *s >= end || *(*s)++ != '+' ||
        hl_gsites_hex(s, end, len) || !*len || *vaddr < *floor || *vaddr + *len < *vaddr)
        return -1;
    if (*s < end && *(*s)++ != ',')
        return -1;
    if (*s == end && (*s)[-1] == ',')
        return -1;
    *floor = *vaddr + *len;
    return 1;
}

// Is the whole value well formed? 0, or -1.
static inline int hl_gsites_check(const char* s) {
    if (!strcmp(s, "-"))
        return 0;
    hl_gsites_entry_t e;
    int r, n = 0;
    while ((r = hl_gsites_entry(&s, &e)) == 1) {
        uint64_t floor = 0, v, l;
        const char* q = e.ranges;
        int k;
        while ((k = hl_gsites_range(&q, e.end, &floor, &v, &l)) == 1)
            ;
        if (k < 0 || q == e.ranges)
            return -1;
        n++;
    }
    return r < 0 || !n ? -1 : 0;
}

#endif
