// SPDX-License-Identifier: MIT
// test_classify.c - memcheck's verdicts on hand-built heaps: real memory, real pointers, the
// classifier that runs in the agent at exit.
#include <stdlib.h>
#include <string.h>

#include "../../src/agent/classify.h"
#include "../../src/common/format.h"
#include "harness.h"

#define MAXB 64

typedef struct heap_s {
    uintptr_t starts[MAXB];
    size_t sizes[MAXB];
    void* mem[MAXB];
    size_t n;
    uint8_t kind[MAXB];
    size_t leader[MAXB];
} heap_t;

// Blocks are carved from one arena in address order, as the classifier requires.
static _Alignas(16) uint8_t arena[1 << 16];
static size_t arena_used;

static void* block(heap_t* h, size_t size) {
    void* p = arena + arena_used;
    arena_used += (size + 15) & ~(size_t)15;
    arena_used += 16;
    memset(p, 0, size);
    h->starts[h->n] = (uintptr_t)p;
    h->sizes[h->n] = size;
    h->mem[h->n] = p;
    h->n++;
    return p;
}

static void classify(heap_t* h, void** root_words, size_t nroot) {
    lc_range_t root = {(uintptr_t)root_words, (uintptr_t)(root_words + nroot)};
    lc_input_t in = {h->starts, h->sizes, h->n, &root, 1, NULL, 0};
    void* ws = malloc(lc_workspace_size(h->n));
    lc_classify(&in, h->kind, h->leader, ws);
    free(ws);
}

static void reset(heap_t* h) {
    memset(h, 0, sizeof *h);
    arena_used = 0;
}

TEST(start_pointer_from_root_is_reachable_and_chains) {
    heap_t h;
    reset(&h);
    void** a = block(&h, 32);
    void** b = block(&h, 32);
    void* c = block(&h, 16);
    a[0] = b;
    b[1] = c;
    void* roots[1] = {a};
    classify(&h, roots, 1);
    EXPECT_EQ_U(h.kind[0], HL_LEAK_REACHABLE);
    EXPECT_EQ_U(h.kind[1], HL_LEAK_REACHABLE);
    EXPECT_EQ_U(h.kind[2], HL_LEAK_REACHABLE);
}

TEST(unreferenced_is_definite_and_what_it_holds_is_indirect) {
    heap_t h;
    reset(&h);
    void** root = block(&h, 24);
    void** left = block(&h, 24);
    void** right = block(&h, 24);
    root[0] = left;
    root[1] = right;
    void* roots[1] = {NULL};
    classify(&h, roots, 1);
    EXPECT_EQ_U(h.kind[0], HL_LEAK_DEFINITE);
    EXPECT_EQ_U(h.kind[1], HL_LEAK_INDIRECT);
    EXPECT_EQ_U(h.kind[2], HL_LEAK_INDIRECT);
    EXPECT_EQ_U(h.leader[1], 0);
    EXPECT_EQ_U(h.leader[2], 0);
}

TEST(lost_cycle_has_one_definite_leader) {
    heap_t h;
    reset(&h);
    void** a = block(&h, 16);
    void** b = block(&h, 16);
    void** c = block(&h, 16);
    a[0] = b;
    b[0] = c;
    c[0] = a;
    void* roots[1] = {NULL};
    classify(&h, roots, 1);
    EXPECT_EQ_U(h.kind[0], HL_LEAK_DEFINITE);
    EXPECT_EQ_U(h.kind[1], HL_LEAK_INDIRECT);
    EXPECT_EQ_U(h.kind[2], HL_LEAK_INDIRECT);
}

TEST(later_clique_absorbs_earlier_leader) {
    // c (higher address) points to a, which points to b: a leads first, then c's clique
    // reaches a, so only c stays definitely lost (memcheck's result).
    heap_t h;
    reset(&h);
    void** a = block(&h, 16);
    void** b = block(&h, 16);
    void** c = block(&h, 16);
    a[0] = b;
    c[0] = a;
    void* roots[1] = {NULL};
    classify(&h, roots, 1);
    EXPECT_EQ_U(h.kind[0], HL_LEAK_INDIRECT);
    EXPECT_EQ_U(h.kind[1], HL_LEAK_INDIRECT);
    EXPECT_EQ_U(h.kind[2], HL_LEAK_DEFINITE);
}

TEST(interior_pointer_is_possible_and_spreads) {
    heap_t h;
    reset(&h);
    void** a = block(&h, 64);
    void* b = block(&h, 16);
    a[2] = b;
    void* roots[1] = {(char*)a + 40};
    classify(&h, roots, 1);
    EXPECT_EQ_U(h.kind[0], HL_LEAK_POSSIBLE);
    EXPECT_EQ_U(h.kind[1], HL_LEAK_POSSIBLE);
}

TEST(possible_upgraded_by_a_later_start_pointer) {
    heap_t h;
    reset(&h);
    void** a = block(&h, 64);
    void* b = block(&h, 16);
    a[0] = b;
    void* roots[2] = {(char*)a + 40, a};
    classify(&h, roots, 2);
    EXPECT_EQ_U(h.kind[0], HL_LEAK_REACHABLE);
    EXPECT_EQ_U(h.kind[1], HL_LEAK_REACHABLE);
}

TEST(heuristics_new_array_and_length64) {
    heap_t h;
    reset(&h);
    size_t* arr = block(&h, 8 + 4 * 12); // new[] cookie: 4 elements of 12 bytes
    arr[0] = 4;
    uint64_t* len64 = block(&h, 8 + 100);
    len64[0] = 100;
    size_t* plain = block(&h, 40); // interior pointer with no heuristic: possible
    plain[0] = 12345;
    void* roots[3] = {(char*)arr + 8, (char*)len64 + 8, (char*)plain + 8};
    classify(&h, roots, 3);
    EXPECT_EQ_U(h.kind[0], HL_LEAK_REACHABLE);
    EXPECT_EQ_U(h.kind[1], HL_LEAK_REACHABLE);
    EXPECT_EQ_U(h.kind[2], HL_LEAK_POSSIBLE);
}

TEST(heuristic_stdstring) {
    heap_t h;
    reset(&h);
    size_t cap = 15;
    size_t* rep = block(&h, 3 * 8 + cap + 1); // COW string: length, capacity, refcount, chars
    rep[0] = 5;
    rep[1] = cap;
    void* roots[1] = {(char*)rep + 24};
    classify(&h, roots, 1);
    EXPECT_EQ_U(h.kind[0], HL_LEAK_REACHABLE);
}

TEST(zero_sized_block_reached_by_its_address) {
    heap_t h;
    reset(&h);
    void* z = block(&h, 0);
    void* lost = block(&h, 0);
    (void)lost;
    void* roots[1] = {z};
    classify(&h, roots, 1);
    EXPECT_EQ_U(h.kind[0], HL_LEAK_REACHABLE);
    EXPECT_EQ_U(h.kind[1], HL_LEAK_DEFINITE);
}

int main(void) {
    RUN_TEST(start_pointer_from_root_is_reachable_and_chains);
    RUN_TEST(unreferenced_is_definite_and_what_it_holds_is_indirect);
    RUN_TEST(lost_cycle_has_one_definite_leader);
    RUN_TEST(later_clique_absorbs_earlier_leader);
    RUN_TEST(interior_pointer_is_possible_and_spreads);
    RUN_TEST(possible_upgraded_by_a_later_start_pointer);
    RUN_TEST(heuristics_new_array_and_length64);
    RUN_TEST(heuristic_stdstring);
    RUN_TEST(zero_sized_block_reached_by_its_address);
    return TEST_SUMMARY();
}
