// SPDX-License-Identifier: MIT
// harness.h - the unit-test harness: TEST(name) functions, EXPECT_* that keep going and print
// both values, ASSERT_* that stop the test. Each test binary ends with one "N passed, N failed".
#ifndef HL_TEST_HARNESS_H
#define HL_TEST_HARNESS_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int harness_failed_checks;
static int harness_passed, harness_failed;

#define EXPECT_TRUE(c)                                                                             \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "  %s:%d: expected %s\n", __FILE__, __LINE__, #c);                     \
            harness_failed_checks++;                                                               \
        }                                                                                          \
    } while (0)
#define EXPECT_EQ_U(a, b)                                                                          \
    do {                                                                                           \
        uint64_t va_ = (uint64_t)(a), vb_ = (uint64_t)(b);                                         \
        if (va_ != vb_) {                                                                          \
            fprintf(stderr, "  %s:%d: %s == %s: %" PRIu64 " != %" PRIu64 "\n", __FILE__, __LINE__, \
                    #a, #b, va_, vb_);                                                             \
            harness_failed_checks++;                                                               \
        }                                                                                          \
    } while (0)
#define EXPECT_EQ_I(a, b)                                                                          \
    do {                                                                                           \
        int64_t va_ = (int64_t)(a), vb_ = (int64_t)(b);                                            \
        if (va_ != vb_) {                                                                          \
            fprintf(stderr, "  %s:%d: %s == %s: %" PRId64 " != %" PRId64 "\n", __FILE__, __LINE__, \
                    #a, #b, va_, vb_);                                                             \
            harness_failed_checks++;                                                               \
        }                                                                                          \
    } while (0)
#define EXPECT_STREQ(a, b)                                                                         \
    do {                                                                                           \
        const char *sa_ = (a), *sb_ = (b);                                                         \
        if (!sa_ || !sb_ || strcmp(sa_, sb_) != 0) {                                               \
            fprintf(stderr, "  %s:%d: %s == %s: \"%s\" != \"%s\"\n", __FILE__, __LINE__, #a, #b,   \
                    sa_ ? sa_ : "(null)", sb_ ? sb_ : "(null)");                                   \
            harness_failed_checks++;                                                               \
        }                                                                                          \
    } while (0)
#define ASSERT_TRUE(c)                                                                             \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "  %s:%d: required %s\n", __FILE__, __LINE__, #c);                     \
            harness_failed_checks++;                                                               \
            return;                                                                                \
        }                                                                                          \
    } while (0)

#define TEST(name) static void name(void)

#define RUN_TEST(name)                                                                             \
    do {                                                                                           \
        int before_ = harness_failed_checks;                                                       \
        name();                                                                                    \
        if (harness_failed_checks == before_) {                                                    \
            harness_passed++;                                                                      \
            printf("PASS %s\n", #name);                                                            \
        } else {                                                                                   \
            harness_failed++;                                                                      \
            printf("FAIL %s\n", #name);                                                            \
        }                                                                                          \
    } while (0)

#define TEST_SUMMARY()                                                                             \
    (printf("%d passed, %d failed\n", harness_passed, harness_failed), harness_failed ? 1 : 0)

#endif
