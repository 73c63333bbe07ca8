// SPDX-License-Identifier: MIT
// test_epoch.c - block epochs in the live table (epoch.c with live*.c, no preloading): each
// level keeps a block's epoch, a rebase relabels the blocks older than the floor and leaves the
// rest alone, marks expire at the floor, the 32-bit epoch wraps, ignored blocks stay so.
#include <stdlib.h>

#include "../../src/agent/epoch.h"
#include "../../src/agent/live.h"
#include "harness.h"

typedef struct seen_s {
    uintptr_t addr[16];
    uint32_t epoch[16];
    uint8_t ignored[16];
    int n;
} seen_t;

static void note(const hl_block_t* b, void* arg) {
    seen_t* s = arg;
    if (s->n < 16) {
        s->addr[s->n] = b->addr;
        s->epoch[s->n] = b->epoch;
        s->ignored[s->n] = b->ignored;
        s->n++;
    }
}

static int epoch_of(uintptr_t addr, uint32_t* e, int* ignored) {
    seen_t s = {.n = 0};
    live_for_each(note, &s);
    for (int i = 0; i < s.n; i++)
        if (s.addr[i] == addr) {
            *e = s.epoch[i];
            if (ignored)
                *ignored = s.ignored[i];
            return 0;
        }
    return -1;
}

// Blocks of the three levels: the direct map (small), a header block (its record before it,
// in real memory), the second level (a second block in the same 32-byte granule).
static _Alignas(64) char heap[4096];
static uintptr_t direct_at, header_at, spill_at;

static void insert_three(uint32_t epoch) {
    live_insert(&(hl_block_t){.addr = direct_at, .size = 24, .fn = 1, .stack = 7, .epoch = epoch});
    live_insert(&(hl_block_t){.addr = header_at, .size = 300, .fn = 1, .stack = 8, .headed = 1,
                              .epoch = epoch});
    live_insert(&(hl_block_t){.addr = spill_at, .size = 8, .fn = 1, .stack = 9, .epoch = epoch});
}

static void remove_three(void) {
    hl_block_t b;
    live_remove(direct_at, &b, 0);
    live_remove(header_at, &b, 0);
    live_remove(spill_at, &b, 0);
}

TEST(math_expand_and_clamp) {
    // Within the window a label reads back exactly; beyond it, as the current epoch.
    EXPECT_EQ_U(epoch_expand_at(1000, 990), 990);
    EXPECT_EQ_U(epoch_expand_at(70000, 70000 & HL_EPOCH_MASK), 70000);
    EXPECT_EQ_U(epoch_expand_at(70000, (70000 - HL_EPOCH_WINDOW + 1) & HL_EPOCH_MASK),
                70000 - HL_EPOCH_WINDOW + 1);
    EXPECT_EQ_U(epoch_expand_at(70000, (70001) & HL_EPOCH_MASK), 70000);
    // Across the 32-bit wrap.
    EXPECT_EQ_U(epoch_expand_at(5, (uint32_t)-3 & HL_EPOCH_MASK), (uint32_t)-3);
    EXPECT_TRUE(epoch_is_since(5, (uint32_t)-3));
    EXPECT_TRUE(!epoch_is_since((uint32_t)-3, 5));
    // A clamp moves only what is older than the floor.
    EXPECT_EQ_U(epoch_clamp_at(50000, 40000, 30000 & HL_EPOCH_MASK), 40000 & HL_EPOCH_MASK);
    EXPECT_EQ_U(epoch_clamp_at(50000, 40000, 45000 & HL_EPOCH_MASK), 45000 & HL_EPOCH_MASK);
}

TEST(every_level_keeps_its_epoch) {
    insert_three(12345);
    uint32_t e = 0;
    atomic_store(&hl_epoch, 12400);
    EXPECT_TRUE(epoch_of(direct_at, &e, NULL) == 0 && e == 12345);
    EXPECT_TRUE(epoch_of(header_at, &e, NULL) == 0 && e == 12345);
    EXPECT_TRUE(epoch_of(spill_at, &e, NULL) == 0 && e == 12345);
    hl_block_t b;
    EXPECT_EQ_I(live_lookup(header_at, &b), HL_BLOCK_LIVE);
    EXPECT_EQ_U(b.size, 300); // the label beside the size does not change it
    EXPECT_EQ_U(b.epoch, 12345);
    remove_three();
}

TEST(rebase_relabels_old_blocks_only) {
    atomic_store(&hl_epoch, 0);
    uint64_t first64 = epoch_advance64();
    uint32_t first = (uint32_t)first64; // 1
    insert_three(first);
    uint32_t mark = first;
    // Far past the window: without rebases the old blocks' labels would alias recent epochs.
    uint32_t recent = 0;
    for (uint32_t i = 0; i < 3 * HL_EPOCH_WINDOW + 77; i++) {
        uint32_t e = epoch_advance();
        if (i == 3 * HL_EPOCH_WINDOW)
            recent = e;
    }
    uint32_t now = epoch_now(), e = 0;
    EXPECT_EQ_U(now, 3 * HL_EPOCH_WINDOW + 78);
    EXPECT_TRUE(!epoch_is_valid(mark));
    EXPECT_TRUE(!epoch_is_valid64(first64));
    EXPECT_TRUE(epoch_is_valid64(epoch_now64()));
    EXPECT_TRUE(epoch_is_valid(recent));
    EXPECT_TRUE(epoch_is_valid(now));
    EXPECT_TRUE(!epoch_is_valid(now + 1));
    EXPECT_TRUE(epoch_floor() > mark && epoch_floor() < recent);
    uintptr_t at[3] = {direct_at, header_at, spill_at};
    for (int k = 0; k < 3; k++) {
        EXPECT_TRUE(epoch_of(at[k], &e, NULL) == 0);
        EXPECT_TRUE(!epoch_is_since(e, recent)); // old, and not after any valid mark
        EXPECT_TRUE(e <= epoch_floor());
    }
    remove_three();
    // Blocks of recent epochs keep theirs through the next rebases.
    insert_three(recent);
    for (uint32_t i = 0; i < HL_EPOCH_REBASE; i++)
        epoch_advance();
    for (int k = 0; k < 3; k++)
        EXPECT_TRUE(epoch_of(at[k], &e, NULL) == 0 && e == recent);
    remove_three();
}

TEST(wraps_at_32_bits) {
    atomic_store(&hl_epoch, (uint32_t)-100);
    uint64_t m64 = epoch_advance64();
    uint32_t m = (uint32_t)m64;
    insert_three(m);
    for (int i = 0; i < 300; i++)
        epoch_advance();
    uint32_t e = 0;
    // The 64-bit count goes on across the wrap.
    EXPECT_EQ_U(epoch_now64(), m64 + 300);
    EXPECT_EQ_U(epoch_now64() >> 32, (m64 >> 32) + 1);
    EXPECT_TRUE(epoch_is_valid64(m64));
    EXPECT_TRUE(!epoch_is_valid64(epoch_now64() + 1));
    EXPECT_TRUE(epoch_now() < 1000); // wrapped
    EXPECT_TRUE(epoch_is_valid(m));
    EXPECT_TRUE(epoch_of(direct_at, &e, NULL) == 0 && e == m);
    EXPECT_TRUE(epoch_of(header_at, &e, NULL) == 0 && e == m);
    EXPECT_TRUE(epoch_is_since(epoch_now(), m));
    remove_three();
}

TEST(ignored_blocks) {
    insert_three(epoch_now());
    int ig = -1;
    uint32_t e;
    uintptr_t at[3] = {direct_at, header_at, spill_at};
    for (int k = 0; k < 3; k++) {
        EXPECT_EQ_I(live_set_ignored(at[k]), 0);
        EXPECT_TRUE(epoch_of(at[k], &e, &ig) == 0 && ig == 1);
    }
    EXPECT_EQ_I(live_set_ignored(direct_at + 4096), -1);
    hl_block_t b;
    EXPECT_EQ_I(live_lookup(header_at, &b), HL_BLOCK_LIVE);
    EXPECT_EQ_U(b.size, 300);
    remove_three();
    EXPECT_EQ_I(live_set_ignored(direct_at), -1); // released
}

int main(void) {
    live_init();
    direct_at = (uintptr_t)heap + 64;
    header_at = (uintptr_t)heap + 1024; // its header is the 16 bytes before it
    spill_at = direct_at + 16;          // in direct_at's granule
    if (!live_header_room(header_at)) {
        printf("FAIL setup: no marks for header blocks\n0 passed, 1 failed\n");
        return 1;
    }
    RUN_TEST(math_expand_and_clamp);
    RUN_TEST(every_level_keeps_its_epoch);
    RUN_TEST(rebase_relabels_old_blocks_only);
    RUN_TEST(wraps_at_32_bits);
    RUN_TEST(ignored_blocks);
    return TEST_SUMMARY();
}
