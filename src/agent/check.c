// SPDX-License-Identifier: MIT
// check.c - heap checking: every block gets a red zone before it (with the record that leads
// back to the allocator's pointer, layout.c) and one after it (the guard), new blocks are
// painted with one byte and released ones with another, and released blocks may be held back
// (hoard.c) so that a write through a dangling pointer shows when they leave. The cost is the
// user's choice; none of it runs unless a checking option is given (the hooks test one flag).
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "../common/compiler.h"
#include "../common/format.h"
#include "check.h"
#include "errors.h"
#include "gpage.h"
#include "hoard.h"
#include "layout.h"
#include "options.h"
#include "real.h"
#include "record.h"
#include "unwind.h"

// The allocator's block for a checked one of size bytes at alignment align, and the program's
// pointer into it (NULL, errno set, when the allocator has no room).
static char* checked_make(size_t size, size_t align, int fn, int is_zeroed) {
    // memalign takes any alignment and rounds it up to a power of two, as the front must be
    while (align & (align - 1))
        align += align & -align;
    size_t front = layout_front(align);
    size_t total = layout_checked_size(front, size);
    if (total == SIZE_MAX) {
        errno = ENOMEM;
        return NULL;
    }
    char* real;
    if (align <= 16)
        real = is_zeroed ? hl_real.calloc(1, total) : hl_real.malloc(total);
    else if (fn == HL_FN_ALIGNED_ALLOC)
        real = hl_real.aligned_alloc(align, total);
    else
        real = hl_real.memalign(align, total);
    if (!real)
        return NULL;
    char* p = real + front;
    layout_checked_fill(p, front);
    if (hl_opt.paint_alloc >= 0 && !is_zeroed)
        memset(p, hl_opt.paint_alloc, size);
    return p;
}

void* check_alloc(hl_thread_t* t, size_t size, size_t align, int fn, int is_zeroed) {
    if (fn == HL_FN_VALLOC || fn == HL_FN_PVALLOC) {
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        align = page;
        if (fn == HL_FN_PVALLOC) // its size is whole pages, and that is the block's size
            size = size ? (size + page - 1) & ~(page - 1) : page;
    }
    t->busy = 1;
    char* p = NULL;
    uint32_t stack = 0;
    if (hl_unlikely(hl_opt.gpage_every)) {
        p = gpage_alloc(t, size, align, fn, is_zeroed, &stack);
        if (p) {
            t->busy = 0;
            return p;
        }
    }
    p = checked_make(size, align, fn, is_zeroed);
    if (p)
        record_alloc_with(t, p, size, fn, HL_AS_GUARDED, stack);
    t->busy = 0;
    return p;
}

static void release_now(hl_thread_t* t, const hl_block_t* b, int fn) {
    void* real = check_release(t, b, hl_opt.release_stacks ? stack_capture_release(t) : 0, fn);
    if (real)
        hl_real.free(real);
}

// What realloc(p, 0) means is the allocator's to say: glibc releases the block and returns
// NULL, jemalloc (by default) and others return a new block. Asked once, of a block of its own.
static int zero_realloc_frees(void) {
    static _Atomic int answer = -1;
    int a = atomic_load_explicit(&answer, memory_order_relaxed);
    if (a < 0) {
        void* p = hl_real.malloc(1);
        void* q = p ? hl_real.realloc(p, 0) : NULL;
        a = p && !q;
        if (q)
            hl_real.free(q);
        atomic_store_explicit(&answer, a, memory_order_relaxed);
    }
    return a;
}

void* check_realloc(hl_thread_t* t, const hl_block_t* old, size_t size, int fn) {
    if (size == 0 && zero_realloc_frees()) {
        record_realloc_done(t, old, NULL, 0, fn);
        release_now(t, old, fn);
        return NULL;
    }
    char* q = checked_make(size, 16, fn, 0);
    if (!q) {
        record_realloc_undo(t, old);
        return NULL;
    }
    memcpy(q, (const void*)old->addr, old->size < size ? old->size : size);
    record_realloc_done(t, old, q, size, fn);
    release_now(t, old, fn);
    return q;
}

void* check_real_untraced(const hl_block_t* b, void* p) {
    if (gpage_owns((uintptr_t)p))
        return NULL; // a guard page's block: the allocator never had it
    return b->guarded ? layout_checked_real((uintptr_t)p) : p;
}

int check_realloc_untraced(void* p, size_t size, void** out) {
    hl_block_t b;
    int is_gpage = gpage_owns((uintptr_t)p);
    if (live_lookup((uintptr_t)p, &b) != HL_BLOCK_LIVE || !(b.guarded || is_gpage) ||
        b.is_internal)
        return 0;
    live_remove((uintptr_t)p, &b, 0);
    void* q = size ? hl_real.malloc(size) : NULL;
    if (q)
        memcpy(q, p, b.size < size ? b.size : size);
    if (!q && size) {
        live_insert(&b);
        *out = NULL;
        return 1;
    }
    char* real = is_gpage ? NULL : layout_checked_real((uintptr_t)p);
    if (real)
        hl_real.free(real);
    *out = q;
    return 1;
}

void* check_release(hl_thread_t* t, const hl_block_t* b, uint32_t release_stack, int fn) {
    (void)t;
    if (gpage_owns(b->addr)) {
        gpage_release(b, release_stack, fn);
        return NULL;
    }
    hl_change_t c;
    char* real = layout_checked_real(b->addr);
    if (layout_before_change(b, &c))
        error_report_change(HL_ERR_UNDERFLOW, fn, b->addr, b, 0, &c, 0);
    if (!real)
        return NULL; // where the allocator's block starts is lost: kept, never given back wrong
    if (hl_opt.paint_free >= 0)
        memset((void*)b->addr, hl_opt.paint_free, b->size);
    if (hl_opt.hoard) {
        hl_hoarded_t e = {.addr = b->addr,
                          .real = real,
                          .size = b->size,
                          .stack = b->stack,
                          .release_stack = release_stack,
                          .fn = b->fn};
        if (hoard_put(&e) == 0)
            return NULL;
    }
    return real;
}

void check_at_exit(void) {
    if (hl_opt.hoard)
        hoard_check_at_exit();
}
