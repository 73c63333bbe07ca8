// SPDX-License-Identifier: MIT
// idmap.c - the slow paths of idmap.h: a new id, growing the array or the table.
#include "idmap.h"

#include <stdlib.h>
#include <string.h>

// The array covers ids below this whatever else the map holds (256 KiB), and beyond it up to
// IDMAP_DIRECT_PER_ID slots per number given: dense ids stay one load away, while one huge id
// in a damaged or hostile trace costs a hash slot, not gigabytes.
#define IDMAP_DIRECT_FREE (1u << 16)
#define IDMAP_DIRECT_PER_ID 8u

void idmap_init(idmap_t* m) {
    memset(m, 0, sizeof *m);
}

void idmap_free(idmap_t* m) {
    free(m->direct);
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

uint32_t idmap_find_hashed(const idmap_t* m, uint64_t id) {
    for (size_t i = idmap_hash(id) & m->mask;; i = (i + 1) & m->mask) {
        if (m->keys[i] == id + 1)
            return m->vals[i];
        if (!m->keys[i])
            return 0;
    }
}

static void hash_put(uint64_t* keys, uint32_t* vals, size_t mask, uint64_t id, uint32_t v) {
    size_t i = idmap_hash(id) & mask;
    while (keys[i])
        i = (i + 1) & mask;
    keys[i] = id + 1;
    vals[i] = v;
}

// The table rebuilt with `cap` slots, keeping only the ids the array does not cover.
static int hash_rebuild(idmap_t* m, size_t cap) {
    uint64_t* keys = calloc(cap, sizeof *keys);
    uint32_t* vals = calloc(cap, sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return -1;
    }
    size_t kept = 0;
    for (size_t i = 0; m->keys && i <= m->mask; i++) {
        if (!m->keys[i])
            continue;
        uint64_t id = m->keys[i] - 1;
        if (id < m->direct_cap) {
            m->direct[id] = m->vals[i];
            continue;
        }
        hash_put(keys, vals, cap - 1, id, m->vals[i]);
        kept++;
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->mask = cap - 1;
    m->nhashed = kept;
    return 0;
}

// The array grown to cover id, when that keeps it dense enough. 1 grown, 0 not, -1 no memory.
static int direct_grow(idmap_t* m, uint64_t id) {
    uint64_t limit = IDMAP_DIRECT_FREE + (uint64_t)IDMAP_DIRECT_PER_ID * ((uint64_t)m->n + 1);
    if (id >= limit)
        return 0;
    size_t cap = m->direct_cap ? m->direct_cap : 1024;
    while (cap <= id)
        cap *= 2;
    uint32_t* fresh = realloc(m->direct, cap * sizeof *fresh);
    if (!fresh)
        return -1;
    memset(fresh + m->direct_cap, 0, (cap - m->direct_cap) * sizeof *fresh);
    m->direct = fresh;
    m->direct_cap = cap;
    // Hashed ids the array now covers move into it.
    if (m->nhashed && hash_rebuild(m, m->mask + 1) != 0)
        return -1;
    return 1;
}

uint32_t idmap_add(idmap_t* m, uint64_t id) {
    uint32_t have = idmap_find(m, id);
    if (have)
        return have;
    if (m->n == UINT32_MAX - 1)
        return 0;
    int grown = id >= m->direct_cap ? direct_grow(m, id) : 1;
    if (grown < 0)
        return 0;
    uint32_t v = m->n + 1;
    if (grown) {
        m->direct[id] = v;
    } else {
        if ((!m->keys || (m->nhashed + 1) * 2 > m->mask + 1) &&
            hash_rebuild(m, m->keys ? (m->mask + 1) * 2 : 256) != 0)
            return 0;
        hash_put(m->keys, m->vals, m->mask, id, v);
        m->nhashed++;
    }
    m->n = v;
    return v;
}
