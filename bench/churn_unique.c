// SPDX-License-Identifier: MIT
// churn_unique.c - benchmark workload where every stack is different: PAIRS malloc/free pairs
// (default 200,000), each made at the end of its own random walk through five mutually
// recursive functions, 15-25 frames deep. With 5 choices per level almost no two walks share
// their full path, so the tracer meets a new stack at nearly every allocation (the shape of
// compilers, parsers and tree code). The walk's random numbers come from a fixed seed: every
// run makes the same stacks. Usage: churn_unique [PAIRS]. Build -O2 -g without frame pointers.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define NFUNCS 5
#define MIN_DEPTH 15
#define SPAN_DEPTH 11 // depth is 15..25

typedef uint64_t (*walk_fn)(uint64_t* rng, int left);
static walk_fn walks[NFUNCS];

static uint64_t next(uint64_t* s) { // xorshift64: cheap and deterministic
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static __attribute__((noinline)) uint64_t leaf(uint64_t* rng) {
    size_t sz = 16 + next(rng) % 240;
    unsigned char* p = malloc(sz);
    if (!p)
        abort();
    p[0] = (unsigned char)sz;
    p[sz - 1] = 1;
    uint64_t r = p[0] + p[sz - 1];
    free(p);
    return r;
}

// Each function picks the next one at random; the "+ k" after the call keeps the frame on
// the stack (no sibling call), so the return addresses spell out the path taken.
#define WALK(k)                                                                 \
    static __attribute__((noinline)) uint64_t walk##k(uint64_t* rng, int left) { \
        volatile int pad = k;                                                    \
        uint64_t r = left <= 1 ? leaf(rng) : walks[next(rng) % NFUNCS](rng, left - 1); \
        return r + (uint64_t)pad;                                                \
    }
WALK(0) WALK(1) WALK(2) WALK(3) WALK(4)

static walk_fn walks[NFUNCS] = {walk0, walk1, walk2, walk3, walk4};

int main(int argc, char** argv) {
    long pairs = argc > 1 ? atol(argv[1]) : 200000;
    if (pairs < 1) {
        fprintf(stderr, "usage: churn_unique [PAIRS]\n");
        return 2;
    }
    uint64_t rng = 0x9e3779b97f4a7c15ull, sum = 0;
    for (long i = 0; i < pairs; i++) {
        int depth = MIN_DEPTH + (int)(next(&rng) % SPAN_DEPTH);
        sum += walks[next(&rng) % NFUNCS](&rng, depth);
    }
    printf("churn_unique: %ld pairs, checksum %llu\n", pairs, (unsigned long long)sum);
    return 0;
}
