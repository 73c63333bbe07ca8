// SPDX-License-Identifier: MIT
// idmap.h - numbers for the ids a trace names (stack ids, thread indices): the k-th distinct id
// added gets number k, so arrays indexed by number grow with the ids a trace holds, never with
// the largest value a record can carry. Ids are sparse in real traces too (a fork child's trace
// names its parent's stack ids; a thread index counts every thread of the process lineage).
// Small ids go straight to an array while it stays dense enough; the others to a hash table.
#ifndef HL_IDMAP_H
#define HL_IDMAP_H

#include <stddef.h>
#include <stdint.h>

#include "../common/compiler.h"

typedef struct idmap_s {
    uint32_t* direct; // direct[id]: its number, 0 none (every id below direct_cap lives here)
    size_t direct_cap;
    uint64_t* keys; // open addressing, at most half full; key + 1, 0 = empty
    uint32_t* vals;
    size_t mask;
    size_t nhashed;
    uint32_t n; // numbers given: 1..n
} idmap_t;

void idmap_init(idmap_t* m);
void idmap_free(idmap_t* m);

static inline size_t idmap_hash(uint64_t key) {
    uint64_t h = (key + 1) * 0x9E3779B97F4A7C15ull;
    return (size_t)(h ^ (h >> 29));
}

HL_NOINLINE uint32_t idmap_find_hashed(const idmap_t* m, uint64_t id);

// The number of id, 0 when it was never added.
static inline uint32_t idmap_find(const idmap_t* m, uint64_t id) {
    if (hl_likely(id < m->direct_cap))
        return m->direct[id];
    return m->nhashed ? idmap_find_hashed(m, id) : 0;
}

// The number of id, given now when it is new. 0 when memory runs out.
uint32_t idmap_add(idmap_t* m, uint64_t id);

#endif
