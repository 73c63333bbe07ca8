// alloc_headers: blocks large enough to carry the agent's header (and, run with
// HEAPLENS_HEADER_MIN=0, every block), through every path that must find it again: free and
// realloc (grow, shrink, to 0) by the allocating thread and by another one, calloc's zeroes,
// malloc_usable_size, 16-byte alignment, and a forked child that is not traced (--no-follow)
// releasing its parent's blocks untraced. Leaks: 5000 B in leak_big, 300 B in leak_small.
// Prints "alloc_headers ok" when every check held; exits 1 naming the first that did not.
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "common.h"

static void require(int ok, const char* what) {
    if (!ok) {
        say("alloc_headers FAILED: ");
        say(what);
        say("\n");
        exit(1);
    }
}

static int filled(const unsigned char* p, size_t n, unsigned char v) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != v)
            return 0;
    return 1;
}

NOINLINE static void leak_big(void) {
    char* p = malloc(5000);
    p[0] = p[4999] = 1;
    keep(p);
}

NOINLINE static void leak_small(void) {
    char* p = malloc(300);
    p[0] = p[299] = 2;
    keep(p);
}

static void* free_elsewhere(void* arg) {
    free(arg);
    return NULL;
}

NOINLINE static void sizes_and_alignment(void) {
    static const size_t sizes[] = {1, 15, 16, 24, 100, 255, 256, 257, 1000, 4096, 200000};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        unsigned char* p = malloc(sizes[i]);
        require(p && ((uintptr_t)p & 15) == 0, "malloc is 16-byte aligned");
        require(malloc_usable_size(p) >= sizes[i], "malloc_usable_size covers the block");
        memset(p, 7, sizes[i]);
        free(p);
        p = calloc(sizes[i], 1);
        require(p && ((uintptr_t)p & 15) == 0 && filled(p, sizes[i], 0), "calloc is zeroed");
        free(p);
    }
}

NOINLINE static void reallocs(void) {
    unsigned char* p = malloc(1000);
    memset(p, 3, 1000);
    p = realloc(p, 100000); // grows (moves)
    require(p && filled(p, 1000, 3), "realloc grow keeps the contents");
    p = realloc(p, 600); // shrinks
    require(p && filled(p, 600, 3), "realloc shrink keeps the contents");
    p = realloc(p, 20); // below any header threshold: still the same kind of block
    require(p && filled(p, 20, 3), "realloc to 20 keeps the contents");
    p = realloc(p, 3000);
    require(p && filled(p, 20, 3), "realloc back up keeps the contents");
    free(realloc(p, 0)); // glibc frees and returns NULL; another allocator may return a block
    unsigned char* q = reallocarray(NULL, 40, 100);
    require(q != NULL, "reallocarray from NULL");
    memset(q, 4, 4000);
    q = reallocarray(q, 80, 100);
    require(q && filled(q, 4000, 4), "reallocarray grow keeps the contents");
    free(q);
}

NOINLINE static void across_threads(void) {
    for (int i = 0; i < 64; i++) {
        pthread_t th;
        char* p = malloc(512 + (size_t)i);
        memset(p, 5, 512);
        require(pthread_create(&th, NULL, free_elsewhere, p) == 0, "pthread_create");
        pthread_join(th, NULL);
    }
}

// Blocks made by the traced parent, released by an untraced child: each must reach the
// allocator as the pointer it handed out.
NOINLINE static void untraced_child(void) {
    unsigned char* big = malloc(2000);
    unsigned char* grow = malloc(700);
    memset(big, 6, 2000);
    memset(grow, 8, 700);
    pid_t pid = fork();
    require(pid >= 0, "fork");
    if (pid == 0) {
        if (malloc_usable_size(big) < 2000 || !filled(big, 2000, 6))
            _exit(3);
        grow = realloc(grow, 50000);
        if (!grow || !filled(grow, 700, 8))
            _exit(4);
        free(grow);
        free(big);
        char* fresh = malloc(4000); // the child's own, untraced
        free(fresh);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    require(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the untraced child released its blocks");
    free(grow);
    free(big);
}

int main(void) {
    // The leaks first: a stale pointer to a block freed later can then never point into them.
    leak_big();
    leak_small();
    sizes_and_alignment();
    reallocs();
    across_threads();
    untraced_child();
    say("alloc_headers ok\n");
    scrub_stack();
    return 0;
}
