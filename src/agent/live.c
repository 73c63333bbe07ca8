// SPDX-License-Identifier: MIT
// live.c - every live heap block by address, in a direct map: one 24-byte slot (live_slot.h)
// per 32 bytes of address space, in regions of 16 MiB made on first use and filled only where
// the heap is. A block's slot is found by two shifts, with no hash, no probing, no rebuild and
// no lock: the slot is claimed and released with one compare-and-swap, which also decides a
// race between two frees of one block. Walking the heap in address order walks the slots in
// the same order.
//
// No two blocks of glibc's malloc share a 32-byte granule (its chunks are 32 bytes or more
// apart). An allocator that packs blocks tighter, an address above 2^47 or a size of 1 TiB and
// more go to the second level (live_spill.c), which the hot path looks at only once it holds
// something.
//
// A released block stays in its slot marked FREED, with the stack that released it, until a
// new block takes the granule: that is what tells a double free from an invalid one.
#define _GNU_SOURCE
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "live_slot.h"
#include "live_spill.h"

#define HL_GRANULE_SHIFT 5
#define HL_REGION_SHIFT 24
#define HL_REGION_SLOTS (1u << (HL_REGION_SHIFT - HL_GRANULE_SHIFT))
#define HL_REGION_BYTES ((size_t)HL_REGION_SLOTS * sizeof(slot_t))
#define HL_DIR_ENTRIES (1u << (HL_ADDR_BITS - HL_REGION_SHIFT))
#define HL_MAX_REGIONS 65536 // 1 TiB of heap address space

typedef struct region_s {
    slot_t slots[HL_REGION_SLOTS];
} region_t;

static _Atomic(region_t*)* dir; // by address >> HL_REGION_SHIFT; pages appear as they are used
static uint32_t* made;          // directory indices of the regions made, in order
static _Atomic uint32_t nmade;
static _Atomic int make_lock;

void live_init(void) {
    dir = os_map((size_t)HL_DIR_ENTRIES * sizeof *dir);
    made = os_map(HL_MAX_REGIONS * sizeof *made);
    if (!made)
        dir = NULL; // everything goes to the second level
}

static inline slot_t* slot_of(uintptr_t a) {
    region_t* r = atomic_load_explicit(&dir[a >> HL_REGION_SHIFT], memory_order_acquire);
    return hl_likely(r != NULL) ? &r->slots[(a >> HL_GRANULE_SHIFT) & (HL_REGION_SLOTS - 1)]
                                : NULL;
}

static HL_COLD slot_t* slot_make(uintptr_t a) {
    if (!dir)
        return NULL;
    uint32_t idx = (uint32_t)(a >> HL_REGION_SHIFT);
    while (atomic_exchange_explicit(&make_lock, 1, memory_order_acquire))
        ;
    if (!atomic_load(&dir[idx]) && atomic_load(&nmade) < HL_MAX_REGIONS) {
        region_t* r = os_map(HL_REGION_BYTES);
        if (r) {
            made[atomic_load(&nmade)] = idx;
            atomic_store_explicit(&dir[idx], r, memory_order_release);
            atomic_fetch_add(&nmade, 1);
        }
    }
    atomic_store_explicit(&make_lock, 0, memory_order_release);
    return slot_of(a);
}

static inline _Atomic uint64_t* w0_of(slot_t* s) { return (_Atomic uint64_t*)&s->w0; }

// Starts loading addr's slot: the caller unwinds meanwhile, and the slot's cache miss (the
// largest single cost of a call on a program with many live blocks) overlaps it.
void live_prefetch(uintptr_t addr) {
    if (hl_likely(dir && !(addr >> HL_ADDR_BITS))) {
        const slot_t* s = slot_of(addr);
        if (s)
            __builtin_prefetch(s, 1, 3);
    }
}

void live_insert(const hl_block_t* b) {
    slot_t* s = NULL;
    if (hl_likely(fits(b) && dir)) {
        s = slot_of(b->addr);
        if (hl_unlikely(!s))
            s = slot_make(b->addr);
    }
    if (hl_unlikely(!s)) {
        spill_insert(b);
        return;
    }
    slot_t packed = pack(b, HL_BLOCK_LIVE);
    // Expecting an empty slot makes the first touch of a fresh page a write: one fault for a
    // zeroed page, not a read fault on the shared zero page and then a copy-on-write fault
    // whose TLB flush interrupts every CPU the process runs on.
    uint64_t old = 0;
    while (!atomic_compare_exchange_weak_explicit(w0_of(s), &old, packed.w0, memory_order_acq_rel,
                                                  memory_order_relaxed)) {
        // Another live block in the granule: this one goes to the second level. The same
        // address still live means the agent missed its release; the new block wins.
        if (w0_state(old) == HL_BLOCK_LIVE && w0_addr(old) != b->addr) {
            spill_insert(b);
            return;
        }
    }
    s->w1 = packed.w1;
    s->w2 = packed.w2;
}

// Copies addr's slot to *out and returns its state; with `release`, a live block becomes FREED
// (release_stack kept as the place it was freed).
static inline int take(uintptr_t addr, hl_block_t* out, int release, uint32_t release_stack) {
    slot_t* s = hl_likely(dir && !(addr >> HL_ADDR_BITS)) ? slot_of(addr) : NULL;
    if (hl_likely(s != NULL)) {
        uint64_t w0 = atomic_load_explicit(w0_of(s), memory_order_acquire);
        while (w0 && w0_addr(w0) == addr) {
            int state = w0_state(w0);
            slot_t copy = {w0, s->w1, s->w2};
            if (release && state == HL_BLOCK_LIVE) {
                // Two threads freeing one block: one wins, the other sees FREED.
                if (!atomic_compare_exchange_strong_explicit(
                        w0_of(s), &w0, w0_with_state(w0, HL_BLOCK_FREED), memory_order_acq_rel,
                        memory_order_acquire))
                    continue;
                s->w2 = (copy.w2 & ~0xffffffffull) | release_stack;
            }
            unpack(&copy, out);
            return state;
        }
    }
    if (atomic_load_explicit(&hl_spill_used, memory_order_relaxed))
        return spill_take(addr, out, release, release_stack);
    return HL_BLOCK_EMPTY;
}

int live_remove(uintptr_t addr, hl_block_t* out, uint32_t release_stack) {
    return take(addr, out, 1, release_stack);
}

int live_lookup(uintptr_t addr, hl_block_t* out) { return take(addr, out, 0, 0); }

// The direct map takes no lock: a fork child may inherit a slot another thread was writing,
// which can only misreport that one block. The second level's locks are taken.
void live_lock_all(void) { spill_lock_all(); }
void live_unlock_all(void) { spill_unlock_all(); }
void live_reset_after_fork(void) {
    atomic_store(&make_lock, 0);
    spill_reset_after_fork();
}

// Every live slot of the regions made, skipping the pages never written (most of a region
// lies where the heap is not): mincore tells which are there.
static void direct_for_each(void (*fn)(const hl_block_t* b, void* arg), void* arg) {
    static unsigned char resident[HL_REGION_BYTES / 4096 + 1];
    uint32_t n = atomic_load(&nmade);
    for (uint32_t i = 0; i < n; i++) {
        region_t* r = atomic_load(&dir[made[i]]);
        if (!r || syscall(SYS_mincore, r, HL_REGION_BYTES, resident) != 0)
            continue;
        for (uint32_t j = 0; j < HL_REGION_SLOTS; j++) {
            const slot_t* s = &r->slots[j];
            size_t page = ((uintptr_t)s - (uintptr_t)r) / 4096;
            if (!(resident[page] & 1)) {
                // on to the first slot that starts in the next page
                uint32_t next = (uint32_t)(((page + 1) * 4096 + sizeof(slot_t) - 1) / sizeof(slot_t));
                j = next - 1;
                continue;
            }
            if (slot_state(s) == HL_BLOCK_LIVE) {
                hl_block_t b;
                unpack(s, &b);
                fn(&b, arg);
            }
        }
    }
}

void live_for_each(void (*fn)(const hl_block_t* b, void* arg), void* arg) {
    if (dir)
        direct_for_each(fn, arg);
    if (atomic_load(&hl_spill_used))
        spill_for_each(fn, arg);
}

static void count_one(const hl_block_t* b, void* arg) {
    (void)b;
    (*(uint64_t*)arg)++;
}

uint64_t live_count(void) {
    uint64_t n = 0;
    if (dir)
        direct_for_each(count_one, &n);
    return n + (atomic_load(&hl_spill_used) ? spill_count() : 0);
}
