// SPDX-License-Identifier: MIT
// live.c - every live heap block by address: 256 shards of open-addressing tables, each behind
// its own spinlock, so two threads rarely meet on one lock. A released block stays in its slot
// marked FREED until the address is reused or the table is rebuilt: that is what tells a
// double free from an invalid one at no extra cost.
#define _GNU_SOURCE
#include <sched.h>
#include <string.h>

#include "agent.h"

#define HL_SHARDS 256
#define HL_SHARD_INITIAL 1024

typedef struct shard_s {
    _Atomic int lock;
    uint32_t mask;   // capacity - 1
    uint32_t used;   // LIVE + FREED + TOMB slots
    uint32_t live;
    hl_block_t* slots;
    char pad[64 - 4 - 12 - sizeof(void*)];
} shard_t;

static shard_t shards[HL_SHARDS];

static inline uint64_t addr_hash(uintptr_t a) {
    uint64_t h = (uint64_t)(a >> 4) * 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 29);
}

static inline shard_t* shard_of(uint64_t h) { return &shards[h >> 56]; }

static inline void shard_lock(shard_t* s) {
    while (atomic_exchange_explicit(&s->lock, 1, memory_order_acquire)) {
        while (atomic_load_explicit(&s->lock, memory_order_relaxed))
            sched_yield();
    }
}
static inline void shard_unlock(shard_t* s) {
    atomic_store_explicit(&s->lock, 0, memory_order_release);
}

void live_init(void) {
    for (int i = 0; i < HL_SHARDS; i++) {
        shards[i].slots = os_map(HL_SHARD_INITIAL * sizeof(hl_block_t));
        shards[i].mask = shards[i].slots ? HL_SHARD_INITIAL - 1 : 0;
    }
}

// Rebuild into a table sized for the live blocks; FREED history goes (it is only a hint).
static HL_COLD void shard_grow(shard_t* s) {
    uint32_t cap = s->mask + 1;
    uint32_t new_cap = cap;
    while (s->live * 2u >= new_cap)
        new_cap *= 2;
    if (new_cap == cap && s->used - s->live < cap / 4)
        new_cap *= 2;
    hl_block_t* fresh = os_map((size_t)new_cap * sizeof(hl_block_t));
    if (!fresh)
        return; // keep probing the crowded table: slower, still correct
    for (uint32_t i = 0; i < cap; i++) {
        hl_block_t* b = &s->slots[i];
        if (b->state != HL_BLOCK_LIVE)
            continue;
        uint32_t j = (uint32_t)addr_hash(b->addr) & (new_cap - 1);
        while (fresh[j].state != HL_BLOCK_EMPTY)
            j = (j + 1) & (new_cap - 1);
        fresh[j] = *b;
    }
    os_unmap(s->slots, (size_t)cap * sizeof(hl_block_t));
    s->slots = fresh;
    s->mask = new_cap - 1;
    s->used = s->live;
}

void live_insert(const hl_block_t* b) {
    uint64_t h = addr_hash(b->addr);
    shard_t* s = shard_of(h);
    shard_lock(s);
    if (hl_unlikely((s->used + 1) * 4 >= (s->mask + 1) * 3))
        shard_grow(s);
    if (hl_unlikely(!s->slots)) {
        shard_unlock(s);
        return;
    }
    uint32_t i = (uint32_t)h & s->mask;
    hl_block_t* reuse = NULL;
    for (;;) {
        hl_block_t* slot = &s->slots[i];
        if (slot->state == HL_BLOCK_EMPTY)
            break;
        if (slot->addr == b->addr) { // the address came back from the allocator
            if (slot->state == HL_BLOCK_LIVE)
                s->live--; // a block the agent missed the release of; the new one wins
            *slot = *b;
            slot->state = HL_BLOCK_LIVE;
            s->live++;
            shard_unlock(s);
            return;
        }
        if (!reuse && slot->state != HL_BLOCK_LIVE) // a freed block's slot: its history goes
            reuse = slot;
        i = (i + 1) & s->mask;
    }
    hl_block_t* slot = reuse ? reuse : &s->slots[i];
    if (!reuse)
        s->used++;
    *slot = *b;
    slot->state = HL_BLOCK_LIVE;
    s->live++;
    shard_unlock(s);
}

static hl_block_t* find(shard_t* s, uint64_t h, uintptr_t addr) {
    uint32_t i = (uint32_t)h & s->mask;
    if (!s->slots)
        return NULL;
    for (;;) {
        hl_block_t* slot = &s->slots[i];
        if (slot->state == HL_BLOCK_EMPTY)
            return NULL;
        if (slot->addr == addr && slot->state != HL_BLOCK_TOMB)
            return slot;
        i = (i + 1) & s->mask;
    }
}

int live_remove(uintptr_t addr, hl_block_t* out, uint32_t release_stack) {
    uint64_t h = addr_hash(addr);
    shard_t* s = shard_of(h);
    shard_lock(s);
    hl_block_t* slot = find(s, h, addr);
    int state = slot ? (int)slot->state : HL_BLOCK_EMPTY;
    if (slot) {
        *out = *slot;
        if (state == HL_BLOCK_LIVE) {
            slot->state = HL_BLOCK_FREED;
            slot->thread = release_stack;
            s->live--;
        }
    }
    shard_unlock(s);
    return state;
}

int live_lookup(uintptr_t addr, hl_block_t* out) {
    uint64_t h = addr_hash(addr);
    shard_t* s = shard_of(h);
    shard_lock(s);
    hl_block_t* slot = find(s, h, addr);
    int state = slot ? (int)slot->state : HL_BLOCK_EMPTY;
    if (slot)
        *out = *slot;
    shard_unlock(s);
    return state;
}

void live_lock_all(void) {
    for (int i = 0; i < HL_SHARDS; i++)
        shard_lock(&shards[i]);
}
void live_unlock_all(void) {
    for (int i = 0; i < HL_SHARDS; i++)
        shard_unlock(&shards[i]);
}
void live_reset_after_fork(void) {
    for (int i = 0; i < HL_SHARDS; i++)
        atomic_store(&shards[i].lock, 0);
}

void live_for_each(void (*fn)(const hl_block_t* b, void* arg), void* arg) {
    for (int i = 0; i < HL_SHARDS; i++) {
        shard_t* s = &shards[i];
        if (!s->slots)
            continue;
        for (uint32_t j = 0; j <= s->mask; j++)
            if (s->slots[j].state == HL_BLOCK_LIVE)
                fn(&s->slots[j], arg);
    }
}

uint64_t live_count(void) {
    uint64_t n = 0;
    for (int i = 0; i < HL_SHARDS; i++)
        n += shards[i].live;
    return n;
}
