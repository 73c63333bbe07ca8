// SPDX-License-Identifier: MIT
// ring.h - what the hot path hands to the writer thread: fixed-size events in a per-thread
// single-producer (the owning thread), single-consumer (the writer) ring. The producer side is
// inline here; the consumer side is the writer's drain (writer.c).
#ifndef HL_RING_H
#define HL_RING_H

#include <stdatomic.h>
#include <stdint.h>

#include "../common/compiler.h"
#include "live.h"

enum hl_event_kind {
    EV_ALLOC = 1, // size, aux = stack id, fn
    EV_FREE,      // size = the block's size, aux = its stack id, fn, extra = 1 when it was
                  // its thread's latest allocation, freed by that thread (temporary)
    EV_MMAP,      // size = length, aux = stack id, extra = prot | flags << 8 (low bits);
                  // the next event (EV_ADDR) holds the address
    EV_MUNMAP,    // size = length; the next event (EV_ADDR) holds the address
    EV_ADDR,      // size = the address of the event before
    EV_NOTE,      // the program said something through the API: fn = HL_NOTE_*, size = a | b << 32,
                  // or for HL_NOTE_(UN)IGNORE size = the block's size, aux = its stack
};

// What the writer counts of a ring's events (heaplens_stats: this thread's figures). The
// writer's, zeroed by the thread that takes the ring over once it is fully drained.
typedef struct hl_ring_stats_s {
    uint64_t allocs, frees, alloc_bytes, free_bytes;
} hl_ring_stats_t;

// 24 bytes: the heap events, nearly all of them, need no address (the trace names sites).
typedef struct hl_event_s {
    uint64_t ticks;
    uint64_t size;
    uint32_t aux;
    uint8_t kind;
    uint8_t fn;
    uint16_t extra;
} hl_event_t;

// A ring starts small and grows while its thread makes events fast: every thread's ring was 384
// KiB of memory once it had made that many events, however slowly (32 threads making bursts of
// allocations: 11 of the 21 MiB the program took over its own). A small ring fed flat out wakes
// a sleeping writer at every quarter, a system call each 256 events (a ring of 2048 events made
// cxx a quarter slower). So a ring whose quarters come HL_RING_BUSY_QUARTERS times in a row, each
// within HL_RING_QUARTER_NS of the one before (256 events a millisecond; a fill counts always),
// grows at once to the most a ring holds (by steps of four, cxx was 14% slower); bursts that a
// pause ends keep it small. It grows where no event the writer has yet to take would move under
// the larger mask (ring_grow_at: within 16384 events of the decision).
#define HL_RING_EVENTS 16384u      // the most a ring holds
#define HL_RING_FIRST_EVENTS 1024u // what a new ring holds: 24 KiB
#define HL_RING_BUSY_QUARTERS 16
#define HL_RING_QUARTER_NS 1000000u
// A header block its thread released (a header block's own record is the allocator's then):
// what a double free of it reports.
#define HL_RELEASED 128
#define HL_UNSAID 4 // reallocs under way on one thread, one inside another's watch callback
typedef struct hl_released_s {
    uintptr_t addr;
    uint64_t size;
    uint32_t stack, release_stack;
    uint32_t owner; // thread index << 8 | fn
} hl_released_t;

typedef struct hl_ring_s {
    _Alignas(64) _Atomic uint64_t head; // written by the producer only
    uint64_t tail_cache;                // producer's last view of tail
    uint64_t own_mask;                  // producer's: the events it holds less one
    // The same for the consumer, which reads it after head: it changes only where every event
    // between tail and head has one slot under either value (ring_grow_at). Aligned as it
    // would be anyway: on i386, where GCC 11 changed an _Atomic 64-bit field's alignment, an
    // implicit one draws a note on every file that includes this.
    _Alignas(8) _Atomic uint64_t mask;
    uint64_t quarter_ticks; // clock_ticks() at the latest quarter or fill
    uint32_t busy_quarters; // quarters and fills in a row, each soon after the one before
    _Alignas(64) _Atomic uint64_t tail; // written by the consumer only
    _Alignas(64) uint32_t thread_index;
    int tid;
    _Atomic int is_dead;    // owner exited; writer drains then recycles
    _Atomic int waiting_kind; // owner in ring_wait_space: its event's kind, not in a slot yet
    struct hl_ring_s* next; // registry list
    // The writer's, written at every event it takes: a line of their own, so that the owner's
    // own writes below (a release of a header block) do not have to take it back each time.
    _Alignas(64) uint64_t known_ticks;   // the latest time known for this ring's events
    uint64_t drain_mask;                 // mask as read after head, for the events up to it
    uint32_t alloc_trace;                // the trace its latest ALLOC went to (a FREE_TEMP's site)
    hl_ring_stats_t st;                  // (see hl_ring_stats_t)
    _Alignas(64) uint32_t released_next; // owner's: count of released[] entries written
    // The old blocks of this thread's reallocs under way, from their removal from the live table
    // until their FREE is made (record.c): a report or a watch's callback in between may park
    // the thread there, and a new trace's snapshot (writer.c) must still say them. A callback may
    // realloc in turn: the first HL_UNSAID of the nested calls are kept.
    _Atomic int unsaid_depth;
    hl_block_t unsaid[HL_UNSAID];
    hl_released_t released[HL_RELEASED];
    hl_event_t events[HL_RING_EVENTS];
} hl_ring_t;

// The consumer's side, in writer.c: a full ring waits for the writer; a quarter filled wakes a
// sleeping writer, half filled one napping (it comes back on its own when it expects a quarter,
// from the rate it saw: a burst comes sooner).
HL_COLD void ring_wait_space(hl_ring_t* r, int kind);
HL_COLD void writer_kick(void);
enum { HL_WRITER_AWAKE = 0, HL_WRITER_ASLEEP = 1, HL_WRITER_NAPPING = 2 };
extern _Atomic int hl_writer_sleeping;

// May a ring whose writer has yet to take the events [t, h) grow from mask to grown (both a
// power of two less one)? Yes when each of them has one slot under either mask, so that the
// writer finds it whichever mask it read, and no event the producer puts before the writer has
// taken them all lands on one of their slots: the ring is empty (t == h, or one past:
// void_waiting_events), or they all lie in the first mask + 1 slots of one grown + 1.
HL_INLINE int ring_may_grow(uint64_t t, uint64_t h, uint64_t mask, uint64_t grown) {
    return (int64_t)(h - t) <= 0 ||
           ((t & ~grown) == ((h - 1) & ~grown) && ((h - 1) & grown) <= mask);
}

// Every HL_RING_FIRST_EVENTS / 4 events; at each quarter of the ring: wake a waiting writer.
HL_COLD void ring_quarter(hl_ring_t* r, uint64_t h);

// 1 in a fork child whose writer thread is not made yet (writer.c, writer_start_later): each of
// its events is timed, and goes to writer_child_event once it is in the ring.
extern _Atomic int hl_child_awaits_writer;
HL_COLD void writer_child_event(uint64_t ticks);
HL_COLD void writer_start_due(void);

// The writer read a slot's line on the ring's last lap, on its own CPU: the producer's store to
// it must first take the line back from there (hundreds of cycles when the two CPUs are far
// apart), and while it waits every later store waits behind it, down to the pushes of the next
// call. So the line a few slots on is asked for, for writing, ahead of its store
// (hl_prefetch_own: a read prefetch would bring the line shared, and the store would still wait
// for the writer's copy to be dropped).
#define HL_RING_AHEAD 16 // events: 6 lines ahead, a microsecond of a busy program's calls
HL_INLINE hl_event_t* ring_slot(hl_ring_t* r, int kind) {
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    uint64_t mask = r->own_mask;
    if (hl_unlikely(h - r->tail_cache > mask)) {
        r->tail_cache = atomic_load_explicit(&r->tail, memory_order_acquire);
        if (h - r->tail_cache > mask) {
            ring_wait_space(r, kind);
            mask = r->own_mask;
        }
    }
    hl_prefetch_own(&r->events[(h + HL_RING_AHEAD) & mask]);
    return &r->events[h & mask];
}

HL_INLINE void ring_commit(hl_ring_t* r) {
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed) + 1;
    atomic_store_explicit(&r->head, h, memory_order_release);
    // A quarter of the smallest ring: ring_quarter looks whether it is one of this ring's.
    if (hl_unlikely((h & (HL_RING_FIRST_EVENTS / 4 - 1)) == 0))
        ring_quarter(r, h);
}

#endif
