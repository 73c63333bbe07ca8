// SPDX-License-Identifier: MIT
// test_classify.c - memcheck's verdicts on hand-built heaps: real memory, real pointers, the
// classifier that runs in the agent at exit.
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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
    uint32_t leader[MAXB];
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
    lc_input_t in = {h->starts, h->sizes, h->n, &root, 1, NULL, 0, NULL, NULL};
    void* ws = malloc(lc_workspace_size(h->n));
    lc_classify(&in, h->kind, h->leader, ws);
    free(ws);
}

// A held-runs answer for lc_input_t.held: [lo, hi) holds one run, [run_lo, run_hi), or the
// answer fails (fails = 1) after giving it.
typedef struct held_s {
    uintptr_t run_lo, run_hi;
    int fails, calls;
} held_t;

static int held_one_run(void* arg, uintptr_t lo, uintptr_t hi,
                        void (*fn)(uintptr_t, uintptr_t, void*), void* fn_arg) {
    held_t* h = arg;
    h->calls++;
    uintptr_t a = h->run_lo > lo ? h->run_lo : lo, z = h->run_hi < hi ? h->run_hi : hi;
    if (a < z)
        fn(a, z, fn_arg);
    return h->fails ? -1 : 0;
}

static void classify_held(heap_t* h, void** root_words, size_t nroot, held_t* held) {
    lc_range_t root = {(uintptr_t)root_words, (uintptr_t)(root_words + nroot)};
    lc_input_t in = {h->starts, h->sizes, h->n, &root, 1, NULL, 0, held_one_run, held};
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

// Blocks placed at chosen offsets of one mapping, in address order, far apart: the words
// between them fall in the blocks' span but in granules (64 KiB) that hold no block.
typedef struct spread_s {
    uint8_t* base; // 64 KiB-aligned
    void* map;
    size_t map_len;
} spread_t;

static int spread_make(spread_t* s, size_t len) {
    s->map_len = len + (64u << 10);
    s->map = mmap(NULL, s->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (s->map == MAP_FAILED)
        return -1;
    s->base = (uint8_t*)(((uintptr_t)s->map + (64u << 10) - 1) & ~(uintptr_t)((64u << 10) - 1));
    return 0;
}

// Each block's verdict, block 0 first.
#define EXPECT_KINDS(h, ...)                                                                       \
    do {                                                                                           \
        const unsigned want_[] = {__VA_ARGS__};                                                    \
        for (size_t k_ = 0; k_ < sizeof want_ / sizeof want_[0]; k_++)                             \
            EXPECT_EQ_U((h).kind[k_], want_[k_]);                                                  \
    } while (0)

// An empty heap over a new mapping of len bytes.
static int spread_heap(heap_t* h, spread_t* s, size_t len) {
    reset(h);
    return spread_make(s, len);
}

static void spread_free(spread_t* s) {
    munmap(s->map, s->map_len);
}

static void* spread_block(heap_t* h, spread_t* s, size_t offset, size_t size) {
    void* p = s->base + offset;
    h->starts[h->n] = (uintptr_t)p;
    h->sizes[h->n] = size;
    h->mem[h->n] = p;
    h->n++;
    return p;
}

TEST(far_apart_blocks_and_pointers_between_them) {
    heap_t h;
    spread_t s;
    ASSERT_TRUE(spread_heap(&h, &s, 8u << 20) == 0);
    void** b0 = spread_block(&h, &s, 0, 64);
    uint8_t* b1 = spread_block(&h, &s, 1u << 20, 200u << 10); // spans four granules
    void** b2 = spread_block(&h, &s, (3u << 20) + 96, 64);
    void** b3 = spread_block(&h, &s, 5u << 20, 64);
    void** b4 = spread_block(&h, &s, (5u << 20) + (64u << 10) + 32, 64);
    spread_block(&h, &s, 7u << 20, 8); // nothing points at it
    *(void**)(b1 + (160u << 10)) = b2; // from the fourth granule of a possibly lost block
    b3[0] = b4;
    b0[0] = s.base + (2u << 20); // into the gap: no block there
    void* roots[3] = {b1 + (150u << 10), s.base + (6u << 20), b0};
    classify(&h, roots, 3);
    EXPECT_EQ_U(h.kind[0], HL_LEAK_REACHABLE);
    EXPECT_EQ_U(h.kind[1], HL_LEAK_POSSIBLE);
    EXPECT_EQ_U(h.kind[2], HL_LEAK_POSSIBLE);
    EXPECT_EQ_U(h.kind[3], HL_LEAK_DEFINITE);
    EXPECT_EQ_U(h.kind[4], HL_LEAK_INDIRECT);
    EXPECT_EQ_U(h.leader[4], 3);
    EXPECT_EQ_U(h.kind[5], HL_LEAK_DEFINITE);
    spread_free(&s);
}

// A large block is read only where its pages hold anything (lc_input_t.held): a pointer
// outside the runs it is given is not seen; when the answer fails, the whole block is read.
#define BIG (2 * LC_SPARSE_MIN)
#define BIG_AT (1u << 20)

// Block 0 (64 B, at the mapping's start), blocks 1 and 2 (32 B) and the large block 3 at BIG_AT,
// whose held run points at block 1 and whose hole at block 2; block 0 points at block 3.
static int sparse_heap(heap_t* h, spread_t* s, held_t* held, int fails) {
    reset(h);
    if (spread_make(s, BIG_AT + BIG) != 0)
        return -1;
    void** first = spread_block(h, s, 0, 64);
    void** via_run = spread_block(h, s, 64, 32);
    void** via_hole = spread_block(h, s, 128, 32);
    uint8_t* big = spread_block(h, s, BIG_AT, BIG);
    *held = (held_t){(uintptr_t)big + 4096, (uintptr_t)big + 8192, fails, 0};
    ((void**)(big + 4096))[3] = via_run;
    ((void**)(big + 3 * 4096))[0] = via_hole;
    first[0] = big;
    return 0;
}

// Marking from the roots (block 0 a root's) and in a clique (no root: block 0 leads it, the
// large block lost through it): what the run points at is reached, what the hole does is not,
// unless the answer failed.
TEST(large_block_read_only_where_held) {
    for (int rooted = 0; rooted < 2; rooted++) {
        for (int fails = 0; fails < 2; fails++) {
            heap_t h;
            spread_t s;
            held_t held;
            ASSERT_TRUE(sparse_heap(&h, &s, &held, fails) == 0);
            void* roots[1] = {rooted ? h.mem[0] : NULL};
            classify_held(&h, roots, 1, &held);
            unsigned reached = rooted ? HL_LEAK_REACHABLE : HL_LEAK_INDIRECT;
            EXPECT_EQ_I(held.calls, 1); // the small blocks are read without asking
            EXPECT_EQ_U(h.kind[0], rooted ? HL_LEAK_REACHABLE : HL_LEAK_DEFINITE);
            EXPECT_EQ_U(h.kind[3], reached);
            EXPECT_EQ_U(h.kind[1], reached);
            EXPECT_EQ_U(h.kind[2], fails ? reached : HL_LEAK_DEFINITE);
            spread_free(&s);
        }
    }
}

// A block over many granules (a few blocks, one of 6 MiB: the index takes granules of 1 MiB):
// a word anywhere in it finds it.
TEST(huge_block_over_many_granules) {
    heap_t h;
    spread_t s;
    ASSERT_TRUE(spread_heap(&h, &s, 8u << 20) == 0);
    void** b0 = spread_block(&h, &s, 0, 64);
    uint8_t* big = spread_block(&h, &s, 1u << 20, 6u << 20);
    void** tail = spread_block(&h, &s, (7u << 20) + 64, 64);
    void** lost = spread_block(&h, &s, (7u << 20) + 4096, 64);
    *(void**)(big + (5u << 20)) = tail;
    lost[0] = b0;
    void* roots[1] = {big + (3u << 20)};
    classify(&h, roots, 1);
    // Block 0: only the lost block points at it.
    EXPECT_KINDS(h, HL_LEAK_INDIRECT, HL_LEAK_POSSIBLE, HL_LEAK_POSSIBLE, HL_LEAK_DEFINITE);
    EXPECT_EQ_U(h.leader[0], 3);
    spread_free(&s);
}

// Sixty blocks of 16 bytes, 32 apart, in one page (the granule the index starts from): each
// word is searched for among the granule's own blocks. A root points at the start of every
// third, into every third but one, and at the gap after the rest.
TEST(many_blocks_in_one_granule) {
    heap_t h;
    spread_t s;
    ASSERT_TRUE(spread_heap(&h, &s, 4096) == 0);
    void* roots[60];
    for (int i = 0; i < 60; i++) {
        uint8_t* b = spread_block(&h, &s, (size_t)i * 32, 16);
        roots[i] = i % 3 == 0 ? b : i % 3 == 1 ? b + 8 : b + 16;
    }
    classify(&h, roots, 60);
    for (int i = 0; i < 60; i++)
        EXPECT_EQ_U(h.kind[i], i % 3 == 0   ? HL_LEAK_REACHABLE
                               : i % 3 == 1 ? HL_LEAK_POSSIBLE
                                            : HL_LEAK_DEFINITE);
    spread_free(&s);
}

// A block that starts in one page and ends in the next is among the second page's blocks too:
// a word into its tail finds it, and one into the second page before it ends finds no other.
TEST(block_reaching_into_the_next_granule) {
    heap_t h;
    spread_t s;
    ASSERT_TRUE(spread_heap(&h, &s, 3 * 4096) == 0);
    spread_block(&h, &s, 64, 32);
    uint8_t* spans = spread_block(&h, &s, 4096 - 64, 256);
    void** next = spread_block(&h, &s, 4096 + 512, 32);
    spread_block(&h, &s, 4096 + 1024, 32); // pointed at only through the gap before it
    void* roots[3] = {spans + 128, next, s.base + 4096 + 1000};
    classify(&h, roots, 3);
    EXPECT_KINDS(h, HL_LEAK_DEFINITE, HL_LEAK_POSSIBLE, HL_LEAK_REACHABLE, HL_LEAK_DEFINITE);
    spread_free(&s);
}

// Two blocks over more granules than the table holds even at its largest granule (64 slots,
// at most 32 granules of 1 MiB, for 40 MiB): the classifier goes without the index, with the
// same verdicts.
TEST(blocks_beyond_the_index_go_without_it) {
    heap_t h;
    spread_t s;
    ASSERT_TRUE(spread_heap(&h, &s, 48u << 20) == 0);
    uint8_t* big = spread_block(&h, &s, 0, 40u << 20);
    void** after = spread_block(&h, &s, (44u << 20) + 32, 64);
    after[0] = big + (39u << 20); // a possibly lost block's interior pointer keeps it possible
    void* roots[2] = {after, s.base + (42u << 20)};
    classify(&h, roots, 2);
    EXPECT_EQ_U(h.kind[0], HL_LEAK_POSSIBLE);
    EXPECT_EQ_U(h.kind[1], HL_LEAK_REACHABLE);
    spread_free(&s);
}

// Random heaps against memcheck's definitions, worked out here the slow way: a block is
// reachable when a chain of start pointers leads to it from a root, possibly lost when a chain
// of any pointers does and no chain of start pointers; an unreached block is definitely lost or
// indirectly lost, and an indirectly lost one's leader (followed through leaders a later clique
// absorbed) is definitely lost and reaches it through unreached blocks; one that no unreached
// block points at is definitely lost. Interior pointers stay clear of the offsets memcheck's
// heuristics take for starts (8 and 24: new[]'s count, a length prefix, a COW string).
static uint64_t heap_seed = 0x2545F4914F6CDD1Dull;
static unsigned heap_random(unsigned below) {
    heap_seed ^= heap_seed << 13;
    heap_seed ^= heap_seed >> 7;
    heap_seed ^= heap_seed << 17;
    return (unsigned)(heap_seed % below);
}

// The block holding address v (-1: none), and whether v is its start.
static int holder(const heap_t* h, uintptr_t v, int* at_start) {
    for (size_t b = 0; b < h->n; b++)
        if (v >= h->starts[b] && v < h->starts[b] + h->sizes[b]) {
            *at_start = v == h->starts[b];
            return (int)b;
        }
    return -1;
}

// Grows the set `in` along pointers out of its blocks (start pointers only, with starts_only)
// to blocks outside `barred` (NULL: none barred), until it holds still.
static void grow_set(const heap_t* h, uint8_t* in, const uint8_t* barred, int starts_only) {
    for (int grew = 1; grew;) {
        grew = 0;
        for (size_t a = 0; a < h->n; a++)
            for (size_t w = 0; in[a] && w < h->sizes[a] / sizeof(void*); w++) {
                int at_start, b = holder(h, ((const uintptr_t*)h->mem[a])[w], &at_start);
                if (b >= 0 && !in[b] && !(barred && barred[b]) && (at_start || !starts_only))
                    in[b] = grew = 1;
            }
    }
}

// The closure from the roots: along start pointers only (starts_only), or along any.
static void closure(const heap_t* h, void* const* roots, size_t nroots, int starts_only,
                    uint8_t* in) {
    memset(in, 0, MAXB);
    for (size_t r = 0; r < nroots; r++) {
        int at_start, b = holder(h, (uintptr_t)roots[r], &at_start);
        if (b >= 0 && (at_start || !starts_only))
            in[b] = 1;
    }
    grow_set(h, in, NULL, starts_only);
}

// Does a reach b through pointers among the unreached blocks (not in `any`)?
static int reaches_unreached(const heap_t* h, const uint8_t* any, size_t a, size_t b) {
    uint8_t seen[MAXB] = {0};
    seen[a] = 1;
    grow_set(h, seen, any, 0);
    return seen[b];
}

TEST(random_heaps_match_the_definitions) {
    int wrong = 0;
    for (int round = 0; round < 400 && !wrong; round++) {
        heap_t h;
        reset(&h);
        size_t n = 1 + heap_random(40);
        for (size_t b = 0; b < n; b++)
            block(&h, 32 + 8 * heap_random(5));
        for (unsigned e = heap_random((unsigned)(3 * n) + 1); e > 0; e--) {
            size_t a = heap_random((unsigned)n), b = heap_random((unsigned)n);
            size_t word = heap_random((unsigned)(h.sizes[a] / sizeof(void*)));
            size_t offset = heap_random(3) ? 0 : 16;
            ((uintptr_t*)h.mem[a])[word] = h.starts[b] + offset;
        }
        void* roots[8];
        size_t nroots = heap_random(9);
        for (size_t r = 0; r < nroots; r++)
            roots[r] = (char*)h.mem[heap_random((unsigned)n)] + (heap_random(4) ? 0 : 16);
        classify(&h, roots, nroots);

        uint8_t reach[MAXB], any[MAXB];
        closure(&h, roots, nroots, 1, reach);
        closure(&h, roots, nroots, 0, any);
        for (size_t b = 0; b < n; b++) {
            unsigned k = h.kind[b];
            if (reach[b] || any[b]) {
                wrong |= k != (reach[b] ? HL_LEAK_REACHABLE : HL_LEAK_POSSIBLE);
                continue;
            }
            int pointed_at = 0; // by another unreached block
            for (size_t a = 0; a < n && !pointed_at; a++)
                for (size_t w = 0; !any[a] && a != b && w < h.sizes[a] / sizeof(void*); w++) {
                    int at_start;
                    pointed_at |= holder(&h, ((uintptr_t*)h.mem[a])[w], &at_start) == (int)b;
                }
            if (k == HL_LEAK_INDIRECT) {
                uint32_t l = h.leader[b];
                for (int hops = 0; l < n && h.kind[l] == HL_LEAK_INDIRECT && hops < 64; hops++)
                    l = h.leader[l];
                wrong |=
                    l >= n || h.kind[l] != HL_LEAK_DEFINITE || !reaches_unreached(&h, any, l, b);
            } else {
                wrong |= k != HL_LEAK_DEFINITE;
            }
            wrong |= !pointed_at && k != HL_LEAK_DEFINITE;
        }
        if (wrong)
            fprintf(stderr, "  round %d (%zu blocks) differs from the definitions\n", round, n);
    }
    EXPECT_TRUE(!wrong);
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
    RUN_TEST(far_apart_blocks_and_pointers_between_them);
    RUN_TEST(huge_block_over_many_granules);
    RUN_TEST(large_block_read_only_where_held);
    RUN_TEST(many_blocks_in_one_granule);
    RUN_TEST(block_reaching_into_the_next_granule);
    RUN_TEST(blocks_beyond_the_index_go_without_it);
    RUN_TEST(random_heaps_match_the_definitions);
    return TEST_SUMMARY();
}
