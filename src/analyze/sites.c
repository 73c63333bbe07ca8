// SPDX-License-Identifier: MIT
// sites.c - the slow paths of the site table (sites.h): a new site, growing, early releases.
#include "sites.h"

#include <stdlib.h>
#include <string.h>

#define SITES_EARLY_MAX 4096 // more FREE_EXPLICIT records ahead of their ALLOC: a damaged trace

void sites_init(sites_t* s) { memset(s, 0, sizeof *s); }

void sites_free(sites_t* s) {
    if (s->first)
        for (size_t c = 0; c < SITES_FIRST_CHUNKS; c++)
            free(s->first[c]);
    free(s->first);
    free(s->v);
    free(s->slots);
    free(s->early);
    memset(s, 0, sizeof *s);
}

static void slot_put(sites_slot_t* slots, size_t mask, uint64_t size, uint32_t stack, uint32_t id) {
    size_t i = sites_hash(size, stack) & mask;
    while (slots[i].id)
        i = (i + 1) & mask;
    slots[i] = (sites_slot_t){.size = size, .stack = stack, .id = id};
}

// Is site k the one its stack's entry holds?
static int is_first(const sites_t* s, uint32_t k) {
    const sites_first_t* f = sites_first_of(s, s->v[k].stack);
    return f && f->id == k;
}

static int grow_slots(sites_t* s) {
    size_t cap = s->slots ? (s->mask + 1) * 2 : 1024;
    sites_slot_t* fresh = calloc(cap, sizeof *fresh);
    if (!fresh)
        return -1;
    for (uint32_t k = 1; k <= s->n; k++)
        if (!is_first(s, k))
            slot_put(fresh, cap - 1, s->v[k].size, s->v[k].stack, k);
    free(s->slots);
    s->slots = fresh;
    s->mask = cap - 1;
    return 0;
}

static uint64_t take_early(sites_t* s, uint64_t size, uint32_t stack) {
    for (size_t i = 0; i < s->nearly; i++) {
        if (s->early[i].size == size && s->early[i].stack == stack) {
            uint64_t n = s->early[i].count;
            s->early[i] = s->early[--s->nearly];
            return n;
        }
    }
    return 0;
}

uint32_t sites_define(sites_t* s, uint64_t size, uint32_t stack, uint64_t* early) {
    *early = 0;
    if (s->n == UINT32_MAX - 1)
        return 0;
    uint32_t id = s->n + 1;
    if (id >= s->vcap) {
        size_t cap = s->vcap ? s->vcap * 2 : 1024;
        sites_site_t* fresh = realloc(s->v, cap * sizeof *fresh);
        if (!fresh)
            return 0;
        s->v = fresh;
        s->vcap = cap;
    }
    sites_first_t* f = NULL;
    if (size <= UINT32_MAX && stack < SITES_FIRST_STACKS) {
        if (!s->first && !(s->first = calloc(SITES_FIRST_CHUNKS, sizeof *s->first)))
            return 0;
        sites_first_t** c = &s->first[stack >> SITES_FIRST_SHIFT];
        if (!*c && !(*c = calloc((size_t)1 << SITES_FIRST_SHIFT, sizeof **c)))
            return 0;
        f = &(*c)[stack & ((1u << SITES_FIRST_SHIFT) - 1)];
        if (f->id)
            f = NULL; // the stack's first site is another size: this pair goes to the table
    }
    if (!f && (!s->slots || (size_t)(s->nslots + 1) * 2 > s->mask + 1) && grow_slots(s) != 0)
        return 0;
    s->v[id] = (sites_site_t){.size = size, .stack = stack};
    s->n = id;
    if (f) {
        *f = (sites_first_t){.id = id, .size = (uint32_t)size};
    } else {
        slot_put(s->slots, s->mask, size, stack, id);
        s->nslots++;
    }
    if (hl_unlikely(s->nearly))
        *early = take_early(s, size, stack);
    return id;
}

int sites_add_early(sites_t* s, uint64_t size, uint32_t stack) {
    for (size_t i = 0; i < s->nearly; i++) {
        if (s->early[i].size == size && s->early[i].stack == stack) {
            s->early[i].count++;
            return 0;
        }
    }
    if (s->nearly >= SITES_EARLY_MAX)
        return 0; // not threads racing but damage: stop remembering
    if (s->nearly == s->early_cap) {
        size_t cap = s->early_cap ? s->early_cap * 2 : 16;
        sites_early_t* fresh = realloc(s->early, cap * sizeof *fresh);
        if (!fresh)
            return -1;
        s->early = fresh;
        s->early_cap = cap;
    }
    s->early[s->nearly++] = (sites_early_t){.size = size, .stack = stack, .count = 1};
    return 0;
}
