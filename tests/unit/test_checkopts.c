// SPDX-License-Identifier: MIT
// test_checkopts.c - the heap checking settings' values as heaplens run and the agent both read
// them (src/common/checkopts.h): --paint's halves, --hoard's sizes, --guard-pages's rates, and
// everything else refused.
#include "../../src/common/checkopts.h"
#include "harness.h"

TEST(paint_either_half_in_either_order) {
    int a, f;
    EXPECT_EQ_I(hl_parse_paint("alloc:0xAA,free:0xDD", &a, &f), 0);
    EXPECT_EQ_I(a, 0xAA);
    EXPECT_EQ_I(f, 0xDD);
    EXPECT_EQ_I(hl_parse_paint("free:0,alloc:255", &a, &f), 0);
    EXPECT_EQ_I(a, 255);
    EXPECT_EQ_I(f, 0);
    EXPECT_EQ_I(hl_parse_paint("alloc:0Xab", &a, &f), 0);
    EXPECT_EQ_I(a, 0xab);
    EXPECT_EQ_I(f, -1);
    EXPECT_EQ_I(hl_parse_paint("free:170", &a, &f), 0);
    EXPECT_EQ_I(a, -1);
    EXPECT_EQ_I(f, 170);
}

TEST(paint_refuses_the_rest) {
    const char* bad[] = {"",           "alloc",       "alloc:",       "alloc:256",   "alloc:0x100",
                         "alloc:-1",   "alloc:1,",    ",alloc:1",     "alloc:1,alloc:2",
                         "malloc:1",   "alloc:0xg",   "alloc:1 ",     "free:1,free:1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int a, f;
        EXPECT_EQ_I(hl_parse_paint(bad[i], &a, &f), -1);
    }
}

TEST(sizes_with_suffixes) {
    uint64_t v;
    EXPECT_EQ_I(hl_parse_size("65536", &v), 0);
    EXPECT_EQ_U(v, 65536);
    EXPECT_EQ_I(hl_parse_size("512K", &v), 0);
    EXPECT_EQ_U(v, 512u << 10);
    EXPECT_EQ_I(hl_parse_size("64M", &v), 0);
    EXPECT_EQ_U(v, 64u << 20);
    EXPECT_EQ_I(hl_parse_size("2g", &v), 0);
    EXPECT_EQ_U(v, 2ull << 30);
    EXPECT_EQ_I(hl_parse_size("1024G", &v), 0);
    EXPECT_EQ_U(v, HL_HOARD_MAX);
    const char* bad[] = {"", "0", "0M", "M", "64MB", "1025G", "-1", "1.5M", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        EXPECT_EQ_I(hl_parse_size(bad[i], &v), -1);
}

TEST(rates) {
    uint32_t every;
    EXPECT_EQ_I(hl_parse_rate("1", &every), 0);
    EXPECT_EQ_U(every, 1);
    EXPECT_EQ_I(hl_parse_rate("1/1000", &every), 0);
    EXPECT_EQ_U(every, 1000);
    const char* bad[] = {"", "0", "2", "1/", "1/0", "2/3", "1/x", "1/99999999999", "0.5"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        EXPECT_EQ_I(hl_parse_rate(bad[i], &every), -1);
}

TEST(guard_sites_resolved_form) {
    const char* good[] = {"-", "ab12@10+4", "ab12@10+4,20+8;/usr/lib/x.so@0+1", "00ff@0+1,1+1"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        EXPECT_EQ_I(hl_gsites_check(good[i]), 0);
    const char* bad[] = {"", "site_bad", "ab@", "ab@10", "ab@10+", "ab@10+0", "@10+4",
                         "ab@20+4,10+4", "ab@10+8,14+4", "ab@10+4,", "ab@10+4;", "ab@1G+4",
                         "ab@10+4;cd", "ab@ffffffffffffffff+2", "ab@11111111111111111+1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        EXPECT_EQ_I(hl_gsites_check(bad[i]), -1);
    // The entries and their ranges as the agent walks them.
    const char* s = "ab12@10+4,20+8;/x@5+1";
    hl_gsites_entry_t e;
    EXPECT_EQ_I(hl_gsites_entry(&s, &e), 1);
    EXPECT_EQ_U(e.key_len, 4);
    uint64_t floor = 0, v, l;
    const char* q = e.ranges;
    EXPECT_EQ_I(hl_gsites_range(&q, e.end, &floor, &v, &l), 1);
    EXPECT_EQ_U(v, 0x10);
    EXPECT_EQ_U(l, 4);
    EXPECT_EQ_I(hl_gsites_range(&q, e.end, &floor, &v, &l), 1);
    EXPECT_EQ_U(v, 0x20);
    EXPECT_EQ_U(l, 8);
    EXPECT_EQ_I(hl_gsites_range(&q, e.end, &floor, &v, &l), 0);
    EXPECT_EQ_I(hl_gsites_entry(&s, &e), 1);
    EXPECT_EQ_I(e.key[0], '/');
    EXPECT_EQ_I(hl_gsites_entry(&s, &e), 0);
}

int main(void) {
    RUN_TEST(paint_either_half_in_either_order);
    RUN_TEST(paint_refuses_the_rest);
    RUN_TEST(sizes_with_suffixes);
    RUN_TEST(rates);
    RUN_TEST(guard_sites_resolved_form);
    return TEST_SUMMARY();
}
