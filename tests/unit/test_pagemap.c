// SPDX-License-Identifier: MIT
// test_pagemap.c - pagemap.c alone: the runs of held pages of a mapping written in a few
// places, cut to the range asked, with an unmapped hole, a page only read, and a range inside
// one page.
#define _GNU_SOURCE
#include <sys/mman.h>
#include <unistd.h>

#include "../../src/agent/pagemap.h"
#include "harness.h"

#define PAGES 64
#define MAX_RUNS 16

typedef struct runs_s {
    uintptr_t lo[MAX_RUNS], hi[MAX_RUNS];
    int n;
} runs_t;

static void note(uintptr_t lo, uintptr_t hi, void* arg) {
    runs_t* r = arg;
    if (r->n < MAX_RUNS) {
        r->lo[r->n] = lo;
        r->hi[r->n] = hi;
    }
    r->n++;
}

static hl_pagemap_t pm;
static char* base;
static uintptr_t page;

static uintptr_t at(int p) {
    return (uintptr_t)base + (uintptr_t)p * page;
}

TEST(written_pages_in_runs) {
    runs_t r = {.n = 0};
    ASSERT_TRUE(pagemap_held(&pm, at(0), at(PAGES), note, &r) == 0);
    // written: 3-4, 10, 63; page 20 only read (the zero page: present, and read as zeros);
    // pages 40-41 unmapped
    ASSERT_TRUE(r.n == 4);
    EXPECT_EQ_U(r.lo[0], at(3));
    EXPECT_EQ_U(r.hi[0], at(5));
    EXPECT_EQ_U(r.lo[1], at(10));
    EXPECT_EQ_U(r.hi[1], at(11));
    EXPECT_EQ_U(r.lo[2], at(20));
    EXPECT_EQ_U(r.hi[2], at(21));
    EXPECT_EQ_U(r.lo[3], at(63));
    EXPECT_EQ_U(r.hi[3], at(64));
}

TEST(runs_cut_to_the_range) {
    runs_t r = {.n = 0};
    // From the middle of page 4 to the middle of page 10: two runs, both cut.
    ASSERT_TRUE(pagemap_held(&pm, at(4) + 100, at(10) + 200, note, &r) == 0);
    ASSERT_TRUE(r.n == 2);
    EXPECT_EQ_U(r.lo[0], at(4) + 100);
    EXPECT_EQ_U(r.hi[0], at(5));
    EXPECT_EQ_U(r.lo[1], at(10));
    EXPECT_EQ_U(r.hi[1], at(10) + 200);
}

TEST(inside_one_page) {
    runs_t r = {.n = 0};
    ASSERT_TRUE(pagemap_held(&pm, at(3) + 8, at(3) + 16, note, &r) == 0);
    ASSERT_TRUE(r.n == 1);
    EXPECT_EQ_U(r.lo[0], at(3) + 8);
    EXPECT_EQ_U(r.hi[0], at(3) + 16);
    r.n = 0;
    ASSERT_TRUE(pagemap_held(&pm, at(30) + 8, at(30) + 16, note, &r) == 0);
    EXPECT_EQ_I(r.n, 0); // never touched
}

TEST(unmapped_and_untouched_give_nothing) {
    runs_t r = {.n = 0};
    ASSERT_TRUE(pagemap_held(&pm, at(30), at(50), note, &r) == 0);
    EXPECT_EQ_I(r.n, 0);
}

TEST(more_than_one_batch) {
    // 3000 pages (several reads of 512 entries), written every 700th page.
    size_t n = 3000;
    char* big = mmap(NULL, n * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_TRUE(big != MAP_FAILED);
    madvise(big, n * page, MADV_NOHUGEPAGE); // a huge page would make 512 pages present at once
    for (size_t p = 0; p < n; p += 700)
        big[p * page] = 1;
    runs_t r = {.n = 0};
    ASSERT_TRUE(pagemap_held(&pm, (uintptr_t)big, (uintptr_t)big + n * page, note, &r) == 0);
    ASSERT_TRUE(r.n == 5);
    for (int k = 0; k < 5; k++) {
        EXPECT_EQ_U(r.lo[k], (uintptr_t)big + (uintptr_t)k * 700 * page);
        EXPECT_EQ_U(r.hi[k], (uintptr_t)big + ((uintptr_t)k * 700 + 1) * page);
    }
    munmap(big, n * page);
}

int main(void) {
    page = (uintptr_t)sysconf(_SC_PAGESIZE);
    base = mmap(NULL, PAGES * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED || pagemap_open(&pm) != 0) {
        printf("FAIL setup: no mapping or no /proc/self/pagemap\n0 passed, 1 failed\n");
        return 1;
    }
    base[3 * page] = base[4 * page + 7] = base[10 * page] = base[63 * page + page - 1] = 1;
    volatile char seen = base[20 * page];
    (void)seen;
    munmap(base + 40 * page, 2 * page);
    RUN_TEST(written_pages_in_runs);
    RUN_TEST(runs_cut_to_the_range);
    RUN_TEST(inside_one_page);
    RUN_TEST(unmapped_and_untouched_give_nothing);
    RUN_TEST(more_than_one_batch);
    pagemap_close(&pm);
    return TEST_SUMMARY();
}
