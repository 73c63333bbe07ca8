// SPDX-License-Identifier: MIT
// real.c - the allocator underneath, found with dlsym(RTLD_NEXT) so that a preloaded jemalloc,
// tcmalloc or mimalloc is the one called. dlsym itself may allocate; those calls are served
// from a static bump arena and replayed into the trace once the agent is up.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <string.h>

#include "agent.h"

hl_real_t hl_real;
_Atomic int hl_real_ready;

// ---------------------------------------------------------------------------------------------
// Bootstrap arena. Never returned to the allocator: free() of such a pointer is recorded only.
// ---------------------------------------------------------------------------------------------
#define HL_BOOTSTRAP_SIZE (256u << 10)
static _Alignas(64) uint8_t bootstrap_mem[HL_BOOTSTRAP_SIZE];
static _Atomic size_t bootstrap_used;

void* bootstrap_alloc(size_t size, size_t align) {
    if (align < 16)
        align = 16;
    for (;;) {
        size_t used = atomic_load(&bootstrap_used);
        size_t start = (used + align - 1) & ~(align - 1);
        if (start + size > HL_BOOTSTRAP_SIZE || start + size < start) {
            // Out of arena: the host must not die for it, so hand out agent pages instead.
            return os_map(size ? size : 1);
        }
        if (atomic_compare_exchange_weak(&bootstrap_used, &used, start + size))
            return bootstrap_mem + start;
    }
}

size_t bootstrap_room(const void* p) {
    return (size_t)(bootstrap_mem + atomic_load(&bootstrap_used) - (const uint8_t*)p);
}

int bootstrap_owns(const void* p) {
    return (const uint8_t*)p >= bootstrap_mem && (const uint8_t*)p < bootstrap_mem + HL_BOOTSTRAP_SIZE;
}

// ---------------------------------------------------------------------------------------------
// Resolution.
// ---------------------------------------------------------------------------------------------
#define RESOLVE(field, name) *(void**)&hl_real.field = dlsym(RTLD_NEXT, name)

void real_resolve(void) {
    int expected = 0;
    if (!atomic_compare_exchange_strong(&hl_real_ready, &expected, 1)) {
        // Another thread resolves: wait for it, unless it is this thread recursing (its nested
        // calls see busy and take the bootstrap path instead of coming here).
        while (atomic_load(&hl_real_ready) != 2)
            sched_yield();
        return;
    }
    RESOLVE(malloc, "malloc");
    RESOLVE(free, "free");
    RESOLVE(calloc, "calloc");
    RESOLVE(realloc, "realloc");
    RESOLVE(posix_memalign, "posix_memalign");
    RESOLVE(aligned_alloc, "aligned_alloc");
    RESOLVE(memalign, "memalign");
    RESOLVE(valloc, "valloc");
    RESOLVE(pvalloc, "pvalloc");
    RESOLVE(malloc_usable_size, "malloc_usable_size");
    RESOLVE(mmap, "mmap");
    RESOLVE(mmap64, "mmap64");
    RESOLVE(munmap, "munmap");
    RESOLVE(mremap, "mremap");
    RESOLVE(dlopen, "dlopen");
    RESOLVE(dlclose, "dlclose");
    RESOLVE(exit_, "_exit");
    RESOLVE(Exit, "_Exit");
    RESOLVE(execve, "execve");
    RESOLVE(execv, "execv");
    RESOLVE(execvp, "execvp");
    RESOLVE(execvpe, "execvpe");
    RESOLVE(fexecve, "fexecve");
    RESOLVE(fork, "fork");
    RESOLVE(sigaction, "sigaction");
    RESOLVE(signal, "signal");
    RESOLVE(libc_single_threaded, "__libc_single_threaded");
    if (!hl_real.mmap64)
        hl_real.mmap64 = hl_real.mmap;
    atomic_store(&hl_real_ready, 2);
}
