// SPDX-License-Identifier: MIT
// churn_mix.c - benchmark workload: a more realistic allocation mix. 16 noinline functions
// call one another; a call path is a sequence of 15-25 choices among those 16, so paths repeat
// function by function but differ as wholes. 8000 fixed paths (so ~8000 distinct stacks)
// are visited with a skewed (hot/cold) distribution; at the end of each path 1-4 blocks of
// 8 B-4 KiB are made with malloc, calloc or realloc and parked in a 32K-slot pool, which frees
// whatever the slot held: lifetimes vary from immediate to the whole run. At exit 1/64 of the
// pool is dropped without free (~500 definite leaks for the leak checkers to report).
// Usage: churn_mix [ALLOCATIONS] (default 1,200,000). One thread.
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NFUNCS 16
#define NPATHS 8000
#define MINLEN 15
#define MAXLEN 25
#define POOL 32768

static unsigned char paths[NPATHS][MAXLEN];
static unsigned char lens[NPATHS];
static void* pool[POOL];
static uint64_t rng = 0x9E3779B97F4A7C15ull;

static inline uint64_t next_rand(void) { // xorshift64*
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545F4914F6CDD1Dull;
}

static __attribute__((noinline)) uint64_t leaf(int path, int count) {
    uint64_t sum = 0;
    for (int i = 0; i < count; i++) {
        uint64_t r = next_rand();
        size_t sz = (r & 3) == 0 ? 256 + (r >> 8) % 3840 : 8 + (r >> 8) % 120;
        unsigned slot = (unsigned)(r >> 32) % POOL;
        unsigned char* p;
        switch ((path + i) % 8) {
        case 0:
            p = calloc(1, sz);
            break;
        case 1: // grow the block already in the slot, if any
            p = realloc(pool[slot], sz);
            pool[slot] = NULL;
            break;
        default:
            p = malloc(sz);
            break;
        }
        if (!p)
            abort();
        p[0] = (unsigned char)path;
        sum += p[0];
        free(pool[slot]);
        pool[slot] = p;
    }
    return sum;
}

typedef uint64_t (*mix_fn)(int path, int level, int count);
static mix_fn mix[NFUNCS];

// The "+ pad" after the call keeps the frame (no sibling call).
#define MIX(k)                                                                           \
    static __attribute__((noinline)) uint64_t mix##k(int path, int level, int count) {   \
        volatile int pad = k;                                                            \
        uint64_t r = level + 1 >= lens[path] ? leaf(path, count)                         \
                                             : mix[paths[path][level + 1]](path, level + 1, \
                                                                           count);      \
        return r + (uint64_t)pad;                                                        \
    }
MIX(0) MIX(1) MIX(2) MIX(3) MIX(4) MIX(5) MIX(6) MIX(7)
MIX(8) MIX(9) MIX(10) MIX(11) MIX(12) MIX(13) MIX(14) MIX(15)
static mix_fn mix[NFUNCS] = {mix0, mix1, mix2,  mix3,  mix4,  mix5,  mix6,  mix7,
                             mix8, mix9, mix10, mix11, mix12, mix13, mix14, mix15};

int main(int argc, char** argv) {
    long total = argc > 1 ? atol(argv[1]) : 1200000;
    if (total < 1) {
        fprintf(stderr, "usage: churn_mix [ALLOCATIONS]\n");
        return 2;
    }
    for (int p = 0; p < NPATHS; p++) {
        lens[p] = (unsigned char)(MINLEN + next_rand() % (MAXLEN - MINLEN + 1));
        for (int l = 0; l < MAXLEN; l++)
            paths[p][l] = (unsigned char)(next_rand() % NFUNCS);
    }
    uint64_t sum = 0;
    long done = 0;
    while (done < total) {
        uint64_t r = next_rand();
        // Skewed: half the visits go to the hottest 1/16 of the paths.
        int path = (r & 1) ? (int)((r >> 1) % (NPATHS / 16)) : (int)((r >> 1) % NPATHS);
        int count = 1 + (int)((r >> 40) % 4);
        if (count > total - done)
            count = (int)(total - done);
        sum += mix[paths[path][0]](path, 0, count);
        done += count;
    }
    for (unsigned i = 0; i < POOL; i++) {
        if (i % 64) // 1/64 of the pool is leaked: the only pointer is dropped
            free(pool[i]);
        pool[i] = NULL;
    }
    printf("churn_mix: %ld allocations over %d paths, checksum %llu\n", total, NPATHS,
           (unsigned long long)sum);
    return 0;
}
