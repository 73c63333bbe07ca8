// foreign_lib.c: built into libforeign.so (BIND_NOW, full RELRO) and libforeign_lazy.so (lazy
// binding, no RELRO), the libraries the foreign_* programs call. Their executables define
// malloc, free, calloc and realloc themselves, so every call below reaches the executable's
// allocator through this library's PLT and GOT, or libc's (strdup).
//
// foreign_lib_work: 17 allocations (10 temporary, malloc + realloc, calloc, 3 list nodes,
// strdup), 12 releases; left: 100 B definitely lost (calloc), a list of 3 x 48 B (48 definite,
// 96 indirect), 19 B still reachable (strdup, kept in a static).
// foreign_lib_free: releases a block the caller allocated.
// With FOREIGN_LIB_CTOR set in the environment, its constructor (which the loader runs before
// heaplens's own) makes a block and releases it, then loses 55 B (leak_at_start).
#include <stdlib.h>
#include <string.h>

#include "common.h"

typedef struct node_s {
    struct node_s* next;
    char payload[40];
} node_t;

char* foreign_lib_kept; // still reachable at exit (a global: the store is kept)

NOINLINE static void leak_calloc(void) {
    char* p = calloc(4, 25);
    keep(p);
}

NOINLINE static void leak_list(void) {
    node_t* head = NULL;
    for (int i = 0; i < 3; i++) {
        node_t* n = malloc(sizeof *n);
        n->next = head;
        head = n;
    }
    keep(head);
}

NOINLINE static void leak_at_start(void) {
    char* p = malloc(55);
    keep(p);
}

// The first call maps the allocator's arena, which reaches the agent: every call after it is
// routed, before heaplens's own constructor has run.
__attribute__((constructor)) static void foreign_lib_start(void) {
    if (!getenv("FOREIGN_LIB_CTOR"))
        return;
    char* first = malloc(10);
    keep(first);
    free(first);
    leak_at_start();
}

NOINLINE void foreign_lib_work(void) {
    for (int i = 0; i < 10; i++) {
        char* p = malloc(100);
        keep(p);
        free(p);
    }
    char* r = malloc(16);
    r = realloc(r, 4000);
    keep(r);
    free(r);
    leak_calloc();
    leak_list();
    foreign_lib_kept = strdup("kept by libforeign");
    keep(foreign_lib_kept);
}

NOINLINE void foreign_lib_free(void* p) {
    free(p);
}

NOINLINE void* foreign_lib_alloc(size_t size) {
    return malloc(size);
}

// The Makefile builds every tests/programs/*.c into an executable too (build/programs/
// foreign_lib, an ordinary program on glibc's allocator), so this file needs a main.
int main(void) {
    foreign_lib_work();
    return 0;
}
