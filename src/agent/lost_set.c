// SPDX-License-Identifier: MIT
// lost_set.c - the blocks reported lost and still lost at the latest scan (lost_set.h). Kept in
// the agent's own mappings: a scan runs with the world stopped and may not call malloc.
#include "lost_set.h"

#include "os.h"

typedef struct lost_array_s {
    hl_lost_t* at;
    size_t n, cap;
} lost_array_t;

static lost_array_t current, next;

static void drop(lost_array_t* a) {
    if (a->at)
        os_unmap(a->at, a->cap * sizeof(hl_lost_t));
    *a = (lost_array_t){0};
}

size_t lost_set_count(void) {
    return current.n;
}

int lost_set_has(hl_lost_cursor_t* c, uintptr_t addr, uint32_t stack, uint32_t epoch) {
    while (c->next < current.n && current.at[c->next].addr < addr)
        c->next++;
    if (c->next == current.n || current.at[c->next].addr != addr)
        return 0;
    const hl_lost_t* l = &current.at[c->next];
    return l->stack == stack && l->epoch == epoch;
}

int lost_set_begin(size_t cap) {
    drop(&next);
    if (cap == 0)
        return 0;
    next.at = os_map(cap * sizeof(hl_lost_t));
    if (!next.at)
        return -1;
    next.cap = cap;
    return 0;
}

void lost_set_add(uintptr_t addr, uint32_t stack, uint32_t epoch) {
    if (next.n < next.cap)
        next.at[next.n++] = (hl_lost_t){.addr = addr, .stack = stack, .epoch = epoch};
}

void lost_set_commit(void) {
    drop(&current);
    current = next;
    next = (lost_array_t){0};
}

void lost_set_clear(void) {
    drop(&next);
    drop(&current);
}
