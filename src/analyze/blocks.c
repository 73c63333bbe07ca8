// SPDX-License-Identifier: MIT
// blocks.c - the live-block store of blocks.h: per-thread windows of recent ids, and an
// open-addressing table (linear probing, backward-shift deletion) for the older blocks.
#include "blocks.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define WINDOW_FIRST 64
#define WINDOW_MAX (1u << 24)
#define SEQ_MASK ((1ull << 40) - 1)

static inline uint64_t key_at(const char* e) {
    uint64_t k;
    memcpy(&k, e, sizeof k);
    return k;
}

// A big table is its own mapping: its pages cost memory only once touched, and it goes back
// whole when freed.
static void* table_alloc(size_t n, size_t size) {
    if (n > SIZE_MAX / size)
        return NULL;
    if (n * size < (1u << 20))
        return calloc(n, size);
    void* p = mmap(NULL, n * size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void table_release(void* p, size_t n, size_t size) {
    if (!p)
        return;
    if (n * size < (1u << 20))
        free(p);
    else
        munmap(p, n * size);
}

// Blocks reach the table in seq order (leaving a window, or read in order), so runs of 64
// consecutive seqs sit two slots apart from a hashed point: the table is written and read in
// order instead of at one random place (a cache miss) per block, and a run of blocks that are
// all alive stays half empty.
static inline size_t slot_of(uint64_t key, size_t mask) {
    uint64_t h = (key >> 6) * 0x9E3779B97F4A7C15ull;
    return (size_t)((h ^ (h >> 32)) + 2 * (key & 63)) & mask;
}

// ---------------------------------------------------------------------------------------------
// The table
// ---------------------------------------------------------------------------------------------
static int table_resize(bs_t* s, size_t cap) {
    char* fresh = table_alloc(cap, s->esize);
    if (!fresh)
        return -1;
    for (size_t i = 0; i < s->table_cap; i++) {
        const char* e = s->table + i * s->esize;
        uint64_t k = key_at(e);
        if (!k)
            continue;
        size_t j = slot_of(k, cap - 1);
        while (key_at(fresh + j * s->esize))
            j = (j + 1) & (cap - 1);
        memcpy(fresh + j * s->esize, e, s->esize);
    }
    table_release(s->table, s->table_cap, s->esize);
    s->table = fresh;
    s->table_cap = cap;
    return 0;
}

static char* table_find(const bs_t* s, uint64_t key) {
    if (!s->table_cap)
        return NULL;
    size_t mask = s->table_cap - 1;
    for (size_t i = slot_of(key, mask);; i = (i + 1) & mask) {
        char* e = s->table + i * s->esize;
        uint64_t k = key_at(e);
        if (!k)
            return NULL;
        if (k == key)
            return e;
    }
}

// The entry for key in the table (its old contents, if it was there); NULL when out of memory.
static char* table_slot(bs_t* s, uint64_t key, int* existed) {
    if ((s->in_table + 1) * 2 > s->table_cap &&
        table_resize(s, s->table_cap ? s->table_cap * 2 : 1024) != 0)
        return NULL;
    size_t mask = s->table_cap - 1, i = slot_of(key, mask);
    for (;; i = (i + 1) & mask) {
        char* e = s->table + i * s->esize;
        uint64_t k = key_at(e);
        if (k == key) {
            *existed = 1;
            return e;
        }
        if (!k) {
            *existed = 0;
            s->in_table++;
            return e;
        }
    }
}

static void table_del(bs_t* s, char* e) {
    size_t mask = s->table_cap - 1, i = (size_t)(e - s->table) / s->esize, j = i;
    memset(e, 0, s->esize);
    s->in_table--;
    for (;;) {
        j = (j + 1) & mask;
        char* ej = s->table + j * s->esize;
        uint64_t k = key_at(ej);
        if (!k)
            return;
        size_t home = slot_of(k, mask);
        if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j))) {
            memcpy(s->table + i * s->esize, ej, s->esize);
            memset(ej, 0, s->esize);
            i = j;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The windows
// ---------------------------------------------------------------------------------------------
static bs_window_t* window_of(bs_t* s, uint64_t thread) {
    if (thread >= s->nwindows) {
        if (thread > (1u << 24))
            return NULL;
        size_t cap = s->nwindows ? s->nwindows : 16;
        while (cap <= thread)
            cap *= 2;
        bs_window_t* fresh = realloc(s->windows, cap * sizeof *fresh);
        if (!fresh)
            return NULL;
        memset(fresh + s->nwindows, 0, (cap - s->nwindows) * sizeof *fresh);
        s->windows = fresh;
        s->nwindows = cap;
    }
    return &s->windows[thread];
}

static int window_resize(const bs_t* s, bs_window_t* w, size_t cap) {
    char* fresh = calloc(cap, s->esize);
    if (!fresh)
        return -1;
    for (size_t i = 0; i < w->cap; i++) {
        const char* e = w->ring + i * s->esize;
        uint64_t k = key_at(e);
        if (k)
            memcpy(fresh + ((k & SEQ_MASK) & (cap - 1)) * s->esize, e, s->esize);
    }
    free(w->ring);
    w->ring = fresh;
    w->cap = cap;
    return 0;
}

// Makes room for seq at the top of w. A window at least a quarter alive, or one that has left
// an eighth of its size in live blocks behind since it last grew, doubles (up to WINDOW_MAX:
// a program building a structure of millions of blocks keeps them all in one dense ring);
// else it slides, moving the blocks it leaves behind to the table: memory stays within a few
// times the blocks alive across the window, and the table holds only the long-lived few.
static int window_reach(bs_t* s, bs_window_t* w, uint64_t seq) {
    while (seq - w->base >= w->cap) {
        if ((w->live * 4 >= w->cap || w->moved * 8 >= w->cap) && w->cap < WINDOW_MAX) {
            if (window_resize(s, w, w->cap * 2) != 0)
                return -1;
            w->moved = 0;
            continue;
        }
        uint64_t new_base = seq - w->cap + 1;
        uint64_t stop = new_base - w->base < w->cap ? new_base : w->base + w->cap;
        for (uint64_t q = w->base; q < stop && w->live; q++) {
            char* e = w->ring + (q & (w->cap - 1)) * s->esize;
            uint64_t k = key_at(e);
            if (!k || (k & SEQ_MASK) != q)
                continue;
            int existed;
            char* t = table_slot(s, k, &existed);
            if (!t)
                return -1;
            memcpy(t, e, s->esize);
            memset(e, 0, s->esize);
            w->live--;
            w->moved++;
        }
        w->base = new_base;
    }
    return 0;
}

static char* window_find(const bs_t* s, uint64_t key) {
    uint64_t thread = key >> 40, seq = key & SEQ_MASK;
    if (thread >= s->nwindows)
        return NULL;
    const bs_window_t* w = &s->windows[thread];
    if (!w->cap || seq < w->base || seq - w->base >= w->cap)
        return NULL;
    return w->ring + (seq & (w->cap - 1)) * s->esize;
}

static int in_window(const bs_t* s, uint64_t key) {
    uint64_t thread = key >> 40, seq = key & SEQ_MASK;
    const bs_window_t* w = thread < s->nwindows ? &s->windows[thread] : NULL;
    return w && w->cap && seq >= w->base && seq - w->base < w->cap;
}

// ---------------------------------------------------------------------------------------------
// The store
// ---------------------------------------------------------------------------------------------
void bs_init(bs_t* s, size_t esize) {
    memset(s, 0, sizeof *s);
    s->esize = esize;
}

void bs_free(bs_t* s) {
    for (size_t i = 0; i < s->nwindows; i++)
        free(s->windows[i].ring);
    free(s->windows);
    table_release(s->table, s->table_cap, s->esize);
    size_t esize = s->esize;
    bs_init(s, esize);
}

void* bs_put(bs_t* s, uint64_t key) {
    uint64_t seq = key & SEQ_MASK;
    bs_window_t* w = window_of(s, key >> 40);
    char* e = NULL;
    int existed = 0;
    if (w && !w->cap && window_resize(s, w, WINDOW_FIRST) == 0)
        w->base = seq;
    if (w && w->cap && seq >= w->base && window_reach(s, w, seq) == 0) {
        e = w->ring + (seq & (w->cap - 1)) * s->esize;
        existed = key_at(e) == key;
        if (!existed)
            w->live++;
    } else {
        e = table_slot(s, key, &existed); // older than its thread's window
    }
    if (!e)
        return NULL;
    memset(e, 0, s->esize);
    memcpy(e, &key, sizeof key);
    if (!existed && ++s->used > s->most)
        s->most = s->used;
    return e;
}

void* bs_find(const bs_t* s, uint64_t key) {
    if (in_window(s, key)) {
        char* e = window_find(s, key);
        return key_at(e) == key ? e : NULL;
    }
    return table_find(s, key);
}

void bs_del(bs_t* s, void* entry) {
    char* e = entry;
    s->used--;
    if (s->table && e >= s->table && e < s->table + s->table_cap * s->esize) {
        table_del(s, e);
        return;
    }
    uint64_t thread = key_at(e) >> 40; // in its thread's window
    if (thread < s->nwindows)
        s->windows[thread].live--;
    memset(e, 0, s->esize);
}

void* bs_next(const bs_t* s, bs_iter_t* it) {
    for (; it->window < s->nwindows; it->window++, it->i = 0) {
        const bs_window_t* w = &s->windows[it->window];
        while (it->i < w->cap) {
            char* e = w->ring + it->i++ * s->esize;
            if (key_at(e))
                return e;
        }
    }
    while (it->i < s->table_cap) {
        char* e = s->table + it->i++ * s->esize;
        if (key_at(e))
            return e;
    }
    return NULL;
}

void bs_shrink(bs_t* s) {
    size_t cap = 1024;
    while (cap < s->in_table * 2 + 2)
        cap *= 2;
    if (cap < s->table_cap)
        table_resize(s, cap);
}
