// SPDX-License-Identifier: MIT
// inlined_leak: main calls lose_outer, into which make_inner and make_block are inlined; the
// 10-byte block it allocates is lost. Three addresses (malloc's, lose_outer's, main's), five
// functions: memcheck's --num-callers counts the addresses, and shows each one's inlined
// functions beside it.
#include "common.h"

static inline __attribute__((always_inline)) char* make_block(void) {
    char* p = malloc(10);
    if (p)
        p[0] = 1;
    return p;
}

static inline __attribute__((always_inline)) char* make_inner(void) {
    char* p = make_block();
    NO_TAIL_CALL();
    return p;
}

NOINLINE static void lose_outer(void) {
    char* p = make_inner();
    keep(p);
    NO_TAIL_CALL();
}

int main(void) {
    lose_outer();
    scrub_stack();
    return 0;
}
