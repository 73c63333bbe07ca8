// SPDX-License-Identifier: MIT
// test_varint.c - varint and zigzag round trips, and decoding that refuses bad input.
#include <stdint.h>

#include "../../src/common/varint.h"
#include "harness.h"

TEST(round_trips) {
    uint64_t values[] = {0, 1, 127, 128, 300, 16383, 16384, UINT32_MAX, (uint64_t)1 << 63,
                         UINT64_MAX};
    for (size_t i = 0; i < sizeof values / sizeof *values; i++) {
        uint8_t buf[HL_VARINT_MAX];
        uint8_t* end = varint_put(buf, values[i]);
        const uint8_t* p = buf;
        uint64_t got = 0;
        EXPECT_EQ_I(varint_get(&p, end, &got), 0);
        EXPECT_EQ_U(got, values[i]);
        EXPECT_TRUE(p == end);
    }
    uint8_t buf[HL_VARINT_MAX];
    EXPECT_EQ_U(varint_put(buf, 127) - buf, 1);
    EXPECT_EQ_U(varint_put(buf, 128) - buf, 2);
    EXPECT_EQ_U(varint_put(buf, UINT64_MAX) - buf, 10);
}

TEST(zigzag_keeps_small_deltas_small) {
    int64_t values[] = {0, -1, 1, -64, 63, INT64_MIN, INT64_MAX};
    for (size_t i = 0; i < sizeof values / sizeof *values; i++)
        EXPECT_EQ_I(zigzag_decode(zigzag_encode(values[i])), values[i]);
    EXPECT_EQ_U(zigzag_encode(-1), 1);
    EXPECT_EQ_U(zigzag_encode(1), 2);
}

TEST(truncated_input_is_refused) {
    uint8_t buf[HL_VARINT_MAX];
    uint8_t* end = varint_put(buf, 1u << 20);
    for (const uint8_t* cut = buf; cut < end; cut++) {
        const uint8_t* p = buf;
        uint64_t v;
        EXPECT_EQ_I(varint_get(&p, cut, &v), -1);
        EXPECT_TRUE(p == buf); // nothing consumed on failure
    }
}

TEST(overlong_input_is_refused) {
    uint8_t buf[11];
    for (int i = 0; i < 10; i++)
        buf[i] = 0xff;
    buf[10] = 0x01;
    const uint8_t* p = buf;
    uint64_t v;
    EXPECT_EQ_I(varint_get(&p, buf + sizeof buf, &v), -1);
    // The tenth byte may only carry one bit.
    uint8_t big[10] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02};
    p = big;
    EXPECT_EQ_I(varint_get(&p, big + 10, &v), -1);
}

int main(void) {
    RUN_TEST(round_trips);
    RUN_TEST(zigzag_keeps_small_deltas_small);
    RUN_TEST(truncated_input_is_refused);
    RUN_TEST(overlong_input_is_refused);
    return TEST_SUMMARY();
}
