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
    hl_block_t* spare; // the table before the last same-size rebuild, for the next one
    char pad[64 - 4 - 12 - 2 * sizeof(void*)];
} shard_t;

static shard_t shards[HL_SHARDS];

// Where a block's slot is: the top byte picks the shard, the low 32 bits the slot. Blocks of one
// 64 KiB stretch of the heap share a shard and sit in nearby slots, from a point hashed from
// the stretch, so the table is touched with the program's own locality (a loop walking its
// heap walks the table) instead of one cache and TLB miss per call at a random place. Two
// slots per 16-byte granule keep a densely packed stretch from forming long probe runs.
static inline uint64_t addr_hash(uintptr_t a) {
    uint64_t r = (uint64_t)(a >> 16) * 0x9E3779B97F4A7C15ull;
    r ^= r >> 29;
    return (r & 0xff00000000000000ull) | (uint32_t)((uint32_t)r + (uint32_t)(a >> 3));
}

static inline shard_t* shard_of(uint64_t h) { return &shards[h >> 56]; }

// Starts loading addr's first probe slot: the caller unwinds meanwhile, and the table's cache
// miss (the largest single cost of a call on a program with many live blocks) overlaps it. A
// racing grow only makes the hint useless; a prefetch never faults.
void live_prefetch(uintptr_t addr) {
    uint64_t h = addr_hash(addr);
    const shard_t* s = shard_of(h);
    const hl_block_t* slots = s->slots;
    if (slots)
        __builtin_prefetch(&slots[(uint32_t)h & s->mask], 1, 3);
}

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

// Rebuild into a table sized for the live blocks; FREED history goes (it is only a hint). A
// program that frees as much as it allocates fills its shards with FREED slots and rebuilds
// them at the same size again and again: those rebuilds go back and forth between two tables
// whose pages are already there, instead of faulting in a fresh mapping each time.
static HL_COLD void shard_grow(shard_t* s) {
    uint32_t cap = s->mask + 1;
    uint32_t new_cap = cap;
    while (s->live * 2u >= new_cap)
        new_cap *= 2;
    if (new_cap == cap && s->used - s->live < cap / 4)
        new_cap *= 2;
    hl_block_t* fresh;
    if (new_cap == cap && s->spare) {
        fresh = s->spare;
        memset(fresh, 0, (size_t)cap * sizeof(hl_block_t));
    } else {
        fresh = os_map_dense((size_t)new_cap * sizeof(hl_block_t));
        if (!fresh)
            return; // keep probing the crowded table: slower, still correct
    }
    for (uint32_t i = 0; i < cap; i++) {
        hl_block_t* b = &s->slots[i];
        if (b->state != HL_BLOCK_LIVE)
            continue;
        uint32_t j = (uint32_t)addr_hash(b->addr) & (new_cap - 1);
        while (fresh[j].state != HL_BLOCK_EMPTY)
            j = (j + 1) & (new_cap - 1);
        fresh[j] = *b;
    }
    if (new_cap == cap) {
        s->spare = s->slots;
    } else {
        if (s->spare)
            os_unmap(s->spare, (size_t)cap * sizeof(hl_block_t));
        os_unmap(s->slots, (size_t)cap * sizeof(hl_block_t));
        s->spare = NULL;
    }
    s->slots = fresh;
    s->mask = new_cap - 1;
    s->used = s->live;
}

void live_insert(const hl_block_t* b) {
    uint64_t h = addr_hash(b->addr);
    shard_t* s = shard_of(h);
    shard_lock(s);
    if (hl_unlikely((s->used + 1) * 2 >= (s->mask + 1)))
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
