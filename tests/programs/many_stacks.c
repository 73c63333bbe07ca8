// SPDX-License-Identifier: MIT
// many_stacks N: N allocations, each at the end of its own random walk through four mutually
// recursive functions (8-15 frames deep, fixed seed), so nearly every allocation has its own
// stack; every second block is kept to the end (a definite leak with its own stack), the others
// are freed. More call sites and leak records than the HTML page shows: the page must say what
// it cut.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "common.h"

typedef void* (*walk_fn)(uint64_t* rng, int left, size_t size);
static walk_fn walks[4];
static void* volatile sink; // keeps the calls from being folded away

static uint64_t next(uint64_t* s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

#define WALK(k)                                                                            \
    static NOINLINE void* walk##k(uint64_t* rng, int left, size_t size) {                   \
        volatile int pad = k;                                                               \
        void* p = left <= 1 ? malloc(size + (size_t)pad) : walks[next(rng) % 4](rng, left - 1, size); \
        sink = p;                                                                           \
        return p;                                                                           \
    }
WALK(0) WALK(1) WALK(2) WALK(3)
static walk_fn walks[4] = {walk0, walk1, walk2, walk3};

int main(int argc, char** argv) {
    long n = argc > 1 ? atol(argv[1]) : 3000;
    if (n < 1 || n > 200000) {
        fprintf(stderr, "usage: many_stacks N (1..200000)\n");
        return 2;
    }
    uint64_t rng = 0x2545f4914f6cdd1dull;
    for (long i = 0; i < n; i++) {
        void* p = walks[next(&rng) % 4](&rng, 8 + (int)(next(&rng) % 8), 16 + (size_t)(i % 64) * 8);
        if (i % 2)
            free(p); // every second block is never freed nor kept anywhere: a leak
    }
    sink = NULL;
    printf("many_stacks: %ld allocations\n", n);
    return 0;
}
