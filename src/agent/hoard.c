// SPDX-License-Identifier: MIT
// hoard.c - released blocks held back from reuse: a ring of entries in the agent's own memory
// (reserved once, its pages touched as it fills), first in first out, within hl_opt.hoard
// bytes of blocks and HOARD_SLOTS entries. A block leaving it is checked for bytes changed since
// its release (its paint, its red zones) and given back to the allocator.
//
// One lock, a leaf (agent.h's order): held for a few stores per release, never while checking
// or giving a block back, so threads releasing at once wait for each other only that long.
// At exit the world is stopped and the ring read without it: a thread stopped inside holds
// nothing the ring's readers need, since an entry is complete before `tail` counts it.
#define _GNU_SOURCE
#include <stdatomic.h>
#include <string.h>

#include "../common/compiler.h"
#include "../common/format.h"
#include "errors.h"
#include "hoard.h"
#include "live.h"
#include "layout.h"
#include "options.h"
#include "os.h"
#include "real.h"
#include "writer.h"

// Entries at most: 2^20 (40 MiB of address space reserved, touched only as far as used). A
// hoard of many tiny blocks stops at this count before its byte budget.
#define HOARD_SLOTS (1u << 20)

static hl_hoarded_t* ring;
static void dangling_at_exit(uint64_t first, uint64_t end);
static uint64_t head, tail; // entries [head, tail) are held; under the lock
static uint64_t held_bytes;
static _Atomic int lock;
static _Atomic uint64_t tail_published; // tail, for the exit check's lock-free read

static void hoard_lock(void) {
    while (atomic_exchange_explicit(&lock, 1, memory_order_acquire))
        os_yield();
}
static void hoard_unlock(void) {
    atomic_store_explicit(&lock, 0, memory_order_release);
}

static hl_block_t as_block(const hl_hoarded_t* e) {
    return (hl_block_t){.addr = e->addr, .size = e->size, .fn = e->fn, .stack = e->stack,
                        .guarded = 1};
}

// 1 and *c when e's bytes changed since it was released: its paint, then its red zones.
static int changed(const hl_hoarded_t* e, hl_change_t* c) {
    hl_block_t b = as_block(e);
    return layout_paint_change(e->addr, e->size, (uint8_t)hl_opt.paint_free, c) ||
           layout_before_change(&b, c) || layout_after_change(&b, c);
}

static HL_COLD void report_write(const hl_hoarded_t* e, const hl_change_t* c) {
    hl_block_t b = as_block(e);
    error_report_change(HL_ERR_WRITE_AFTER_FREE, 0, e->addr, &b, e->release_stack, c, 1);
}

static void leave(const hl_hoarded_t* e) {
    hl_change_t c;
    if (hl_unlikely(changed(e, &c)))
        report_write(e, &c);
    hl_real.free(e->real);
}

int hoard_put(const hl_hoarded_t* e) {
    hoard_lock();
    if (hl_unlikely(!ring)) {
        ring = os_reserve((size_t)HOARD_SLOTS * sizeof *ring);
        if (!ring) {
            hoard_unlock();
            return -1;
        }
    }
    ring[tail % HOARD_SLOTS] = *e;
    tail++;
    atomic_store_explicit(&tail_published, tail, memory_order_release);
    held_bytes += e->size;
    for (;;) {
        if (held_bytes <= hl_opt.hoard && tail - head < HOARD_SLOTS)
            break;
        hl_hoarded_t out = ring[head % HOARD_SLOTS];
        head++;
        held_bytes -= out.size;
        hoard_unlock();
        leave(&out);
        hoard_lock();
    }
    hoard_unlock();
    return 0;
}

void hoard_check_at_exit(void) {
    if (!ring)
        return;
    uint64_t end = atomic_load_explicit(&tail_published, memory_order_acquire);
    for (uint64_t i = head; i < end; i++) {
        const hl_hoarded_t* e = &ring[i % HOARD_SLOTS];
        hl_change_t c;
        if (changed(e, &c)) {
            hl_block_t b = as_block(e);
            error_put_change_locked(HL_ERR_WRITE_AFTER_FREE, e->addr, &b, e->release_stack, &c);
        }
    }
    // Reading every live block whole is safe only with the other threads stopped (a block
    // released meanwhile may be unmapped): with the scan, which stops them.
    if (hl_opt.scan_at_exit)
        dangling_at_exit(head, end);
}

// ---------------------------------------------------------------------------------------------
// Dangling pointers at exit: a live block holding the address of a byte of a block held back.
// ---------------------------------------------------------------------------------------------
// Reports at most this many (one per block held back): a freed list still linked everywhere
// would otherwise fill the report.
#define DANGLING_MAX 1000

typedef struct span_s {
    uintptr_t lo, hi;
    uint32_t entry;    // index into ring
    uint32_t reported; // 1 once a holder was named
} span_t;

typedef struct dangling_s {
    span_t* spans;
    size_t n;
    uint32_t reports;
} dangling_t;

// Heapsort by address: no allocation (qsort's merge sort mallocs), O(n log n) for a big hoard.
static void sift(span_t* a, size_t i, size_t n) {
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            return;
        if (c + 1 < n && a[c + 1].lo > a[c].lo)
            c++;
        if (a[i].lo >= a[c].lo)
            return;
        span_t t = a[i];
        a[i] = a[c];
        a[c] = t;
        i = c;
    }
}
static void sort_spans(span_t* a, size_t n) {
    for (size_t i = n / 2; i-- > 0;)
        sift(a, i, n);
    for (size_t end = n; end-- > 1;) {
        span_t t = a[0];
        a[0] = a[end];
        a[end] = t;
        sift(a, 0, end);
    }
}

static span_t* span_of(const dangling_t* d, uintptr_t v) {
    size_t lo = 0, hi = d->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (d->spans[mid].hi <= v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < d->n && d->spans[lo].lo <= v && v < d->spans[lo].hi ? &d->spans[lo] : NULL;
}

static void scan_holder(const hl_block_t* b, void* arg) {
    dangling_t* d = arg;
    if (b->is_internal || d->reports >= DANGLING_MAX)
        return;
    const char* p = (const char*)b->addr;
    for (uint64_t off = 0; off + sizeof(uintptr_t) <= b->size; off += sizeof(uintptr_t)) {
        uintptr_t v;
        memcpy(&v, p + off, sizeof v);
        span_t* s = span_of(d, v);
        if (!s || s->reported)
            continue;
        s->reported = 1;
        const hl_hoarded_t* e = &ring[s->entry % HOARD_SLOTS];
        hl_block_t freed = as_block(e);
        // The holder's allocation stack stands as the error's stack; the change's offset says
        // where in the released block the pointer points.
        hl_change_t c = {.offset = (int64_t)(v - e->addr), .length = sizeof v};
        writer_put_error_locked(HL_ERR_DANGLING_POINTER, b->thread, b->stack, e->addr, b->fn,
                                &freed, e->release_stack);
        writer_put_change_locked(&c);
        if (++d->reports >= DANGLING_MAX)
            return;
    }
}

static void dangling_at_exit(uint64_t first, uint64_t end) {
    size_t n = (size_t)(end - first);
    size_t bytes = (n * sizeof(span_t) + 4095) & ~(size_t)4095;
    dangling_t d = {.spans = n ? os_map(bytes) : NULL, .n = n};
    if (!d.spans)
        return;
    for (size_t k = 0; k < n; k++) {
        const hl_hoarded_t* e = &ring[(first + k) % HOARD_SLOTS];
        d.spans[k] = (span_t){.lo = e->addr, .hi = e->addr + (e->size ? e->size : 1),
                              .entry = (uint32_t)((first + k) % HOARD_SLOTS)};
    }
    sort_spans(d.spans, n);
    live_for_each(scan_holder, &d);
    os_unmap(d.spans, bytes);
}

void hoard_reset_after_fork(void) {
    atomic_store(&lock, 0);
}
