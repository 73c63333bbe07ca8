// SPDX-License-Identifier: MIT
// churn_deep.c - benchmark workload: malloc/free pairs from 50 call sites, each reached
// through a 15-25-frame chain of distinct noinline functions, so every site has its own
// call path. Usage: churn_deep [THREADS [PAIRS_PER_THREAD]]. Every thread does the full
// PAIRS_PER_THREAD (default 1,000,000) pairs: per-thread work is constant, total work grows
// with THREADS. Build -O2 -g without frame pointers: the tracer must unwind with CFI.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NSITES 50
#define NFUNCS 25
#define BATCH 25 // pairs done at the leaf per descent

typedef uint64_t (*step_fn)(int site, int level, int depth, long n);
static step_fn steps[NFUNCS];

// Leaf: n malloc/free pairs with sizes varying by site.
static __attribute__((noinline)) uint64_t leaf(int site, long n) {
    uint64_t sum = 0;
    for (long i = 0; i < n; i++) {
        size_t sz = 16 + (size_t)((site * 37 + i * 13) % 240);
        unsigned char* p = malloc(sz);
        if (!p)
            abort();
        p[0] = (unsigned char)i;
        p[sz - 1] = (unsigned char)site;
        sum += p[0] + p[sz - 1];
        free(p);
    }
    return sum;
}

// Each step function forwards to another chosen by (site, level): the sequence of functions
// (and so of return addresses) differs per site. The "+ level" after the call keeps it from
// being a sibling call, so the frame stays on the stack.
#define STEP(k)                                                                        \
    static __attribute__((noinline)) uint64_t step##k(int site, int level, int depth,  \
                                                      long n) {                        \
        volatile int pad = k;                                                          \
        uint64_t r;                                                                    \
        if (level + 1 >= depth)                                                        \
            r = leaf(site, n);                                                         \
        else                                                                           \
            r = steps[(site * 7 + level * 3 + k) % NFUNCS](site, level + 1, depth, n); \
        return r + (uint64_t)pad;                                                      \
    }
STEP(0) STEP(1) STEP(2) STEP(3) STEP(4) STEP(5) STEP(6) STEP(7) STEP(8) STEP(9)
STEP(10) STEP(11) STEP(12) STEP(13) STEP(14) STEP(15) STEP(16) STEP(17) STEP(18) STEP(19)
STEP(20) STEP(21) STEP(22) STEP(23) STEP(24)

static step_fn steps[NFUNCS] = {step0,  step1,  step2,  step3,  step4,  step5,  step6,
                                step7,  step8,  step9,  step10, step11, step12, step13,
                                step14, step15, step16, step17, step18, step19, step20,
                                step21, step22, step23, step24};

static long pairs_per_thread = 1000000;

static void* worker(void* arg) {
    uint64_t sum = 0;
    long done = 0;
    int tid = (int)(intptr_t)arg;
    for (int round = 0; done < pairs_per_thread; round++) {
        for (int site = 0; site < NSITES && done < pairs_per_thread; site++) {
            long n = pairs_per_thread - done < BATCH ? pairs_per_thread - done : BATCH;
            int depth = 15 + (site * 3 + tid) % 11; // 15..25 frames of step functions
            sum += steps[site % NFUNCS](site, 0, depth, n);
            done += n;
        }
    }
    return (void*)(uintptr_t)sum;
}

int main(int argc, char** argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    if (argc > 2)
        pairs_per_thread = atol(argv[2]);
    if (threads < 1 || threads > 64 || pairs_per_thread < 1) {
        fprintf(stderr, "usage: churn_deep [THREADS [PAIRS_PER_THREAD]]\n");
        return 2;
    }
    uint64_t total = 0;
    if (threads == 1) {
        total = (uint64_t)(uintptr_t)worker(0);
    } else {
        pthread_t t[64];
        for (int i = 0; i < threads; i++)
            if (pthread_create(&t[i], NULL, worker, (void*)(intptr_t)i))
                return 1;
        for (int i = 0; i < threads; i++) {
            void* r;
            pthread_join(t[i], &r);
            total += (uint64_t)(uintptr_t)r;
        }
    }
    printf("churn_deep: %d thread(s) x %ld pairs, checksum %llu\n", threads, pairs_per_thread,
           (unsigned long long)total);
    return 0;
}
