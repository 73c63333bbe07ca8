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

#include "agent.h"

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
    if (atomic_load(&hl_phase) == HL_ON && thread_self()->busy)
        record_internal_free(p);
    hl_real.free(p);
}

// With guards on, the real block is size + guard bytes; a size near SIZE_MAX must still fail
// the way the allocator fails it, not wrap around.
static inline size_t padded(size_t size) {
    size_t g = (size_t)hl_opt.guard;
    return size > SIZE_MAX - g ? SIZE_MAX : size + g;
}

// ---------------------------------------------------------------------------------------------
// malloc family
// ---------------------------------------------------------------------------------------------
void* hook_alloc(size_t size, int fn) {
    hl_thread_t* t = thread_self();
    if (!HOOK_READY() || t->busy)
        return slow_alloc(size, 16, fn, 0);
    t->busy = 1;
    void* p = hl_real.malloc(padded(size));
    if (hl_likely(p != NULL))
        record_alloc(t, p, size, fn);
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
    int pass = record_free(t, p, fn);
    t->busy = 0;
    if (hl_likely(pass))
        hl_real.free(p);
}

HL_EXPORT void* malloc(size_t size) { return hook_alloc(size, HL_FN_MALLOC); }
HL_EXPORT void free(void* p) { hook_free(p, HL_FN_FREE); }

HL_EXPORT void* calloc(size_t nmemb, size_t size) {
    hl_thread_t* t = thread_self();
    if (!HOOK_READY() || t->busy)
        return slow_alloc(size, 16, HL_FN_CALLOC, nmemb);
    size_t total;
    if (__builtin_mul_overflow(nmemb, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    t->busy = 1;
    void* p = hl_real.calloc(1, padded(total));
    if (hl_likely(p != NULL))
        record_alloc(t, p, total, HL_FN_CALLOC);
    t->busy = 0;
    return p;
}

static void* realloc_impl(void* p, size_t size, int fn) {
    hl_thread_t* t = thread_self();
    if (!p) {
        if (!HOOK_READY() || t->busy)
            return slow_alloc(size, 16, HL_FN_MALLOC, 0);
        t->busy = 1;
        void* q = hl_real.malloc(padded(size));
        if (q)
            record_alloc(t, q, size, fn);
        t->busy = 0;
        return q;
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
    if (!HOOK_READY() || t->busy) {
        if (atomic_load(&hl_real_ready) != 2)
            return NULL;
        if (atomic_load(&hl_phase) == HL_ON && t->busy) {
            record_internal_free(p);
            void* q = hl_real.realloc(p, size);
            if (q)
                record_internal_alloc(q, size);
            return q;
        }
        return hl_real.realloc(p, size);
    }
    t->busy = 1;
    hl_block_t old;
    int verdict = record_realloc_begin(t, p, &old);
    void* q;
    if (verdict == 2) {
        t->busy = 0;
        errno = EINVAL;
        return NULL;
    }
    if (verdict != 0) {
        q = hl_real.realloc(p, size);
        if (q && verdict == 1)
            record_alloc(t, q, size, fn);
        t->busy = 0;
        return q;
    }
    if (size == 0) {
        // The allocator decides what realloc(p, 0) means (glibc frees); ask it unpadded.
        q = hl_real.realloc(p, 0);
        record_realloc_done(t, &old, NULL, 0, fn);
        if (q)
            record_alloc_guarded(t, q, 0, fn, 0);
    } else {
        q = hl_real.realloc(p, padded(size));
        if (!q)
            record_realloc_undo(&old);
        else
            record_realloc_done(t, &old, q, size, fn);
    }
    t->busy = 0;
    return q;
}

HL_EXPORT void* realloc(void* p, size_t size) { return realloc_impl(p, size, HL_FN_REALLOC); }

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
    t->busy = 1;
    void* p;
    switch (fn) {
    case HL_FN_ALIGNED_ALLOC:
        p = hl_real.aligned_alloc(align, padded(size));
        break;
    case HL_FN_VALLOC:
        p = hl_real.valloc(padded(size));
        break;
    case HL_FN_PVALLOC: {
        // pvalloc rounds the size up to whole pages; that rounded size is the block's size.
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        size_t rounded = size ? (size + page - 1) & ~(page - 1) : page;
        p = hl_real.pvalloc(padded(rounded));
        size = rounded;
        break;
    }
    default:
        p = hl_real.memalign(align, padded(size));
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
HL_EXPORT void* valloc(size_t size) { return hook_aligned(4096, size, HL_FN_VALLOC); }
HL_EXPORT void* pvalloc(size_t size) { return hook_aligned(4096, size, HL_FN_PVALLOC); }

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
    t->busy = 1;
    void* p = NULL;
    int rc = hl_real.posix_memalign(&p, align, padded(size));
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
    hl_thread_t* t = thread_self();
    if (HOOK_READY() && !t->busy && hl_opt.guard) {
        t->busy = 1;
        size_t n = record_usable_size(p);
        t->busy = 0;
        if (n != (size_t)-1)
            return n;
    }
    return hl_real.malloc_usable_size(p);
}

// cfree is gone from current glibc but old binaries may still call it.
HL_EXPORT void cfree(void* p) { free(p); }
