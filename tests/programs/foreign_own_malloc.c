// foreign_own_malloc: an executable that defines malloc, free, calloc and realloc itself (a
// free-list allocator by size class over one mmap'd arena, exported with -rdynamic), as rustc
// does with jemalloc. The loader binds every module's calls to these, ahead of heaplens's, and
// the executable's own calls to them are direct. Modes (argv[1]):
//   (none)   libforeign's work (foreign_lib.c), all of it made by the library: 17 allocations,
//            12 releases, 100 + 48 B definitely lost (+ 96 B indirectly), 19 B still reachable
//   inside   then the executable allocates itself: a block it makes is released by the
//            library, a block the library makes is released here, and a pair of its own
//   dlopen   then dlopen()s libplugin.so (plugin.c), calls it (777 B lost, 5 x 50 B made and
//            released) and closes it
//   unmap    then releases here a 64 MiB block the library made: the allocator unmaps it
// Its output: "foreign_own_malloc done"; the exit status is 0 (dlopen: 1 when the plugin fails).
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common.h"

void foreign_lib_work(void);
void foreign_lib_free(void* p);
void* foreign_lib_alloc(size_t size);

// ---------------------------------------------------------------------------------------------
// The allocator: blocks of 2^k bytes (k >= 4) after a 16-byte header, taken from a free list
// per size or else from the arena's end; a large block is a mapping of its own, unmapped when
// released. A released block is zeroed, so no stale pointer in freed memory can keep another
// block reachable.
// ---------------------------------------------------------------------------------------------
#define ARENA_BYTES ((size_t)256 << 20) // reserved at the first call, backed as it is used
#define HEADER 16                       // keeps every block 16-aligned
#define MIN_SHIFT 4
#define LARGE_SHIFT 20 // blocks above 1 MiB are mapped alone
#define MAX_SHIFT 27

typedef struct header_s {
    size_t shift;          // the block holds 2^shift bytes
    struct header_s* next; // in its free list, once released
} header_t;

static char *arena, *arena_next;
static header_t* free_lists[MAX_SHIFT + 1];
static char lock_flag; // other threads (heaplens's own, for one) allocate too

static void lock(void) {
    while (__atomic_test_and_set(&lock_flag, __ATOMIC_ACQUIRE))
        sched_yield();
}
static void unlock(void) {
    __atomic_clear(&lock_flag, __ATOMIC_RELEASE);
}

static size_t shift_of(size_t n) {
    size_t s = MIN_SHIFT;
    while (s <= MAX_SHIFT && ((size_t)1 << s) < n)
        s++;
    return s;
}

// noipa: gcc must not split or inline these into their callers here, which would hide the
// executable's own calls from a tool that replaces them (memcheck).
__attribute__((noipa)) void* malloc(size_t n) {
    size_t s = shift_of(n);
    if (s > MAX_SHIFT) {
        errno = ENOMEM;
        return NULL;
    }
    if (s > LARGE_SHIFT) {
        void* m = mmap(NULL, HEADER + ((size_t)1 << s), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) {
            errno = ENOMEM;
            return NULL;
        }
        ((header_t*)m)->shift = s;
        return (char*)m + HEADER;
    }
    lock();
    if (!arena) {
        void* a = mmap(NULL, ARENA_BYTES, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        arena_next = arena = a == MAP_FAILED ? NULL : a;
    }
    header_t* h = free_lists[s];
    if (h) {
        free_lists[s] = h->next;
    } else if (arena && arena_next + HEADER + ((size_t)1 << s) <= arena + ARENA_BYTES) {
        h = (header_t*)arena_next;
        h->shift = s;
        arena_next += HEADER + ((size_t)1 << s);
    }
    unlock();
    if (!h) {
        errno = ENOMEM;
        return NULL;
    }
    h->next = NULL;
    return (char*)h + HEADER;
}

__attribute__((noipa)) void free(void* p) {
    if (!p)
        return;
    header_t* h = (header_t*)((char*)p - HEADER);
    if (h->shift > LARGE_SHIFT) {
        munmap(h, HEADER + ((size_t)1 << h->shift));
        return;
    }
    memset(p, 0, (size_t)1 << h->shift);
    lock();
    h->next = free_lists[h->shift];
    free_lists[h->shift] = h;
    unlock();
}

__attribute__((noipa)) void* calloc(size_t n, size_t size) {
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    void* p = malloc(total);
    if (p)
        memset(p, 0, total);
    return p;
}

__attribute__((noipa)) void* realloc(void* p, size_t n) {
    if (!p)
        return malloc(n);
    if (n == 0) {
        free(p);
        return NULL;
    }
    header_t* h = (header_t*)((char*)p - HEADER);
    size_t room = (size_t)1 << h->shift;
    if (n <= room)
        return p;
    void* q = malloc(n);
    if (q) {
        memcpy(q, p, room);
        free(p);
    }
    return q;
}

// ---------------------------------------------------------------------------------------------
// The program
// ---------------------------------------------------------------------------------------------
// Blocks the executable makes and releases itself, and blocks that cross between it and the
// library: the library releases one the agent never saw made, and this releases one the
// library made.
NOINLINE static void inside(void) {
    char* mine = malloc(64);
    keep(mine);
    foreign_lib_free(mine);
    char* theirs = foreign_lib_alloc(200);
    keep(theirs);
    free(theirs);
    char* own = malloc(32);
    keep(own);
    free(own);
}

// The library makes a large block and this releases it: the agent never sees it go, and its
// memory is unmapped before the exit-time scan.
NOINLINE static void unmap_large(void) {
    char* large = foreign_lib_alloc((size_t)64 << 20);
    keep(large);
    free(large);
}

NOINLINE static int use_plugin(void) {
    static char path[4096];
    if (exe_dir(path, sizeof path - 32) != 0)
        return 1;
    strcat(path, "/libplugin.so");
    void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return 1;
    void (*leak)(void) = (void (*)(void))dlsym(h, "plugin_leak_buffer");
    int (*roundtrip)(void) = (int (*)(void))dlsym(h, "plugin_roundtrip");
    int rc = leak && roundtrip ? 0 : 1;
    if (rc == 0) {
        leak();
        rc = roundtrip() == 10 ? 0 : 1;
    }
    dlclose(h);
    return rc;
}

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "";
    int rc = 0;
    foreign_lib_work();
    if (!strcmp(mode, "inside"))
        inside();
    if (!strcmp(mode, "dlopen"))
        rc = use_plugin();
    if (!strcmp(mode, "unmap"))
        unmap_large();
    scrub_stack();
    say("foreign_own_malloc done\n");
    return rc;
}
