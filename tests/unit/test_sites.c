// SPDX-License-Identifier: MIT
// test_sites.c - sites.c alone: the writer numbers each distinct (size, stack) pair in the order
// it first writes one, as the reader does (format.h), and names a pair's number again later.
// Checked against a plain model of that rule: many pairs (the table grows from one page through
// several doublings), pairs whose sizes differ only above 32 bits, pairs too wide for a slot
// (sizes of 512 GiB and more, stack ids past 2^25) and what happens when those run out of room.
#include <stdlib.h>
#include <string.h>

#include "../../src/agent/sites.h"
#include "harness.h"

// The model: every pair noted, in order; a pair's number is its first index + 1.
typedef struct pair_s {
    uint64_t size;
    uint32_t stack;
} pair_t;

static pair_t* model;
static uint32_t nmodel;
static uint32_t* model_slot; // open addressing over model indices + 1
static uint32_t model_mask;

static uint32_t model_hash(uint64_t size, uint32_t stack) {
    uint64_t h = (size + 0x9E3779B97F4A7C15ull) * 0xff51afd7ed558ccdull ^ stack * 0xc4ceb9fe1a85ec53ull;
    return (uint32_t)(h ^ h >> 29);
}

static void model_reset(uint32_t cap) {
    free(model);
    free(model_slot);
    model = malloc(cap * sizeof *model);
    model_mask = 4 * cap - 1; // cap is a power of two
    model_slot = calloc(4 * (size_t)cap, sizeof *model_slot);
    nmodel = 0;
}

// The pair's number by the rule, noting it if new.
static uint32_t model_note(uint64_t size, uint32_t stack) {
    uint32_t i = model_hash(size, stack) & model_mask;
    for (; model_slot[i]; i = (i + 1) & model_mask) {
        const pair_t* p = &model[model_slot[i] - 1];
        if (p->size == size && p->stack == stack)
            return model_slot[i];
    }
    model[nmodel++] = (pair_t){size, stack};
    return model_slot[i] = nmodel;
}

static uint64_t state = 0x2545F4914F6CDD1Dull;
static uint64_t next_random(void) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

// Every pair the model holds, named by sites_number as the model numbers it.
static int all_named(void) {
    for (uint32_t k = 0; k < nmodel; k++)
        if (sites_number(model[k].size, model[k].stack) != k + 1)
            return 0;
    return 1;
}

// 400,000 notes of 150,000 or so distinct pairs: most stacks with one size (a stack's first
// site), some with many, sizes small and large; checked along the way and at the end.
TEST(numbers_every_pair_as_the_reader_does) {
    sites_reset();
    model_reset(1u << 19);
    int ok = 1;
    for (int n = 0; n < 400000 && ok; n++) {
        uint64_t r = next_random();
        uint32_t stack = 1 + (uint32_t)(r % 60000);
        uint64_t size;
        switch ((r >> 32) % 4) {
        case 0: // the stack's one size
            size = 16 + stack % 100;
            break;
        case 1: // a few sizes per stack
            size = 8 * (1 + (r >> 40) % 6);
            break;
        case 2: // any size
            size = (r >> 36) % 100000;
            break;
        default: // large, some above 4 GiB
            size = ((uint64_t)1 << 32) + (r >> 40);
            break;
        }
        model_note(size, stack);
        sites_note(size, stack);
        if (n % 50000 == 0 || n == 399999)
            ok = all_named();
    }
    EXPECT_TRUE(ok);
    EXPECT_TRUE(nmodel > 100000);
}

// Sizes equal in their low 32 bits, or in all bits a slot keeps, are still different sites.
TEST(sizes_that_differ_above_32_bits) {
    sites_reset();
    model_reset(64);
    const uint64_t low = 4096;
    const uint64_t sizes[] = {low, low + ((uint64_t)1 << 32), low + ((uint64_t)1 << 38),
                              low + ((uint64_t)1 << 39), low + ((uint64_t)1 << 47), low};
    for (int s = 0; s < 2; s++)
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
            model_note(sizes[k], 7 + (uint32_t)s);
            sites_note(sizes[k], 7 + (uint32_t)s);
        }
    EXPECT_EQ_U(nmodel, 10);
    EXPECT_TRUE(all_named());
    EXPECT_EQ_U(sites_number(low + ((uint64_t)1 << 33), 7), 0); // never noted
}

// Stack ids beyond what a slot keeps (2^25 and above) and the largest sizes.
TEST(wide_pairs_are_numbered_in_turn) {
    sites_reset();
    model_reset(64);
    for (int round = 0; round < 2; round++)
        for (uint32_t k = 0; k < 8; k++) {
            uint32_t stack = (1u << 25) + k * 1000003u;
            model_note(100 + k, stack);
            sites_note(100 + k, stack);
            model_note(UINT64_MAX - k, 3);
            sites_note(UINT64_MAX - k, 3);
            model_note(100 + k, 3); // the same size with a narrow stack: a slot's
            sites_note(100 + k, 3);
        }
    EXPECT_EQ_U(nmodel, 24);
    EXPECT_TRUE(all_named());
}

// Past the room for wide pairs, numbering stops: every number is 0 from then on (the writer
// writes FREEs in full), and a new trace numbers from 1 again.
TEST(numbering_stops_when_wide_pairs_run_out_of_room) {
    sites_reset();
    model_reset(64);
    sites_note(48, 5);
    EXPECT_EQ_U(sites_number(48, 5), 1);
    for (uint32_t k = 0; k < 40; k++)
        sites_note((uint64_t)1 << 40, (1u << 26) + k);
    EXPECT_EQ_U(sites_number(48, 5), 0);
    EXPECT_EQ_U(sites_number((uint64_t)1 << 40, 1u << 26), 0);
    sites_reset();
    sites_note(64, 9);
    EXPECT_EQ_U(sites_number(64, 9), 1);
    EXPECT_EQ_U(sites_number(48, 5), 0);
}

// The table stays within a 16th of the program's RSS, or 4 MiB: 300,000 stacks with two sizes
// each need more (a table of 2^19 slots, 6 MiB), and with no RSS noted numbering stops, every
// pair unnumbered from then on (releases written in full). With 1 GiB noted, all are numbered.
// Runs first: the RSS noted only grows.
TEST(numbering_stops_where_the_table_would_outgrow_its_share) {
    sites_reset();
    const uint32_t stacks = 300000;
    for (uint32_t k = 1; k <= stacks; k++) {
        sites_note(16, k); // the stack's first site, kept by stack id
        sites_note(32, k); // its second, in the table
    }
    EXPECT_EQ_U(sites_number(16, 1), 0);
    EXPECT_EQ_U(sites_number(32, 1), 0);
    EXPECT_EQ_U(sites_number(32, stacks), 0);
    sites_reset();
    sites_note_rss((uint64_t)1 << 30);
    for (uint32_t k = 1; k <= stacks; k++) {
        sites_note(16, k);
        sites_note(32, k);
    }
    EXPECT_EQ_U(sites_number(16, 1), 1);
    EXPECT_EQ_U(sites_number(32, 1), 2);
    EXPECT_EQ_U(sites_number(32, stacks), 2 * stacks);
}

int main(void) {
    RUN_TEST(numbering_stops_where_the_table_would_outgrow_its_share);
    RUN_TEST(numbers_every_pair_as_the_reader_does);
    RUN_TEST(sizes_that_differ_above_32_bits);
    RUN_TEST(wide_pairs_are_numbered_in_turn);
    RUN_TEST(numbering_stops_when_wide_pairs_run_out_of_room);
    return TEST_SUMMARY();
}
