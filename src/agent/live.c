// SPDX-License-Identifier: MIT
// live.c - every live heap block by address, in a direct map: one 16-byte slot per 32 bytes of
// address space, in regions of 16 MiB made on first use and filled only where the heap is (half
// a byte of agent memory per byte of the heap's span, where its blocks are small). A block's slot
// is found by two shifts, with no hash, no probing, no rebuild and no lock: the slot is claimed and
// released with one compare-and-swap, which also decides a race between two frees of one block
// (plain stores while glibc runs the process single-threaded).
// Walking the heap in address order walks the slots in the same order.
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
#include <sys/single_threaded.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/compiler.h"
#include "epoch.h"
#include "live_levels.h"
#include "os.h"

#define HL_GRANULE_SHIFT 5
#define HL_REGION_SLOTS (1u << (HL_REGION_SHIFT - HL_GRANULE_SHIFT))

// A slot. Its granule gives the address but for the block's offset in it:
//   d0: offset (5 bits) | fn (5) | guarded (1) | internal (1) | size (40) | epoch's low 10
//       bits (52-61) | state (2, bits 62-63)
//   d1: allocation stack (32) | owner thread index (24) | epoch's high 6 bits (56-61) |
//       free (1) | ignored (1, bit 63), or once FREED the releasing stack (32) in the place of
//       all but the first
// d0 is claimed and released by compare-and-swap; 0 is an empty slot.
typedef struct dslot_s {
    uint64_t d0, d1;
} dslot_t;

// A region's slots are made present 64 KiB at a time (for 128 KiB of heap), written through
// before first use: a slot then never sits on the shared zero page, so while the process is
// single-threaded plain loads and stores do (no locked instruction, which would wait for every
// earlier store of the call to reach the cache).
#define HL_CHUNK_SLOTS 4096u
#define D0_EPOCH_SHIFT 52
#define D0_EPOCH_BITS 10
#define D0_EPOCH_MASK ((1u << D0_EPOCH_BITS) - 1)
#define D1_EPOCH_SHIFT 56
#define D1_EPOCH_MASK ((1u << (HL_EPOCH_BITS - D0_EPOCH_BITS)) - 1)
#define D1_IGNORED (1ull << 63)
_Static_assert(D0_EPOCH_SHIFT + D0_EPOCH_BITS <= 62, "the epoch ends below the state");
_Static_assert(D1_EPOCH_SHIFT + HL_EPOCH_BITS - D0_EPOCH_BITS <= 63, "and below ignored");

static inline uint32_t slot_label(uint64_t d0, uint64_t d1) {
    return ((uint32_t)(d0 >> D0_EPOCH_SHIFT) & D0_EPOCH_MASK) |
           ((uint32_t)(d1 >> D1_EPOCH_SHIFT) & D1_EPOCH_MASK) << D0_EPOCH_BITS;
}
#define HL_CHUNKS (HL_REGION_SLOTS / HL_CHUNK_SLOTS)

typedef struct region_s {
    _Atomic uint64_t present[HL_CHUNKS / 64];
    char pad[4096 - HL_CHUNKS / 8];
    dslot_t slots[HL_REGION_SLOTS];
} region_t;

static inline int d0_state(uint64_t d0) {
    return (int)(d0 >> 62);
}
// A slot a thread has claimed for a block and is still filling (d1 not written yet): no one else
// takes it, and it is no block to anyone until the thread makes it LIVE. Claimed and made LIVE
// in one word would let a fork in between hand the child a live slot with the d1 of the block
// that held it before (another stack, another thread), which the child's trace then reported
// without ever having named it; the child's copy of that thread never finishes the slot, so
// there it stays nothing (the block was never the child program's).
#define SLOT_FILLING 3

static inline uint64_t d0_with_state(uint64_t d0, int state) {
    return (d0 & ~(3ull << 62)) | (uint64_t)state << 62;
}
static inline int d0_holds(uint64_t d0, uintptr_t addr) {
    return d0 != 0 && (d0 & 31) == (addr & 31);
}
// Does d0 hold a block other than the one at addr, or one being filled (the granule is taken)?
static inline int d0_taken_by_other(uint64_t d0, uintptr_t addr) {
    int state = d0_state(d0);
    return (state == HL_BLOCK_LIVE || state == SLOT_FILLING) && !d0_holds(d0, addr);
}

static inline dslot_t dpack(const hl_block_t* b) {
    dslot_t s;
    s.d0 = (uint64_t)(b->addr & 31) | ((uint64_t)b->fn & 31) << 5 | (uint64_t)b->guarded << 10 |
           (uint64_t)b->is_internal << 11 | (uint64_t)b->size << 12 |
           (uint64_t)(b->epoch & D0_EPOCH_MASK) << D0_EPOCH_SHIFT | (uint64_t)HL_BLOCK_LIVE << 62;
    s.d1 = (uint64_t)b->stack | (uint64_t)(b->thread & 0xffffff) << 32 |
           (uint64_t)((b->epoch & HL_EPOCH_MASK) >> D0_EPOCH_BITS) << D1_EPOCH_SHIFT |
           (b->ignored ? D1_IGNORED : 0);
    return s;
}

// The interface's view of the slot of addr. A FREED block reports the stack that released it
// in `thread`.
static inline void dunpack(uint64_t d0, uint64_t d1, uintptr_t addr, hl_block_t* b) {
    memset(b, 0, sizeof *b);
    b->addr = addr;
    b->fn = (d0 >> 5) & 31;
    b->guarded = (d0 >> 10) & 1;
    b->is_internal = (d0 >> 11) & 1;
    b->size = (d0 >> 12) & ((1ull << HL_SIZE_BITS) - 1);
    b->state = (uint64_t)d0_state(d0);
    b->stack = (uint32_t)d1;
    b->thread = (uint32_t)(d1 >> 32);
    if (b->state == HL_BLOCK_LIVE) {
        b->thread &= 0xffffff;
        b->ignored = (d1 & D1_IGNORED) != 0;
        b->epoch = epoch_expand(slot_label(d0, d1));
    }
}

static region_dir_t regions; // pages of a region appear as they are used

void live_init(void) {
    header_init();
    region_dir_init(&regions);
}

static inline region_t* region_of(uintptr_t a) {
    return region_dir_get(&regions, a);
}
static inline uint32_t slot_index(uintptr_t a) {
    return (uint32_t)(a >> HL_GRANULE_SHIFT) & (HL_REGION_SLOTS - 1);
}
static inline dslot_t* slot_of(uintptr_t a) {
    region_t* r = region_of(a);
    return hl_likely(r != NULL) ? &r->slots[slot_index(a)] : NULL;
}

static HL_COLD void chunk_make_present(region_t* r, uint32_t chunk) {
    dslot_t* first = &r->slots[(size_t)chunk * HL_CHUNK_SLOTS];
    if (os_populate(first, HL_CHUNK_SLOTS * sizeof(dslot_t)) != 0) {
        // Without MADV_POPULATE_WRITE: a write to each page that changes nothing.
        for (uint32_t k = 0; k < HL_CHUNK_SLOTS; k += 4096 / sizeof(dslot_t))
            atomic_fetch_or_explicit((_Atomic uint64_t*)&first[k].d0, 0, memory_order_relaxed);
    }
    atomic_fetch_or(&r->present[chunk / 64], 1ull << (chunk % 64));
}

static inline int chunk_is_present(const region_t* r, uint32_t chunk) {
    return (atomic_load_explicit(&r->present[chunk / 64], memory_order_relaxed) >> (chunk % 64)) & 1;
}

static inline void make_present(region_t* r, uint32_t j) {
    uint32_t chunk = j / HL_CHUNK_SLOTS;
    if (hl_unlikely(!chunk_is_present(r, chunk)))
        chunk_make_present(r, chunk);
}

// The writer, at each pass: while the heap's top (the program break, where glibc's main arena
// grows) rises and small blocks land at it, the slots of the heap the next pass will likely add
// are made present now, on the writer's CPU: a program building a large structure of small
// blocks spent a twentieth of its time clearing slot pages (tree: 135 MiB of slots). As far
// ahead as twice what the top rose since the last pass, at most HL_SLOTS_AHEAD_MAX of heap and
// a sixteenth of what the heap has grown since the first pass (a small heap that grows and
// shrinks by turns would otherwise keep slots for heap it never reaches: cxx's 5 MiB took 0.7
// MiB more); a top that does not move, or where no small block lies, has nothing made ahead.
#define HL_CHUNK_HEAP ((uintptr_t)HL_CHUNK_SLOTS << HL_GRANULE_SHIFT) // 128 KiB of heap a chunk
#define HL_SLOTS_AHEAD_MAX ((uintptr_t)8 << 20) // of heap: 4 MiB of slots
#define HL_SLOTS_AHEAD_SHARE 16
#define HL_HEAP_FILL_MIN 4096 // a page: less is not worth the call
// Under the writer lock (every pass takes it):
static uintptr_t top_at_last_pass;  // the program break at the last pass
static uintptr_t top_at_first_pass; // and at the first: the heap's growth is measured from it

void live_prepare(void) {
    if (!regions.at)
        return;
    long brk = syscall(SYS_brk, 0);
    uintptr_t top = brk > 0 ? (uintptr_t)brk : 0;
    uintptr_t rose = top > top_at_last_pass && top_at_last_pass ? top - top_at_last_pass : 0;
    top_at_last_pass = top;
    if (!top_at_first_pass)
        top_at_first_pass = top;
    if (!rose || addr_beyond(top) || top < top_at_first_pass)
        return;
    // The heap the top rose by, made present by the writer's thread: glibc extends it by what a
    // request needs and 128 KiB more, and the program would fault each page in itself, as it does
    // untraced, and more of them with guards in the heap (tree: 72,000 page faults in all,
    // 56,500 after this). A pass fills at most a sixteenth of what the heap has grown since the
    // first: a program that took heap it touches sparsely gets that much more of it resident, no
    // more (tests/programs/sparse_brk.c). Contents stay as they were.
    uintptr_t share = (top - top_at_first_pass) / HL_SLOTS_AHEAD_SHARE;
    uintptr_t fill = rose < share ? rose : share;
    if (fill >= HL_HEAP_FILL_MIN)
        os_populate((void*)(top - fill), fill);
    region_t* r = region_of(top - 1);
    if (!r || !chunk_is_present(r, slot_index(top - 1) / HL_CHUNK_SLOTS))
        return; // no small block near the top
    uintptr_t ahead = 2 * rose < HL_SLOTS_AHEAD_MAX ? 2 * rose : HL_SLOTS_AHEAD_MAX;
    if (ahead > share)
        ahead = share;
    for (uintptr_t a = ((top - 1) | (HL_CHUNK_HEAP - 1)) + 1; a < top + ahead && !addr_beyond(a);
         a += HL_CHUNK_HEAP) {
        region_t* ra = region_of(a);
        if (!ra)
            return; // a region is made by the first block in it
        make_present(ra, slot_index(a));
    }
}

static HL_COLD region_t* region_make(uintptr_t a) {
    return region_dir_make(&regions, a, os_map, sizeof(region_t));
}

static inline _Atomic uint64_t* d0_of(dslot_t* s) {
    return (_Atomic uint64_t*)&s->d0;
}

// Starts loading addr's slot: the caller unwinds meanwhile, and the slot's cache miss (the
// largest single cost of a call on a program with many live blocks) overlaps it.
void live_prefetch(uintptr_t addr) {
    if (hl_trailers_on) {
        trailer_prefetch(addr); // where most blocks' records are then; the slot goes unused
        return;
    }
    if (hl_likely(regions.at && !addr_beyond(addr))) {
        const dslot_t* s = slot_of(addr);
        if (s)
            __builtin_prefetch(s, 1, 3);
    }
}

void live_insert(const hl_block_t* b) {
    if (b->headed) {
        header_insert(b);
        return;
    }
    if (hl_trailers_on && trailer_insert(b))
        return;
    region_t* r = NULL;
    if (hl_likely(fits(b) && regions.at)) {
        r = region_of(b->addr);
        if (hl_unlikely(!r))
            r = region_make(b->addr);
    }
    if (hl_unlikely(!r)) {
        spill_insert(b);
        return;
    }
    uint32_t j = slot_index(b->addr);
    make_present(r, j);
    dslot_t* s = &r->slots[j];
    dslot_t packed = dpack(b);
    uint64_t old = atomic_load_explicit(d0_of(s), memory_order_relaxed);
    if (hl_likely(__libc_single_threaded)) {
        // No other thread can be filling a slot here: one left SLOT_FILLING is a fork's, whose
        // thread is not in this process, and is free to take.
        if (hl_unlikely(d0_state(old) == HL_BLOCK_LIVE && !d0_holds(old, b->addr))) {
            spill_insert(b);
            return;
        }
        atomic_store_explicit(d0_of(s), packed.d0, memory_order_relaxed);
        s->d1 = packed.d1;
        return;
    }
    // Another live block in the granule: this one goes to the second level. The same address
    // still live means the agent missed its release; the new block wins.
    uint64_t filling = d0_with_state(packed.d0, SLOT_FILLING);
    do {
        if (hl_unlikely(d0_taken_by_other(old, b->addr))) {
            spill_insert(b);
            return;
        }
    } while (!atomic_compare_exchange_weak_explicit(d0_of(s), &old, filling, memory_order_acq_rel,
                                                    memory_order_relaxed));
    s->d1 = packed.d1;
    atomic_store_explicit(d0_of(s), packed.d0, memory_order_release);
}

// Copies addr's slot to *out and returns its state; with `release`, a live block becomes FREED
// (release_stack kept as the place it was freed). Header marks first: the slow paths keep a
// header block's marks true (hooks.c), while a slot may still hold a small block whose release
// the agent did not see, where a header block lives now; taking that slot would hand the
// allocator the wrong pointer (tests/programs/stopped_realloc.c made that case while a realloc
// with tracing stopped left its block's slot behind).
static inline int take(uintptr_t addr, hl_block_t* out, int release, uint32_t release_stack) {
    int marked = HL_BLOCK_EMPTY;
    if (hl_likely(atomic_load_explicit(&hl_headers_used, memory_order_relaxed))) {
        marked = header_take(addr, out, release);
        if (hl_likely(marked == HL_BLOCK_LIVE))
            return marked;
    }
    dslot_t* s = hl_likely(regions.at && !addr_beyond(addr)) ? slot_of(addr) : NULL;
    if (hl_likely(s != NULL)) {
        uint64_t d0 = atomic_load_explicit(d0_of(s), memory_order_acquire);
        while (d0_holds(d0, addr)) {
            int state = d0_state(d0);
            if (hl_unlikely(state == SLOT_FILLING))
                break; // not a block yet (or, in a fork child, never to be one)
            uint64_t d1 = s->d1;
            if (release && state == HL_BLOCK_LIVE && hl_likely(__libc_single_threaded)) {
                atomic_store_explicit(d0_of(s), d0_with_state(d0, HL_BLOCK_FREED),
                                      memory_order_relaxed);
                s->d1 = (d1 & 0xffffffffull) | (uint64_t)release_stack << 32;
            } else if (release && state == HL_BLOCK_LIVE) {
                // Two threads freeing one block: one wins, the other sees FREED.
                if (!atomic_compare_exchange_strong_explicit(
                        d0_of(s), &d0, d0_with_state(d0, HL_BLOCK_FREED), memory_order_acq_rel,
                        memory_order_acquire))
                    continue;
                s->d1 = (d1 & 0xffffffffull) | (uint64_t)release_stack << 32;
            }
            dunpack(d0, d1, addr, out);
            return state;
        }
    }
    if (atomic_load_explicit(&hl_spill_used, memory_order_relaxed)) {
        int state = spill_take(addr, out, release, release_stack);
        if (state != HL_BLOCK_EMPTY)
            return state;
    }
    if (marked == HL_BLOCK_FREED) { // what the freed block was, record.c may know
        memset(out, 0, sizeof *out);
        out->addr = addr;
        out->headed = 1;
    }
    return marked;
}

int live_remove(uintptr_t addr, hl_block_t* out, uint32_t release_stack) {
    return take(addr, out, 1, release_stack);
}

int live_lookup(uintptr_t addr, hl_block_t* out) {
    return take(addr, out, 0, 0);
}

// The direct map takes no lock: a fork child may inherit a slot another thread was writing,
// which can only misreport that one block. The second level's locks are taken.
void live_lock_all(void) {
    spill_lock_all();
}
void live_unlock_all(void) {
    spill_unlock_all();
}
// Every chunk of slots made present in the regions made (most of a region lies where the heap
// is not): fn(its first slot, the address its first slot stands for, arg).
typedef void (*chunk_fn)(dslot_t* slots, uintptr_t addr, void* arg);
static void present_chunks_do(chunk_fn fn, void* arg) {
    uint32_t n = atomic_load(&regions.nmade);
    for (uint32_t i = 0; i < n; i++) {
        uintptr_t base;
        region_t* r = region_dir_nth(&regions, i, &base);
        if (!r)
            continue;
        for (uint32_t chunk = 0; chunk < HL_CHUNKS; chunk++)
            if (chunk_is_present(r, chunk))
                fn(&r->slots[(size_t)chunk * HL_CHUNK_SLOTS],
                   base | (uintptr_t)chunk * HL_CHUNK_SLOTS << HL_GRANULE_SHIFT, arg);
    }
}

static void clear_chunk(dslot_t* slots, uintptr_t addr, void* arg) {
    (void)addr, (void)arg;
    memset(slots, 0, HL_CHUNK_SLOTS * sizeof *slots);
}

// A new session (attach.c): every block forgotten, the memory kept. No other thread is inside
// the agent (its calls are not routed to it yet).
void live_clear(void) {
    present_chunks_do(clear_chunk, NULL);
    spill_clear();
}

void live_reset_after_fork(void) {
    region_dir_reset_after_fork(&regions);
    header_reset_after_fork();
    spill_reset_after_fork();
}

typedef struct each_s {
    void (*fn)(const hl_block_t* b, void* arg);
    void* arg;
} each_t;

static void chunk_for_each(dslot_t* slots, uintptr_t addr, void* arg) {
    each_t* e = arg;
    for (uint32_t j = 0; j < HL_CHUNK_SLOTS; j++) {
        const dslot_t* s = &slots[j];
        if (d0_state(s->d0) == HL_BLOCK_LIVE) {
            hl_block_t b;
            dunpack(s->d0, s->d1, (addr + ((uintptr_t)j << HL_GRANULE_SHIFT)) | (s->d0 & 31), &b);
            e->fn(&b, e->arg);
        }
    }
}

// Every live slot of the direct map, in address order.
static void direct_for_each(void (*fn)(const hl_block_t* b, void* arg), void* arg) {
    each_t e = {fn, arg};
    present_chunks_do(chunk_for_each, &e);
}

void live_for_each(void (*fn)(const hl_block_t* b, void* arg), void* arg) {
    if (atomic_load(&hl_headers_used))
        header_for_each(fn, arg);
    if (regions.at)
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
    if (atomic_load(&hl_headers_used))
        header_for_each(count_one, &n);
    if (regions.at)
        direct_for_each(count_one, &n);
    return n + (atomic_load(&hl_spill_used) ? spill_count() : 0);
}

// ---------------------------------------------------------------------------------------------
// Epochs and ignored blocks: rare calls of the API, never the hot path
// ---------------------------------------------------------------------------------------------
// Each word of a relabelled slot by compare-and-swap: a release of the block in between wins
// (the expected words no longer match), and the slot is left as the release made it.
static void direct_relabel(dslot_t* s, uint32_t now, uint32_t floor) {
    uint64_t d0 = atomic_load_explicit(d0_of(s), memory_order_relaxed);
    if (d0_state(d0) != HL_BLOCK_LIVE)
        return;
    _Atomic uint64_t* w1 = (_Atomic uint64_t*)&s->d1;
    uint64_t d1 = atomic_load_explicit(w1, memory_order_relaxed);
    uint32_t label = slot_label(d0, d1);
    uint32_t to = epoch_clamp_at(now, floor, label);
    if (to == label)
        return;
    uint64_t d0_new = (d0 & ~((uint64_t)D0_EPOCH_MASK << D0_EPOCH_SHIFT)) |
                      (uint64_t)(to & D0_EPOCH_MASK) << D0_EPOCH_SHIFT;
    if (d0_new != d0 && !atomic_compare_exchange_strong(d0_of(s), &d0, d0_new))
        return;
    uint64_t d1_new = (d1 & ~((uint64_t)D1_EPOCH_MASK << D1_EPOCH_SHIFT)) |
                      (uint64_t)(to >> D0_EPOCH_BITS) << D1_EPOCH_SHIFT;
    if (d1_new != d1)
        atomic_compare_exchange_strong(w1, &d1, d1_new);
}

typedef struct rebase_s {
    uint32_t now, floor;
} rebase_t;

static void chunk_rebase(dslot_t* slots, uintptr_t addr, void* arg) {
    (void)addr;
    const rebase_t* rb = arg;
    for (uint32_t j = 0; j < HL_CHUNK_SLOTS; j++)
        direct_relabel(&slots[j], rb->now, rb->floor);
}

static void direct_epoch_rebase(uint32_t now, uint32_t floor) {
    rebase_t rb = {now, floor};
    present_chunks_do(chunk_rebase, &rb);
}

void live_epoch_rebase(uint32_t now, uint32_t floor) {
    if (atomic_load(&hl_headers_used))
        header_epoch_rebase(now, floor);
    if (regions.at)
        direct_epoch_rebase(now, floor);
    if (atomic_load(&hl_spill_used))
        spill_epoch_rebase(now, floor);
}

int live_set_ignored(uintptr_t addr) {
    if (atomic_load(&hl_headers_used) && header_set_ignored(addr) == 0)
        return 0;
    dslot_t* s = regions.at && !addr_beyond(addr) ? slot_of(addr) : NULL;
    if (s) {
        uint64_t d0 = atomic_load(d0_of(s));
        if (d0_holds(d0, addr) && d0_state(d0) == HL_BLOCK_LIVE) {
            atomic_fetch_or((_Atomic uint64_t*)&s->d1, D1_IGNORED);
            // Released meanwhile: the bit is the releasing stack's, not ours.
            if (atomic_load(d0_of(s)) != d0)
                atomic_fetch_and((_Atomic uint64_t*)&s->d1, ~D1_IGNORED);
            return 0;
        }
    }
    return atomic_load(&hl_spill_used) ? spill_set_ignored(addr) : -1;
}
