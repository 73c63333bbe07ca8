// SPDX-License-Identifier: MIT
// test_addr_sort.c - addr_sort.c alone: keys put in order with their sizes moved along,
// against qsort of the same pairs: random addresses, a heap's (shared top
// bits), runs already in order one after another, reversed, equal keys, every small length.
#include <stdlib.h>
#include <string.h>

#include "../../src/agent/addr_sort.h"
#include "harness.h"

typedef struct pair_s {
    uintptr_t key;
    size_t size;
} pair_t;

static int by_key(const void* a, const void* b) {
    const pair_t *x = a, *y = b;
    return x->key < y->key ? -1 : x->key > y->key;
}

static uint64_t state = 88172645463325252ull;
static uint64_t next_random(void) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

// Sorts keys (sizes: each key's own function of it, so a size left behind shows) and checks the
// result against qsort.
static int sorts_right(uintptr_t* keys, size_t n) {
    size_t* sizes = malloc((n + 1) * sizeof *sizes);
    pair_t* want = malloc((n + 1) * sizeof *want);
    void* ws = malloc(addr_sort_workspace_size());
    int ok = sizes && want && ws;
    for (size_t i = 0; ok && i < n; i++) {
        sizes[i] = (size_t)(keys[i] * 7 + 3);
        want[i] = (pair_t){keys[i], sizes[i]};
    }
    if (ok) {
        qsort(want, n, sizeof *want, by_key);
        addr_sort(keys, sizes, n, ws);
        for (size_t i = 0; ok && i < n; i++)
            ok = keys[i] == want[i].key && sizes[i] == want[i].size;
    }
    free(sizes);
    free(want);
    free(ws);
    return ok;
}

TEST(every_small_length) {
    for (size_t n = 0; n <= 80; n++) {
        uintptr_t keys[80];
        for (size_t i = 0; i < n; i++)
            keys[i] = (uintptr_t)(next_random() & 0xffff) * 16;
        EXPECT_TRUE(sorts_right(keys, n));
    }
}

// Keys made by key_at(i, n) for i in [0, n), sorted and checked.
static int sorts_made(size_t n, uintptr_t (*key_at)(size_t i, size_t n)) {
    uintptr_t* keys = malloc(n * sizeof *keys);
    if (!keys)
        return 0;
    for (size_t i = 0; i < n; i++)
        keys[i] = key_at(i, n);
    int ok = sorts_right(keys, n);
    free(keys);
    return ok;
}

static uintptr_t random_key(size_t i, size_t n) {
    (void)i, (void)n;
    return (uintptr_t)next_random();
}

// A heap's blocks: 16-byte aligned, within 64 MiB of one base, so the top digits are equal.
static uintptr_t heap_key(size_t i, size_t n) {
    (void)i, (void)n;
    return (uintptr_t)0x55d4a1c00000ull + (uintptr_t)(next_random() % (64u << 20)) / 16 * 16;
}

// What the live table gives: runs in address order one after another (headed blocks, then the
// direct map's regions, not in address order among them).
static uintptr_t runs_key(size_t i, size_t n) {
    (void)n;
    return (uintptr_t)((5 - i / 20000) << 24) + (i % 20000) * 48;
}
static uintptr_t reversed_key(size_t i, size_t n) {
    return (uintptr_t)(n - i) * 32;
}
static uintptr_t in_order_key(size_t i, size_t n) { // one pass, nothing moved
    (void)n;
    return (uintptr_t)i * 32;
}
static uintptr_t three_keys(size_t i, size_t n) {
    (void)i, (void)n;
    return 0x7f0000001000u + (uintptr_t)(next_random() % 3) * 0x100000;
}
static uintptr_t one_key(size_t i, size_t n) {
    (void)i, (void)n;
    return 42;
}

TEST(random_addresses) {
    EXPECT_TRUE(sorts_made(200000, random_key));
}

TEST(a_heap_with_shared_top_bits) {
    EXPECT_TRUE(sorts_made(300000, heap_key));
}

TEST(runs_in_order_and_reversed) {
    EXPECT_TRUE(sorts_made(100000, runs_key));
    EXPECT_TRUE(sorts_made(100000, reversed_key));
    EXPECT_TRUE(sorts_made(100000, in_order_key));
}

TEST(equal_keys) {
    EXPECT_TRUE(sorts_made(5000, three_keys));
    EXPECT_TRUE(sorts_made(5000, one_key));
}

int main(void) {
    RUN_TEST(every_small_length);
    RUN_TEST(random_addresses);
    RUN_TEST(a_heap_with_shared_top_bits);
    RUN_TEST(runs_in_order_and_reversed);
    RUN_TEST(equal_keys);
    return TEST_SUMMARY();
}
