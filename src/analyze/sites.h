// SPDX-License-Identifier: MIT
// sites.h - the reader's numbering of allocation sites (format.h): the k-th distinct (size,
// stack) pair an ALLOC or INHERIT record names is site k, and a FREE names its block by site.
// Every ALLOC looks its pair up, so the hash table keeps the pair beside its number: one slot
// read per lookup, not a slot and then the site.
#ifndef HL_SITES_H
#define HL_SITES_H

#include <stddef.h>
#include <stdint.h>

#include "../common/compiler.h"

typedef struct sites_site_s {
    uint64_t size;
    uint32_t stack;
} sites_site_t;

typedef struct sites_slot_s {
    uint64_t size;
    uint32_t stack;
    uint32_t id; // 0: an empty slot
} sites_slot_t;

// A stack's first site of a size below 4 GiB, found at the stack's id: the agent numbers
// stacks as it makes them, so these entries are read and written in order where a hash slot
// is a cache miss per record (a trace of millions of distinct stacks has as many sites). Made
// in chunks as ids reach them; ids from SITES_FIRST_STACKS on go to the table only.
typedef struct sites_first_s {
    uint32_t id; // 0: the stack has no site here
    uint32_t size;
} sites_first_t;
#define SITES_FIRST_SHIFT 10 // 1,024 stacks (8 KiB) a chunk
#define SITES_FIRST_STACKS (1u << 26)
#define SITES_FIRST_CHUNKS (SITES_FIRST_STACKS >> SITES_FIRST_SHIFT)

// A pair released by FREE_EXPLICIT before any ALLOC named it (another thread's block, freed in
// the instant it was made): settled when the pair gets its site.
typedef struct sites_early_s {
    uint64_t size;
    uint32_t stack;
    uint32_t count;
} sites_early_t;

typedef struct sites_s {
    sites_site_t* v;     // v[k] is site k; v[0] unused
    uint32_t n;          // sites defined so far
    size_t vcap;
    sites_first_t** first; // SITES_FIRST_CHUNKS chunk pointers, made on first use
    sites_slot_t* slots;   // every other pair: open addressing, at most half full
    size_t mask;
    uint32_t nslots;       // pairs in slots
    sites_early_t* early;
    size_t nearly, early_cap;
} sites_t;

void sites_init(sites_t* s);
void sites_free(sites_t* s);

// Defines the next site for a pair not in the table. Returns its number, 0 when memory runs
// out; *early is how many FREE_EXPLICIT records released the pair before (sites_add_early).
HL_NOINLINE uint32_t sites_define(sites_t* s, uint64_t size, uint32_t stack, uint64_t* early);
// Notes a FREE_EXPLICIT of a pair no site names yet. 0, or -1 when memory runs out.
int sites_add_early(sites_t* s, uint64_t size, uint32_t stack);

// Sizes are mostly small multiples of 16 and stack ids small numbers: mixing them with a plain
// xor would send many pairs to one slot, so each goes through its own multiply first.
static inline size_t sites_hash(uint64_t size, uint32_t stack) {
    uint64_t h = (size * 0x9E3779B97F4A7C15ull) ^ stack;
    h *= 0xBF58476D1CE4E5B9ull;
    return (size_t)(h ^ (h >> 31));
}

// The stack's entry, or NULL when its chunk is not made (or it has none).
static inline sites_first_t* sites_first_of(const sites_t* s, uint32_t stack) {
    if (stack >= SITES_FIRST_STACKS || !s->first)
        return NULL;
    sites_first_t* c = s->first[stack >> SITES_FIRST_SHIFT];
    return c ? &c[stack & ((1u << SITES_FIRST_SHIFT) - 1)] : NULL;
}

// The site of (size, stack), or 0 when no ALLOC or INHERIT named the pair yet.
static inline uint32_t sites_find(const sites_t* s, uint64_t size, uint32_t stack) {
    if (size <= UINT32_MAX && stack < SITES_FIRST_STACKS) {
        const sites_first_t* f = sites_first_of(s, stack);
        if (!f || !f->id)
            return 0; // the stack's first pair of such a size would be here
        if (f->size == size)
            return f->id;
    }
    if (!s->slots)
        return 0;
    for (size_t i = sites_hash(size, stack) & s->mask;; i = (i + 1) & s->mask) {
        const sites_slot_t* e = &s->slots[i];
        if (e->size == size && e->stack == stack && e->id)
            return e->id;
        if (!e->id)
            return 0;
    }
}

// The site an ALLOC or INHERIT of (size, stack) names, defining it when the pair is new; 0 when
// memory runs out. *early: see sites_define (0 for a pair seen before).
static inline uint32_t sites_name(sites_t* s, uint64_t size, uint32_t stack, uint64_t* early) {
    uint32_t id = sites_find(s, size, stack);
    if (hl_likely(id != 0)) {
        *early = 0;
        return id;
    }
    return sites_define(s, size, stack, early);
}

#endif
