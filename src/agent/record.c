// SPDX-License-Identifier: MIT
// record.c - the hot path behind every hook: unwind, intern the stack, update the live table,
// append one event to this thread's ring. No lock but a live-table shard's, no syscall, no
// allocation. Heap errors leave through errors.c (the cold path).
#define _GNU_SOURCE
#include <string.h>

#include <sys/single_threaded.h>

#include "../common/compiler.h"
#include "../common/format.h"
#include "../common/clock.h"
#include "../../include/heaplens.h"
#include "agent.h"
#include "api.h"
#include "check.h"
#include "epoch.h"
#include "gpage.h"
#include "errors.h"
#include "live.h"
#include "options.h"
#include "record.h"
#include "ring.h"
#include "scan.h"
#include "thread.h"
#include "unwind.h"

static HL_COLD int attach_slow(hl_thread_t* t) {
    if (thread_attach(t) != 0)
        return -1;
    agent_child_first_event();
    return 0;
}

// An event's time. Events of different threads are put in order by their times; while glibc
// runs the process single-threaded there is one ring and its order is the events' order, so
// only one event in 64 (HL_UNTIMED_MASK) reads the clock (rdtsc costs ~10 ns here, a tenth of
// a whole call on tree or cxx) and the writer gives the others the latest time it knows
// (writer.c). A thread's first event is timed.
HL_INLINE uint64_t event_ticks(hl_thread_t* t) {
    if (hl_likely(__libc_single_threaded) && (t->untimed++ & t->untimed_mask))
        return 0;
    return clock_ticks();
}

// One event into this thread's ring; the only way events are made.
HL_INLINE void push_event(hl_thread_t* t, int kind, int fn, uint64_t size, uint32_t aux,
                          uint16_t extra) {
    hl_ring_t* r = t->ring;
    hl_event_t* ev = ring_slot(r, kind);
    uint64_t ticks = event_ticks(t);
    ev->ticks = ticks;
    ev->size = size;
    ev->aux = aux;
    ev->kind = (uint8_t)kind;
    ev->fn = (uint8_t)fn;
    ev->extra = extra;
    ring_commit(r);
    if (hl_unlikely(ticks) &&
        hl_unlikely(atomic_load_explicit(&hl_child_awaits_writer, memory_order_relaxed)))
        writer_child_event(ticks); // a fork child without its writer yet (writer.c)
}

// The body of both, inlined into each: record_alloc_as's constant 0 leaves no test behind.
HL_INLINE void alloc_body(hl_thread_t* t, void* p, size_t size, int fn, int how,
                          uint32_t stack) {
    if (hl_unlikely(!t->ring) && attach_slow(t) != 0) {
        if (how & HL_AS_HEADED) // still a header block to every later call
            live_insert(&(hl_block_t){.addr = (uintptr_t)p,
                                      .size = size,
                                      .fn = (uint8_t)fn,
                                      .guarded = how & HL_AS_GUARDED,
                                      .headed = 1});
        return;
    }
    int api = atomic_load_explicit(&hl_api_hooks, memory_order_relaxed);
    if (hl_unlikely(api & HL_API_PAUSED) && t->paused) {
        api_alloc_paused(p, size, fn, how);
        return;
    }
    if (!(how & HL_AS_HEADED))
        live_prefetch((uintptr_t)p);
    t->in_flight = (uintptr_t)p;
    if (!stack)
        stack = stack_capture(t);
    hl_block_t b = {
        .addr = (uintptr_t)p,
        .size = size,
        .fn = (uint8_t)fn,
        .guarded = (how & HL_AS_GUARDED) != 0,
        .headed = (how & HL_AS_HEADED) != 0,
        .stack = stack,
        .thread = t->index,
        .epoch = epoch_now(),
    };
    // The table's compare-and-swap first: a locked instruction waits for every store before
    // it, and the guard's line at the block's end may still be on its way to the cache.
    live_insert(&b);
    if (b.guarded)
        guard_fill(p, size);
    t->last_alloc = (uintptr_t)p;
    push_event(t, EV_ALLOC, fn, size, stack, 0);
    if (hl_unlikely(t->park_pending))
        scan_park_self();
    t->in_flight = 0;
    if (hl_unlikely(api & HL_API_THRESHOLDS))
        api_after_alloc(t, size);
}

void record_alloc_as(hl_thread_t* t, void* p, size_t size, int fn, int how) {
    alloc_body(t, p, size, fn, how, 0);
}

void record_alloc_with(hl_thread_t* t, void* p, size_t size, int fn, int how, uint32_t stack) {
    alloc_body(t, p, size, fn, how, stack);
}

// An allocation made while the agent itself was running (its own libraries' nested calls):
// kept in the live table so its release is recognised, never reported or counted.
void record_internal_alloc(void* p, size_t size) {
    hl_block_t b = {.addr = (uintptr_t)p, .size = size, .is_internal = 1};
    live_insert(&b);
}

void record_internal_free(void* p) {
    hl_block_t b;
    live_remove((uintptr_t)p, &b, 0);
}

// A block freed by the thread that allocated it last, before it allocated anything else, is a
// temporary allocation (the live table keeps 24 bits of the owner's index).
static void push_free(hl_thread_t* t, const hl_block_t* b, int fn) {
    int is_temporary = b->addr == t->last_alloc && b->thread == (t->index & 0xffffff);
    if (is_temporary)
        t->last_alloc = 0;
    push_event(t, EV_FREE, fn, b->size, b->stack, (uint16_t)is_temporary);
}

// What a released header block was, kept by the releasing thread for a later double free
// (the direct map keeps it in the freed slot; a header is the allocator's once released).
static inline void note_released(hl_thread_t* t, const hl_block_t* b, uint32_t release_stack) {
    hl_ring_t* r = t->ring;
    hl_released_t* e = &r->released[r->released_next++ % HL_RELEASED];
    e->addr = b->addr;
    e->size = b->size;
    e->stack = b->stack;
    e->release_stack = release_stack;
    e->owner = b->thread << 8 | b->fn;
}

static const hl_released_t* search_released(const hl_ring_t* r, uintptr_t addr) {
    uint32_t n = r->released_next < HL_RELEASED ? r->released_next : HL_RELEASED;
    for (uint32_t k = 1; k <= n; k++) {
        const hl_released_t* e = &r->released[(r->released_next - k) % HL_RELEASED];
        if (e->addr == addr)
            return e;
    }
    return NULL;
}

// The latest release of the header block at addr that a thread still remembers (this thread's
// first), into *b as live_remove reports a FREED block; left as it is when none does.
static HL_COLD void find_released(hl_thread_t* t, uintptr_t addr, hl_block_t* b) {
    thread_lock();
    const hl_released_t* e = search_released(t->ring, addr);
    for (hl_ring_t* r = thread_rings(); r && !e; r = r->next)
        if (r != t->ring)
            e = search_released(r, addr);
    if (e) {
        b->size = e->size;
        b->stack = e->stack;
        b->fn = (uint8_t)(e->owner & 0xff);
        b->thread = e->release_stack;
    }
    thread_unlock();
}

void* record_free(hl_thread_t* t, void* p, int fn) {
    if (hl_unlikely(!t->ring) && attach_slow(t) != 0)
        return record_free_untraced(p);
    hl_block_t b;
    live_prefetch((uintptr_t)p);
    // Where the block is released is kept with it, for a double free to name both places.
    uint32_t here = hl_opt.release_stacks ? stack_capture_release(t) : 0;
    int state = live_remove((uintptr_t)p, &b, here);
    if (hl_likely(state == HL_BLOCK_LIVE)) {
        void* real = b.headed ? (char*)p - HL_HEADER : p;
        if (hl_unlikely(b.is_internal))
            return real;
        // The event first: a report waits for the writer's lock, and a thread parked there by
        // a stop of the world must hold no change of the live table that its ring does not say.
        push_free(t, &b, fn);
        if (hl_unlikely(hl_fn_family((int)b.fn) != hl_fn_family(fn)))
            error_report(HL_ERR_MISMATCHED_FREE, fn, (uintptr_t)p, &b, 0);
        if (b.guarded && hl_unlikely(!guard_is_intact(&b)))
            error_report(HL_ERR_OVERFLOW, fn, (uintptr_t)p, &b, 0);
        if (b.headed || b.trailed) // its record is the allocator's once released
            note_released(t, &b, here);
        if (hl_unlikely(atomic_load_explicit(&hl_api_hooks, memory_order_relaxed)))
            api_on_release(t, &b, HEAPLENS_FREED, here);
        if (hl_unlikely(t->park_pending))
            scan_park_self();
        if (hl_unlikely(hl_opt.checking) && (b.guarded || gpage_owns(b.addr)))
            return check_release(t, &b, here, fn);
        return real;
    }
    if (!agent_is_from_start())
        return p; // allocated before the agent came: not ours to judge
    if (state == HL_BLOCK_FREED && b.headed)
        find_released(t, (uintptr_t)p, &b);
    error_report(state == HL_BLOCK_FREED ? HL_ERR_DOUBLE_FREE : HL_ERR_INVALID_FREE, fn,
                 (uintptr_t)p, state == HL_BLOCK_FREED ? &b : NULL,
                 state == HL_BLOCK_FREED ? b.thread : 0);
    return NULL;
}

void* record_free_untraced(void* p) {
    hl_block_t b;
    int state = live_remove((uintptr_t)p, &b, 0);
    if (hl_unlikely(hl_opt.checking) && state == HL_BLOCK_LIVE && !b.is_internal)
        return check_real_untraced(&b, p);
    return state == HL_BLOCK_LIVE && b.headed ? (char*)p - HL_HEADER : p;
}

// The old block of a realloc under way (ring.h: unsaid), owner's only.
static inline void unsaid_push(hl_ring_t* r, const hl_block_t* b) {
    int depth = atomic_load_explicit(&r->unsaid_depth, memory_order_relaxed);
    if (depth < HL_UNSAID)
        r->unsaid[depth] = *b;
    atomic_store_explicit(&r->unsaid_depth, depth + 1, memory_order_release);
}
// Before the FREE is made: a FREE held waiting for ring space is dropped from a new trace
// (void_waiting_events), and the snapshot must then not say the block either.
static inline void unsaid_pop(hl_thread_t* t) {
    hl_ring_t* r = t->ring; // none in a child forked inside a watch's callback
    int depth = r ? atomic_load_explicit(&r->unsaid_depth, memory_order_relaxed) : 0;
    if (depth > 0)
        atomic_store_explicit(&r->unsaid_depth, depth - 1, memory_order_release);
}

// realloc removes the old block before the real call (its address may be handed to another
// thread the moment the allocator releases it) and puts it back if the call fails.
int record_realloc_begin(hl_thread_t* t, void* p, hl_block_t* old) {
    if (hl_unlikely(!t->ring) && attach_slow(t) != 0)
        return -1;
    live_prefetch((uintptr_t)p);
    uint32_t here = hl_opt.release_stacks ? stack_capture_release(t) : 0;
    int state = live_remove((uintptr_t)p, old, here);
    if (hl_likely(state == HL_BLOCK_LIVE)) {
        if (!old->is_internal)
            unsaid_push(t->ring, old);
        if (old->guarded && hl_unlikely(!guard_is_intact(old)))
            error_report(HL_ERR_OVERFLOW, HL_FN_REALLOC, (uintptr_t)p, old, 0);
        if (old->headed || old->trailed)
            note_released(t, old, here);
        if (hl_unlikely(atomic_load_explicit(&hl_api_hooks, memory_order_relaxed)) &&
            !old->is_internal)
            api_on_release(t, old, HEAPLENS_RESIZED, here);
        return 0;
    }
    if (!agent_is_from_start())
        return 1;
    if (state == HL_BLOCK_FREED && old->headed)
        find_released(t, (uintptr_t)p, old);
    if (state == HL_BLOCK_FREED)
        error_report(HL_ERR_REALLOC_FREED, HL_FN_REALLOC, (uintptr_t)p, old, old->thread);
    else
        error_report(HL_ERR_INVALID_FREE, HL_FN_REALLOC, (uintptr_t)p, NULL, 0);
    return 2;
}

void record_realloc_undo(hl_thread_t* t, const hl_block_t* old) {
    live_insert(old);
    if (!old->is_internal)
        unsaid_pop(t);
}

void record_realloc_done(hl_thread_t* t, const hl_block_t* old, void* q, size_t size, int fn) {
    if (!old->is_internal) {
        unsaid_pop(t);
        if (hl_unlikely(!t->ring) && attach_slow(t) != 0)
            return; // forked inside a watch's callback, and not tracing here
        push_free(t, old, fn);
    }
    if (!q)
        return;
    // Checking keeps the old block's layout (check.c); else guards follow the option.
    int guarded = hl_opt.checking ? old->guarded : hl_opt.guard > 0;
    record_alloc_as(t, q, size, fn,
                    old->headed ? HL_AS_GUARDED | HL_AS_HEADED : guarded ? HL_AS_GUARDED : 0);
}

void record_mmap(hl_thread_t* t, void* p, size_t len, int prot, int flags) {
    if (hl_unlikely(!t->ring) && attach_slow(t) != 0)
        return;
    uint32_t stack = stack_capture(t);
    push_event(t, EV_MMAP, HL_FN_MMAP, len, stack,
               (uint16_t)((prot & 0xff) | ((flags & 0xff) << 8)));
    push_event(t, EV_ADDR, 0, (uintptr_t)p, 0, 0); // the writer takes the two together
}

void record_munmap(hl_thread_t* t, void* p, size_t len) {
    if (hl_unlikely(!t->ring) && attach_slow(t) != 0)
        return;
    push_event(t, EV_MUNMAP, HL_FN_MUNMAP, len, 0, 0);
    push_event(t, EV_ADDR, 0, (uintptr_t)p, 0, 0);
}

size_t record_usable_size(void* p) {
    hl_block_t b;
    if (live_lookup((uintptr_t)p, &b) == HL_BLOCK_LIVE && (b.guarded || gpage_owns(b.addr)))
        return b.size;
    return (size_t)-1;
}

void record_note(hl_thread_t* t, int what, uint32_t a, uint32_t b) {
    if (hl_unlikely(!t->ring) && attach_slow(t) != 0)
        return;
    push_event(t, EV_NOTE, what, (uint64_t)a | (uint64_t)b << 32, 0, 0);
}

void record_note_block(hl_thread_t* t, int what, const hl_block_t* b) {
    if (hl_unlikely(!t->ring) && attach_slow(t) != 0)
        return;
    push_event(t, EV_NOTE, what, b->size, b->stack, 0);
}
