// SPDX-License-Identifier: MIT
// realloc_null: three blocks lost, made by realloc(NULL, 40) in lose_realloc_null,
// reallocarray(NULL, 3, 8) in lose_reallocarray_null, and reallocarray(NULL, 2, 8) grown by
// reallocarray(p, 4, 8) in lose_reallocarray_grow. memcheck names the first two malloc (its
// realloc of NULL calls its malloc; glibc's reallocarray calls realloc) and the third realloc.
// calls: realloc 1, reallocarray 3; 4 allocations, 1 free.
#define _GNU_SOURCE
#include "common.h"

static void* volatile nothing; // volatile: gcc would make realloc(NULL, n) a malloc(n)

NOINLINE static void lose_realloc_null(void) {
    char* p = realloc(nothing, 40);
    keep(p);
    NO_TAIL_CALL();
}

NOINLINE static void lose_reallocarray_null(void) {
    char* p = reallocarray(nothing, 3, 8);
    keep(p);
    NO_TAIL_CALL();
}

NOINLINE static void lose_reallocarray_grow(void) {
    char* p = reallocarray(nothing, 2, 8);
    p = reallocarray(p, 4, 8);
    keep(p);
    NO_TAIL_CALL();
}

int main(void) {
    lose_realloc_null();
    lose_reallocarray_null();
    lose_reallocarray_grow();
    scrub_stack();
    return 0;
}
