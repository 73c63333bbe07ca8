// SPDX-License-Identifier: MIT
// test_ring.c - the rule by which a thread's ring grows under the writer (ring.h:
// ring_may_grow), checked against what it must guarantee, for every tail and head over several
// laps of a small ring and a larger one: each event the writer has yet to take has one slot under
// either mask, and no event the producer puts before the writer has taken them lands on one of
// those slots. And the rule is not empty: a ring whose producer runs ahead of its writer by less
// than a quarter finds a place to grow within one lap of the larger ring.
#include <stdint.h>

#include "../../src/agent/ring.h"
#include "harness.h"

#define SMALL 15 // masks: rings of 16 and 64 slots stand for 1024 and 16384
#define LARGE 63
#define LAPS 4 // heads over this many laps of the larger ring

// Does growing at [t, h) keep every pending event where the writer will look for it, and out of
// the way of every later event up to a full larger ring?
static int growth_is_safe(uint64_t t, uint64_t h) {
    for (uint64_t p = t; p < h; p++) {
        if ((p & SMALL) != (p & LARGE))
            return 0;
        for (uint64_t q = h; q < t + LARGE + 1; q++)
            if ((q & LARGE) == (p & LARGE))
                return 0;
    }
    return 1;
}

TEST(allowed_growth_is_safe) {
    int allowed = 0;
    for (uint64_t h = 0; h < LAPS * (LARGE + 1); h++)
        for (uint64_t t = h >= SMALL + 1 ? h - SMALL - 1 : 0; t <= h; t++)
            if (ring_may_grow(t, h, SMALL, LARGE)) {
                allowed++;
                if (!growth_is_safe(t, h)) {
                    fprintf(stderr, "  growth allowed at tail %lu head %lu, unsafe\n",
                            (unsigned long)t, (unsigned long)h);
                    harness_failed_checks++;
                    return;
                }
            }
    EXPECT_TRUE(allowed > 0);
}

TEST(empty_ring_always_grows) {
    for (uint64_t h = 0; h < LAPS * (LARGE + 1); h++) {
        EXPECT_TRUE(ring_may_grow(h, h, SMALL, LARGE));
        EXPECT_TRUE(ring_may_grow(h + 1, h, SMALL, LARGE)); // one past (void_waiting_events)
    }
}

// A producer that asks at each quarter of the small ring (ring_quarter), the writer a quarter or
// less behind, finds a head where it may grow within one lap of the larger ring.
TEST(a_place_comes_within_a_lap) {
    uint64_t quarter = (SMALL + 1) / 4;
    for (uint64_t start = 0; start < LARGE + 1; start += quarter)
        for (uint64_t behind = 0; behind <= quarter; behind++) {
            int found = 0;
            for (uint64_t h = start + quarter; h <= start + LARGE + 1 + quarter && !found;
                 h += quarter)
                found = ring_may_grow(h - behind, h, SMALL, LARGE);
            EXPECT_TRUE(found);
        }
}

int main(void) {
    RUN_TEST(allowed_growth_is_safe);
    RUN_TEST(empty_ring_always_grows);
    RUN_TEST(a_place_comes_within_a_lap);
    return TEST_SUMMARY();
}
