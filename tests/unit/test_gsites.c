// SPDX-License-Identifier: MIT
// test_gsites.c - the agent's --guard-sites tables without preloading (src/agent/gsites.c): a
// resolved setting, modules appearing at a load address (by build-id or by path), stacks
// interned as the unwinder interns them, and which of them pass through a chosen function.
#include <stdint.h>
#include <string.h>

#include "../../src/agent/gsites.h"
#include "../../src/agent/stacks.h"
#include "harness.h"

static const uint8_t bid[] = {0xab, 0x12, 0xcd};

// A stack of return addresses (innermost first), interned.
static uint32_t stack_of(uintptr_t a, uintptr_t b, uintptr_t c) {
    uintptr_t ips[3] = {a, b, c};
    return stack_intern(ips, 3, NULL);
}

TEST(ranges_become_absolute_at_load) {
    // f at 0x1000-0x1040 and g at 0x2000-0x2010 in the module with build-id ab12cd; h at
    // 0x500-0x520 in /lib/x.so, a module without one.
    const char* v = "ab12cd@1000+40,2000+10;/lib/x.so@500+20";
    EXPECT_EQ_I(gsites_set(v, strlen(v)), 0);
    EXPECT_EQ_I(hl_gsites_on, 1);
    uintptr_t bias = 0x7f0000000000;
    // Before the module is loaded nothing matches: its ranges are not known yet.
    uint32_t in_f = stack_of(0x9999, bias + 0x1010, 0x8888);
    EXPECT_EQ_I(gsites_match(in_f), 0);
    gsites_module_loaded(bias, 0, bid, sizeof bid, "/usr/lib/whatever.so");
    EXPECT_EQ_I(gsites_match(in_f), 1);
    // A return address just past g's end is a call at its last byte: still g.
    EXPECT_EQ_I(gsites_match(stack_of(bias + 0x2010, 0x1, 0x2)), 1);
    EXPECT_EQ_I(gsites_match(stack_of(bias + 0x1000, 0x1, 0x2)), 0); // the call is before f
    EXPECT_EQ_I(gsites_match(stack_of(bias + 0x1041, bias + 0x3000, 0x2)), 0);
    // Loaded twice (a fork's child reads the list again): once in the table.
    gsites_module_loaded(bias, 0, bid, sizeof bid, "/usr/lib/whatever.so");
    // Another build-id: not this module's ranges.
    const uint8_t other[] = {0xab, 0x12, 0xce};
    gsites_module_loaded(0x100000, 0, other, sizeof other, "/usr/lib/other.so");
    EXPECT_EQ_I(gsites_match(stack_of(0x100000 + 0x1010, 1, 2)), 0);
    // By path.
    gsites_module_loaded(0x200000, 0, NULL, 0, "/lib/x.so");
    EXPECT_EQ_I(gsites_match(stack_of(1, 2, 0x200000 + 0x510)), 1);
    // Gone (dlclose): no longer matched.
    gsites_module_gone(bias, 0);
    EXPECT_EQ_I(gsites_match(in_f), 0);
}

TEST(malformed_settings_are_refused) {
    const char* bad[] = {"f", "ab@10+4,", "ab@20+4,10+4", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        EXPECT_EQ_I(gsites_set(bad[i], strlen(bad[i])), -1);
}

int main(void) {
    stacks_init();
    RUN_TEST(ranges_become_absolute_at_load);
    RUN_TEST(malformed_settings_are_refused);
    return TEST_SUMMARY();
}
