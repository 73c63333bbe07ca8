// SPDX-License-Identifier: MIT
// hooks.c - the C allocation functions. The only file that defines malloc and friends. Each
// hook: take the fast path when the agent is on and not already inside itself, call the real
// function, record. Everything unusual (start-up, nesting, tracing off) is in slow_*.
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "../common/compiler.h"
#include "../common/format.h"
#include "agent.h"
#include "check.h"
#include "errors.h"
#include "gpage.h"
#include "hooks.h"
#include "layout.h"
#include "live.h"
#include "options.h"
#include "real.h"
#include "record.h"
#include "thread.h"

#define HOOK_READY() hl_likely(atomic_load_explicit(&hl_phase, memory_order_relaxed) == HL_ON)

// ---------------------------------------------------------------------------------------------
// Slow paths: before the real functions are known, inside the agent, or tracing off.
// ---------------------------------------------------------------------------------------------
static HL_COLD void ensure_started(void) {
    if (atomic_load(&hl_real_ready) != 2) {
        if (thread_self()->busy)
            return; // a nested call while resolving: the caller uses the bootstrap arena
        thread_self()->busy = 1;
        real_resolve();
        thread_self()->busy = 0;
    }
    if (atomic_load(&hl_phase) == HL_OFF && !thread_self()->busy)
        agent_init();
}

// Allocation by the agent's own libraries (or before start): real allocator, remembered as
// internal so its release is not mistaken for an invalid free.
static HL_COLD void* slow_alloc(size_t size, size_t align, int fn, size_t nmemb) {
    ensure_started();
    if (atomic_load(&hl_phase) == HL_ON && !thread_self()->busy) {
        // This call started the agent (a constructor that ran before the agent's own): it is
        // the program's, so it takes the recorded path.
        if (fn == HL_FN_CALLOC) {
            size_t total;
            if (__builtin_mul_overflow(nmemb, size, &total))
                return NULL;
            return calloc(nmemb, size);
        }
        switch (fn) {
        case HL_FN_MEMALIGN:
        case HL_FN_ALIGNED_ALLOC:
        case HL_FN_VALLOC:
        case HL_FN_PVALLOC:
            return hook_aligned(align, size, fn);
        default:
            return hook_alloc(size, fn);
        }
    }
    if (atomic_load(&hl_real_ready) != 2) {
        size_t total = size;
        if (fn == HL_FN_CALLOC && nmemb && __builtin_mul_overflow(nmemb, size, &total))
            return NULL;
        return bootstrap_alloc(total, align); // bootstrap memory is zeroed
    }
    void* p = NULL;
    switch (fn) {
    case HL_FN_CALLOC:
        p = hl_real.calloc(nmemb, size);
        break;
    case HL_FN_MEMALIGN:
        p = hl_real.memalign(align, size);
        break;
    case HL_FN_ALIGNED_ALLOC:
        p = hl_real.aligned_alloc(align, size);
        break;
    case HL_FN_VALLOC:
        p = hl_real.valloc(size);
        break;
    case HL_FN_PVALLOC:
        p = hl_real.pvalloc(size);
        break;
    default:
        p = hl_real.malloc(size);
        break;
    }
    if (p && atomic_load(&hl_phase) == HL_ON && thread_self()->busy)
        record_internal_alloc(p, size);
    return p;
}

static HL_COLD void slow_free(void* p) {
    if (atomic_load(&hl_real_ready) != 2)
        return;
    hl_real.free(record_free_untraced(p));
}

// The program's pointer to the header block q (of layout_headed_size(size) bytes), recorded.
// Where no mark can say it has a header (the agent out of memory for its marks), its contents
// move to a block without one.
static void* give_headed(hl_thread_t* t, char* q, size_t size, int fn) {
    if (hl_likely(live_header_room((uintptr_t)q + HL_HEADER))) {
        record_alloc_as(t, q + HL_HEADER, size, fn, HL_AS_GUARDED | HL_AS_HEADED);
        return q + HL_HEADER;
    }
    void* p = hl_real.malloc(layout_padded(size));
    if (p) {
        memcpy(p, q + HL_HEADER, size);
        record_alloc(t, p, size, fn);
    }
    hl_real.free(q);
    return p;
}

// ---------------------------------------------------------------------------------------------
// malloc family
// ---------------------------------------------------------------------------------------------
void* hook_alloc(size_t size, int fn) {
    hl_thread_t* t = thread_self();
    if (!HOOK_READY() || t->busy)
        return slow_alloc(size, 16, fn, 0);
    if (hl_unlikely(hl_opt.checking))
        return check_alloc(t, size, 16, fn, 0);
    t->busy = 1;
    void* p;
    if (size >= hl_opt.header_min) {
        char* q = hl_real.malloc(layout_headed_size(size));
        p = q ? give_headed(t, q, size, fn) : NULL;
    } else {
        p = hl_real.malloc(layout_plain(size));
        if (p)
            record_alloc(t, p, size, fn);
    }
    t->busy = 0;
    return p;
}

void hook_free(void* p, int fn) {
    if (!p)
        return;
    if (hl_unlikely(bootstrap_owns(p)))
        return;
    hl_thread_t* t = thread_self();
    if (!HOOK_READY() || t->busy) {
        slow_free(p);
        return;
    }
    t->busy = 1;
    void* real = record_free(t, p, fn);
    t->busy = 0;
    if (hl_likely(real != NULL))
        hl_real.free(real);
}

HL_EXPORT void* malloc(size_t size) {
    return hook_alloc(size, HL_FN_MALLOC);
}
HL_EXPORT void free(void* p) {
    hook_free(p, HL_FN_FREE);
}

HL_EXPORT void* calloc(size_t nmemb, size_t size) {
    hl_thread_t* t = thread_self();
    if (!HOOK_READY() || t->busy)
        return slow_alloc(size, 16, HL_FN_CALLOC, nmemb);
    size_t total;
    if (__builtin_mul_overflow(nmemb, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    if (hl_unlikely(hl_opt.checking))
        return check_alloc(t, total, 16, HL_FN_CALLOC, 1);
    t->busy = 1;
    void* p;
    if (total >= hl_opt.header_min) {
        char* q = hl_real.calloc(1, layout_headed_size(total));
        p = q ? give_headed(t, q, total, HL_FN_CALLOC) : NULL;
    } else {
        p = hl_real.calloc(1, layout_plain(total));
        if (p)
            record_alloc(t, p, total, HL_FN_CALLOC);
    }
    t->busy = 0;
    return p;
}

// realloc while tracing is off or inside the agent: a header block stays one (a later release
// must still find its header), the rest goes straight through, its old record taken out as a
// release would take it (the block moved is not recorded: nothing made while tracing is off is).
static HL_COLD void* slow_realloc(hl_thread_t* t, void* p, size_t size) {
    if (atomic_load(&hl_real_ready) != 2)
        return NULL;
    void* moved;
    if (hl_opt.checking && check_realloc_untraced(p, size, &moved))
        return moved;
    hl_block_t b;
    if (live_lookup((uintptr_t)p, &b) == HL_BLOCK_LIVE && b.headed) {
        live_remove((uintptr_t)p, &b, 0);
        if (size == 0) // what realloc(p, 0) means is the allocator's to say
            return hl_real.realloc((char*)p - HL_HEADER, 0);
        char* q = hl_real.realloc((char*)p - HL_HEADER, layout_headed_size(size));
        if (!q) {
            live_insert(&b);
            return NULL;
        }
        if (!live_header_room((uintptr_t)q + HL_HEADER)) {
            void* plain = hl_real.malloc(size);
            if (plain)
                memcpy(plain, q + HL_HEADER, size);
            hl_real.free(q);
            return plain;
        }
        b.addr = (uintptr_t)q + HL_HEADER;
        b.size = size;
        if (b.guarded)
            guard_fill(q + HL_HEADER, size);
        live_insert(&b);
        return q + HL_HEADER;
    }
    if (atomic_load(&hl_phase) == HL_ON && t->busy) {
        record_internal_free(p);
        void* q = hl_real.realloc(p, size);
        if (q)
            record_internal_alloc(q, size);
        return q;
    }
    // Left in the table, the old block would be reported lost at the next scan, and its slot
    // would name a block that is gone.
    hl_block_t old;
    int was_live = live_remove((uintptr_t)p, &old, 0) == HL_BLOCK_LIVE;
    void* q = hl_real.realloc(p, size);
    if (!q && size != 0 && was_live)
        live_insert(&old); // the call failed: the block is where it was (size 0: glibc freed it)
    return q;
}

static void* realloc_impl(void* p, size_t size, int fn) {
    hl_thread_t* t = thread_self();
    if (!p) {
        if (!HOOK_READY() || t->busy)
            return slow_alloc(size, 16, HL_FN_MALLOC, 0);
        int of_null = fn == HL_FN_REALLOC ? HL_FN_REALLOC_OF_NULL : HL_FN_REALLOCARRAY_OF_NULL;
        return hook_alloc(size, of_null);
    }
    if (hl_unlikely(bootstrap_owns(p))) {
        // Never give arena memory to the allocator: move the contents to a real block.
        void* q = malloc(size);
        if (q) {
            size_t room = bootstrap_room(p);
            memcpy(q, p, size < room ? size : room);
        }
        return q;
    }
    if (!HOOK_READY() || t->busy)
        return slow_realloc(t, p, size);
    t->busy = 1;
    hl_block_t old;
    int verdict = record_realloc_begin(t, p, &old);
    void* q;
    if (verdict == 2) {
        t->busy = 0;
        errno = EINVAL;
        return NULL;
    }
    if (verdict < 0) { // this thread cannot trace (tracing stopped)
        q = slow_realloc(t, p, size);
        t->busy = 0;
        return q;
    }
    if (verdict == 1) { // a block from before the agent came: no room for a guard
        q = hl_real.realloc(p, size);
        if (q)
            record_alloc_as(t, q, size, fn, 0);
        t->busy = 0;
        return q;
    }
    if (hl_unlikely(hl_opt.checking) && (old.guarded || gpage_owns((uintptr_t)p))) {
        q = check_realloc(t, &old, size, fn);
        t->busy = 0;
        return q;
    }
    char* real = old.headed ? (char*)p - HL_HEADER : p;
    if (size == 0) {
        // The allocator decides what realloc(p, 0) means (glibc frees); ask it unpadded.
        q = hl_real.realloc(real, 0);
        record_realloc_done(t, &old, NULL, 0, fn);
        if (q)
            record_alloc_as(t, q, 0, fn, 0);
    } else if (old.headed) {
        char* r = hl_real.realloc(real, layout_headed_size(size));
        q = r ? r + HL_HEADER : NULL;
        if (!r) {
            record_realloc_undo(t, &old);
        } else if (hl_likely(live_header_room((uintptr_t)q))) {
            record_realloc_done(t, &old, q, size, fn);
        } else { // no mark for its new place: moved to a block without a header
            record_realloc_done(t, &old, NULL, 0, fn);
            q = give_headed(t, r, size, fn);
        }
    } else {
        q = hl_real.realloc(p, layout_plain(size));
        if (!q)
            record_realloc_undo(t, &old);
        else
            record_realloc_done(t, &old, q, size, fn);
    }
    t->busy = 0;
    return q;
}

HL_EXPORT void* realloc(void* p, size_t size) {
    return realloc_impl(p, size, HL_FN_REALLOC);
}

HL_EXPORT void* reallocarray(void* p, size_t nmemb, size_t size) {
    size_t total;
    if (__builtin_mul_overflow(nmemb, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc_impl(p, total, HL_FN_REALLOCARRAY);
}

// The aligned family: the guard goes after the requested size, alignment stays the caller's.
void* hook_aligned(size_t align, size_t size, int fn) {
    hl_thread_t* t = thread_self();
    if (!HOOK_READY() || t->busy)
        return slow_alloc(size, align, fn, 0);
    if (hl_unlikely(hl_opt.checking))
        return check_alloc(t, size, align, fn, 0);
    t->busy = 1;
    void* p;
    switch (fn) {
    case HL_FN_ALIGNED_ALLOC:
        p = hl_real.aligned_alloc(align, layout_padded(size));
        break;
    case HL_FN_VALLOC:
        p = hl_real.valloc(layout_padded(size));
        break;
    case HL_FN_PVALLOC: {
        // pvalloc rounds the size up to whole pages; that rounded size is the block's size.
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        size_t rounded = size ? (size + page - 1) & ~(page - 1) : page;
        p = hl_real.pvalloc(layout_padded(rounded));
        size = rounded;
        break;
    }
    default:
        p = hl_real.memalign(align, layout_padded(size));
        break;
    }
    if (p)
        record_alloc(t, p, size, fn);
    t->busy = 0;
    return p;
}

HL_EXPORT void* memalign(size_t align, size_t size) {
    return hook_aligned(align, size, HL_FN_MEMALIGN);
}
HL_EXPORT void* aligned_alloc(size_t align, size_t size) {
    return hook_aligned(align, size, HL_FN_ALIGNED_ALLOC);
}
HL_EXPORT void* valloc(size_t size) {
    return hook_aligned(4096, size, HL_FN_VALLOC);
}
HL_EXPORT void* pvalloc(size_t size) {
    return hook_aligned(4096, size, HL_FN_PVALLOC);
}

HL_EXPORT int posix_memalign(void** out, size_t align, size_t size) {
    if (align < sizeof(void*) || (align & (align - 1)) != 0)
        return EINVAL;
    hl_thread_t* t = thread_self();
    if (!HOOK_READY() || t->busy) {
        void* p = slow_alloc(size, align, HL_FN_MEMALIGN, 0);
        if (!p)
            return ENOMEM;
        *out = p;
        return 0;
    }
    if (hl_unlikely(hl_opt.checking)) {
        void* p = check_alloc(t, size, align, HL_FN_POSIX_MEMALIGN, 0);
        if (!p)
            return ENOMEM;
        *out = p;
        return 0;
    }
    t->busy = 1;
    void* p = NULL;
    int rc = hl_real.posix_memalign(&p, align, layout_padded(size));
    if (rc == 0) {
        record_alloc(t, p, size, HL_FN_POSIX_MEMALIGN);
        *out = p;
    }
    t->busy = 0;
    return rc;
}

// With guards, a program must not learn it owns the guard: report the size it asked for.
HL_EXPORT size_t malloc_usable_size(void* p) {
    if (!p)
        return 0;
    if (hl_unlikely(bootstrap_owns(p)))
        return 0;
    if (atomic_load(&hl_real_ready) != 2)
        return 0;
    // A header block's size is known whatever the agent is doing (its header is not the
    // allocator's pointer).
    if (hl_opt.guard || hl_opt.checking) {
        size_t n = record_usable_size(p);
        if (n != (size_t)-1)
            return n;
    }
    return hl_real.malloc_usable_size(p);
}

// cfree is gone from current glibc but old binaries may still call it.
HL_EXPORT void cfree(void* p) {
    free(p);
}
