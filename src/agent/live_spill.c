// SPDX-License-Identifier: MIT
// live_spill.c - the live blocks the direct map (live.c) cannot hold: two blocks in one 32-byte
// granule (an allocator with 16-byte size classes), addresses above 2^47, sizes of 1 TiB and
// more. 256 shards of open-addressing tables, each behind its own spinlock, and a short side
// list for the blocks that do not fit a slot. glibc's malloc never needs it; it is empty until
// the first such block, and the hot path only looks here when it is not.
#define _GNU_SOURCE
#include <sched.h>
#include <string.h>

#include "../common/compiler.h"
#include "epoch.h"
#include "live_levels.h"
#include "log.h"
#include "os.h"

// A slot, packed into 24 bytes:
//   w0: address (47 bits) | fn (5) | state (2) | guarded (1) | internal (1)
//   w1: requested size (40 bits) | owner thread index (24)
//   w2: epoch (HL_EPOCH_BITS) | ignored (1, bit 31), or once FREED the stack that released
//       the block (32) | allocation stack (32)
typedef struct slot_s {
    uint64_t w0, w1, w2;
} slot_t;

static inline int slot_state(const slot_t* s) {
    return (int)((s->w0 >> 52) & 3);
}
static inline uintptr_t slot_addr(const slot_t* s) {
    return (uintptr_t)(s->w0 & ((1ull << HL_ADDR_BITS) - 1));
}
static inline void slot_set_state(slot_t* s, int state) {
    s->w0 = (s->w0 & ~(3ull << 52)) | ((uint64_t)state << 52);
}

#define W2_IGNORED (1ull << 31)
static inline slot_t pack(const hl_block_t* b, int state) {
    slot_t s;
    s.w0 = (uint64_t)b->addr | ((uint64_t)b->fn & 31) << 47 | (uint64_t)(state & 3) << 52 |
           (uint64_t)b->guarded << 54 | (uint64_t)b->is_internal << 55;
    s.w1 = (uint64_t)b->size | (uint64_t)(b->thread & 0xffffff) << HL_SIZE_BITS;
    s.w2 = (uint64_t)b->stack << 32 | (b->epoch & HL_EPOCH_MASK) | (b->ignored ? W2_IGNORED : 0);
    return s;
}

// The interface's view. A FREED block reports the stack that released it in `thread`.
static inline void unpack(const slot_t* s, hl_block_t* b) {
    memset(b, 0, sizeof *b);
    b->addr = slot_addr(s);
    b->fn = (s->w0 >> 47) & 31;
    b->state = (s->w0 >> 52) & 3;
    b->guarded = (s->w0 >> 54) & 1;
    b->is_internal = (s->w0 >> 55) & 1;
    b->size = s->w1 & ((1ull << HL_SIZE_BITS) - 1);
    b->stack = (uint32_t)(s->w2 >> 32);
    b->thread = b->state == HL_BLOCK_FREED ? (uint32_t)s->w2 : (uint32_t)(s->w1 >> HL_SIZE_BITS);
    if (b->state == HL_BLOCK_LIVE) {
        b->epoch = epoch_expand((uint32_t)s->w2 & HL_EPOCH_MASK);
        b->ignored = (s->w2 & W2_IGNORED) != 0;
    }
}

#define HL_SHARDS 256
#define HL_SHARD_INITIAL 256
#define HL_ODD_MAX 64

_Atomic int hl_spill_used;
typedef struct shard_s {
    _Atomic int lock;
    uint32_t mask; // capacity - 1
    uint32_t used; // LIVE + FREED + TOMB slots
    uint32_t live;
    slot_t* slots;
    slot_t* spare; // the table before the last same-size rebuild, for the next one
    char pad[64 - 4 - 12 - 2 * sizeof(void*)];
} shard_t;

static shard_t shards[HL_SHARDS];

// Blocks that do not fit a slot, by linear search (there are none in practice).
static hl_block_t odd[HL_ODD_MAX];
static _Atomic int odd_lock;
static _Atomic int odd_count; // slots of odd[] ever used

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

static inline shard_t* shard_of(uint64_t h) {
    return &shards[h >> 56];
}

static inline void spin_lock(_Atomic int* lock) {
    while (atomic_exchange_explicit(lock, 1, memory_order_acquire)) {
        while (atomic_load_explicit(lock, memory_order_relaxed))
            sched_yield();
    }
}
static inline void spin_unlock(_Atomic int* lock) {
    atomic_store_explicit(lock, 0, memory_order_release);
}
static inline void shard_lock(shard_t* s) {
    spin_lock(&s->lock);
}
static inline void shard_unlock(shard_t* s) {
    spin_unlock(&s->lock);
}

// A shard's first table, on its first block.
static HL_COLD int shard_start(shard_t* s) {
    s->slots = os_map(HL_SHARD_INITIAL * sizeof(slot_t));
    s->mask = s->slots ? HL_SHARD_INITIAL - 1 : 0;
    return s->slots ? 0 : -1;
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
    slot_t* fresh;
    if (new_cap == cap && s->spare) {
        fresh = s->spare;
        memset(fresh, 0, (size_t)cap * sizeof(slot_t));
    } else {
        fresh = os_map_dense((size_t)new_cap * sizeof(slot_t));
        if (!fresh)
            return; // keep probing the crowded table: slower, still correct
    }
    for (uint32_t i = 0; i < cap; i++) {
        const slot_t* b = &s->slots[i];
        if (slot_state(b) != HL_BLOCK_LIVE)
            continue;
        uint32_t j = (uint32_t)addr_hash(slot_addr(b)) & (new_cap - 1);
        while (slot_state(&fresh[j]) != HL_BLOCK_EMPTY)
            j = (j + 1) & (new_cap - 1);
        fresh[j] = *b;
    }
    if (new_cap == cap) {
        s->spare = s->slots;
    } else {
        if (s->spare)
            os_unmap(s->spare, (size_t)cap * sizeof(slot_t));
        os_unmap(s->slots, (size_t)cap * sizeof(slot_t));
        s->spare = NULL;
    }
    s->slots = fresh;
    s->mask = new_cap - 1;
    s->used = s->live;
}

// ---------------------------------------------------------------------------------------------
// The side list
// ---------------------------------------------------------------------------------------------
static HL_COLD void odd_insert(const hl_block_t* b) {
    spin_lock(&odd_lock);
    int n = atomic_load(&odd_count), free_at = -1;
    for (int i = 0; i < n; i++) {
        if (odd[i].addr == b->addr || (free_at < 0 && odd[i].state != HL_BLOCK_LIVE))
            free_at = i;
        if (odd[i].addr == b->addr)
            break;
    }
    if (free_at < 0 && n < HL_ODD_MAX)
        atomic_store(&odd_count, (free_at = n) + 1);
    if (free_at >= 0) {
        odd[free_at] = *b;
        odd[free_at].state = HL_BLOCK_LIVE;
    } else {
        hl_log("more than %d blocks of 1 TiB or above 2^47: the rest go untracked", HL_ODD_MAX);
    }
    spin_unlock(&odd_lock);
}

// Like live_remove/live_lookup for the side list; HL_BLOCK_EMPTY when addr is not there.
static HL_COLD int odd_take(uintptr_t addr, hl_block_t* out, int remove, uint32_t release_stack) {
    int state = HL_BLOCK_EMPTY;
    spin_lock(&odd_lock);
    int n = atomic_load(&odd_count);
    for (int i = 0; i < n; i++) {
        if (odd[i].addr != addr || odd[i].state == HL_BLOCK_EMPTY)
            continue;
        state = (int)odd[i].state;
        *out = odd[i];
        out->epoch = epoch_expand(out->epoch & HL_EPOCH_MASK);
        if (remove && state == HL_BLOCK_LIVE) {
            odd[i].state = HL_BLOCK_FREED;
            odd[i].thread = release_stack;
        }
        break;
    }
    spin_unlock(&odd_lock);
    return state;
}

// ---------------------------------------------------------------------------------------------
// The table
// ---------------------------------------------------------------------------------------------
// hl_spill_used goes to 1 under this lock, which a fork's spill_lock_all takes first: while it
// reads 0 there, no thread is in the table (all of them look at hl_spill_used before it), and
// the fork neither locks nor resets the 256 shards. Their locks lie on 4 pages that each fork
// would make read-only and the parent's unlocking and the child's reset would then copy: 8 page
// faults a fork, for a table most programs never use (glibc's chunks keep one live block to a
// granule).
static _Atomic int used_gate;

void spill_insert(const hl_block_t* b) {
    if (!atomic_load_explicit(&hl_spill_used, memory_order_relaxed)) {
        spin_lock(&used_gate);
        atomic_store(&hl_spill_used, 1);
        spin_unlock(&used_gate);
    }
    if (hl_unlikely(!fits(b))) {
        odd_insert(b);
        return;
    }
    uint64_t h = addr_hash(b->addr);
    shard_t* s = shard_of(h);
    slot_t packed = pack(b, HL_BLOCK_LIVE);
    shard_lock(s);
    if (!s->slots && shard_start(s) != 0) {
        shard_unlock(s);
        return;
    }
    if (hl_unlikely((s->used + 1) * 2 >= (s->mask + 1)))
        shard_grow(s);
    uint32_t i = (uint32_t)h & s->mask;
    slot_t* reuse = NULL;
    for (;;) {
        slot_t* slot = &s->slots[i];
        int state = slot_state(slot);
        if (state == HL_BLOCK_EMPTY)
            break;
        if (slot_addr(slot) == b->addr) { // the address came back from the allocator
            if (state == HL_BLOCK_LIVE)
                s->live--; // a block the agent missed the release of; the new one wins
            *slot = packed;
            s->live++;
            shard_unlock(s);
            return;
        }
        if (!reuse && state != HL_BLOCK_LIVE) // a freed block's slot: its history goes
            reuse = slot;
        i = (i + 1) & s->mask;
    }
    slot_t* slot = reuse ? reuse : &s->slots[i];
    if (!reuse)
        s->used++;
    *slot = packed;
    s->live++;
    shard_unlock(s);
}

static slot_t* find(shard_t* s, uint64_t h, uintptr_t addr) {
    uint32_t i = (uint32_t)h & s->mask;
    if (!s->slots)
        return NULL;
    for (;;) {
        slot_t* slot = &s->slots[i];
        int state = slot_state(slot);
        if (state == HL_BLOCK_EMPTY)
            return NULL;
        if (slot_addr(slot) == addr && state != HL_BLOCK_TOMB)
            return slot;
        i = (i + 1) & s->mask;
    }
}

// Copies addr's slot to *out and returns its state; with `release`, a live block becomes FREED
// (release_stack kept as the place it was freed).
int spill_take(uintptr_t addr, hl_block_t* out, int release, uint32_t release_stack) {
    if (hl_unlikely(addr_beyond(addr)) ||
        hl_unlikely(atomic_load_explicit(&odd_count, memory_order_relaxed))) {
        int state = odd_take(addr, out, release, release_stack);
        if (state != HL_BLOCK_EMPTY || addr_beyond(addr))
            return state;
    }
    uint64_t h = addr_hash(addr);
    shard_t* s = shard_of(h);
    shard_lock(s);
    slot_t* slot = find(s, h, addr);
    int state = slot ? slot_state(slot) : HL_BLOCK_EMPTY;
    if (slot) {
        unpack(slot, out);
        if (release && state == HL_BLOCK_LIVE) {
            slot_set_state(slot, HL_BLOCK_FREED);
            slot->w2 = (slot->w2 & ~0xffffffffull) | release_stack;
            s->live--;
        }
    }
    shard_unlock(s);
    return state;
}

void spill_lock_all(void) {
    spin_lock(&used_gate); // hl_spill_used stays as it is until spill_unlock_all
    if (atomic_load(&hl_spill_used))
        for (int i = 0; i < HL_SHARDS; i++)
            shard_lock(&shards[i]);
    spin_lock(&odd_lock);
}
void spill_unlock_all(void) {
    spin_unlock(&odd_lock);
    if (atomic_load(&hl_spill_used))
        for (int i = 0; i < HL_SHARDS; i++)
            shard_unlock(&shards[i]);
    spin_unlock(&used_gate);
}
void spill_reset_after_fork(void) {
    if (atomic_load(&hl_spill_used)) // else never locked
        for (int i = 0; i < HL_SHARDS; i++)
            atomic_store(&shards[i].lock, 0);
    atomic_store(&odd_lock, 0);
    atomic_store(&used_gate, 0);
}

void spill_clear(void) {
    spill_lock_all();
    for (int i = 0; i < HL_SHARDS; i++) {
        shard_t* s = &shards[i];
        if (s->slots)
            memset(s->slots, 0, ((size_t)s->mask + 1) * sizeof *s->slots);
        s->used = s->live = 0;
    }
    memset(odd, 0, sizeof odd);
    atomic_store(&odd_count, 0);
    spill_unlock_all();
}

void spill_for_each(void (*fn)(const hl_block_t* b, void* arg), void* arg) {
    hl_block_t b;
    for (int i = 0; i < HL_SHARDS; i++) {
        shard_t* s = &shards[i];
        if (!s->slots)
            continue;
        for (uint32_t j = 0; j <= s->mask; j++)
            if (slot_state(&s->slots[j]) == HL_BLOCK_LIVE) {
                unpack(&s->slots[j], &b);
                fn(&b, arg);
            }
    }
    int n = atomic_load(&odd_count);
    for (int i = 0; i < n; i++)
        if (odd[i].state == HL_BLOCK_LIVE) {
            b = odd[i];
            b.epoch = epoch_expand(b.epoch & HL_EPOCH_MASK);
            fn(&b, arg);
        }
}

uint64_t spill_count(void) {
    uint64_t n = 0;
    for (int i = 0; i < HL_SHARDS; i++)
        n += shards[i].live;
    int k = atomic_load(&odd_count);
    for (int i = 0; i < k; i++)
        n += odd[i].state == HL_BLOCK_LIVE;
    return n;
}

// ---------------------------------------------------------------------------------------------
// Epochs and ignored blocks (under the shards' locks)
// ---------------------------------------------------------------------------------------------
void spill_epoch_rebase(uint32_t now, uint32_t floor) {
    for (int i = 0; i < HL_SHARDS; i++) {
        shard_t* s = &shards[i];
        shard_lock(s);
        for (uint32_t j = 0; s->slots && j <= s->mask; j++) {
            slot_t* slot = &s->slots[j];
            if (slot_state(slot) == HL_BLOCK_LIVE) {
                uint32_t label = (uint32_t)slot->w2 & HL_EPOCH_MASK;
                slot->w2 = (slot->w2 & ~(uint64_t)HL_EPOCH_MASK) |
                           epoch_clamp_at(now, floor, label);
            }
        }
        shard_unlock(s);
    }
    spin_lock(&odd_lock);
    int n = atomic_load(&odd_count);
    for (int i = 0; i < n; i++)
        if (odd[i].state == HL_BLOCK_LIVE)
            odd[i].epoch = epoch_clamp_at(now, floor, odd[i].epoch & HL_EPOCH_MASK);
    spin_unlock(&odd_lock);
}

int spill_set_ignored(uintptr_t addr) {
    int found = -1;
    spin_lock(&odd_lock);
    int n = atomic_load(&odd_count);
    for (int i = 0; i < n; i++)
        if (odd[i].addr == addr && odd[i].state == HL_BLOCK_LIVE)
            odd[i].ignored = 1, found = 0;
    spin_unlock(&odd_lock);
    if (found == 0 || addr_beyond(addr))
        return found;
    uint64_t h = addr_hash(addr);
    shard_t* s = shard_of(h);
    shard_lock(s);
    slot_t* slot = find(s, h, addr);
    if (slot && slot_state(slot) == HL_BLOCK_LIVE) {
        slot->w2 |= W2_IGNORED;
        found = 0;
    }
    shard_unlock(s);
    return found;
}
