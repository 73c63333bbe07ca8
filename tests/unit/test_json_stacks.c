// SPDX-License-Identifier: MIT
// test_json_stacks.c - the JSON report's stacks (json_frames.c), on a trace built byte by byte
// whose leak records have 200-frame stacks of 6,000 distinct return addresses in all: each
// record lists its frames, innermost first, exactly as report_stack gives them, while the
// table of what each address stands for grows several times in the middle of a stack.
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/analyze/report.h"
#include "../../src/common/format.h"
#include "harness.h"
#include "trace_builder.h"

#define STACKS 30
#define DEPTH 200 // frames a stack, each at an address no other stack has
#define IP_BASE 0x100000u

static char tmp_path[64];

// Stack s's node k from the outermost (k = 0) is id s * DEPTH + k + 1, at address
// IP_BASE + 16 * that id. Stack s's block of 1000 - s bytes (a distinct size: records come
// biggest first) is definitely lost.
static uint64_t ip_of(uint64_t id) {
    return IP_BASE + 16 * id;
}
static uint64_t innermost(int s) {
    return (uint64_t)s * DEPTH + DEPTH;
}

static void build(buf_t* b) {
    rec_info(b, 42);
    rec_thread(b, 1, 42);
    for (int s = 0; s < STACKS; s++)
        for (int k = 0; k < DEPTH; k++) {
            uint64_t id = (uint64_t)s * DEPTH + (uint64_t)k + 1;
            rec_stack(b, id, k ? id - 1 : 0, ip_of(id));
        }
    rec_switch(b, 1);
    rec_time(b, 100);
    for (int s = 0; s < STACKS; s++)
        rec_alloc(b, HL_FN_MALLOC, 1000 - (uint64_t)s, innermost(s));
    rec_scan(b, 200, HL_SCAN_AT_EXIT, STACKS);
    for (int s = 0; s < STACKS; s++)
        rec_verdict(b, HL_LEAK_DEFINITE, 0x10000000u + 0x1000u * (uint64_t)s, 1000 - (uint64_t)s,
                    innermost(s), HL_FN_MALLOC, 0);
    rec_end(b, 300);
}

// The JSON report of the trace, in a buffer the caller frees; NULL on failure.
static char* json_of_trace(model_t* m) {
    buf_t* raw = calloc(1, sizeof *raw);
    static uint8_t file[1 << 20];
    if (!raw)
        return NULL;
    build(raw);
    write_bytes(tmp_path, file, trace_file(file, sizeof file, raw));
    free(raw);
    if (model_load(m, tmp_path) != 0)
        return NULL;
    report_ctx_t* c = report_ctx_new(m, NULL);
    report_opts_t o = {.max_records = 25, .exit_status = 0};
    char* json = NULL;
    size_t len;
    FILE* f = open_memstream(&json, &len);
    report_json(f, c, &o);
    fclose(f);
    report_ctx_free(c);
    return json;
}

// The addresses of the frames of the record at *at ("stack": [...]), in order; moves *at past it.
static int record_addresses(const char** at, uint64_t* out, int max) {
    const char* p = strstr(*at, "\"stack\": [");
    if (!p)
        return -1;
    const char* end = strchr(p, ']');
    int n = 0;
    for (const char* a = strstr(p, "\"address\": \""); a && a < end && n < max;
         a = strstr(a + 1, "\"address\": \""))
        out[n++] = strtoull(a + strlen("\"address\": \""), NULL, 16);
    *at = end;
    return n;
}

TEST(records_list_every_frame_innermost_first) {
    model_t m;
    char* json = json_of_trace(&m);
    ASSERT_TRUE(json != NULL);
    const char* at = strstr(json, "\"leak_records\"");
    ASSERT_TRUE(at != NULL);
    for (int s = 0; s < STACKS; s++) {
        uint64_t got[DEPTH + 1];
        int n = record_addresses(&at, got, DEPTH + 1);
        EXPECT_EQ_I(n, DEPTH);
        int same = n == DEPTH;
        for (int k = 0; k < DEPTH && same; k++)
            same = got[k] == ip_of(innermost(s) - (uint64_t)k);
        EXPECT_TRUE(same);
    }
    free(json);
    model_free(&m);
}

// The same stacks through report_stack, which the text and the other reports use.
TEST(records_match_report_stack) {
    model_t m;
    char* json = json_of_trace(&m);
    ASSERT_TRUE(json != NULL);
    report_ctx_t* c = report_ctx_new(&m, NULL);
    ASSERT_TRUE(c != NULL);
    const char* at = strstr(json, "\"leak_records\"");
    for (int s = 0; s < STACKS && at; s++) {
        uint64_t got[DEPTH + 1];
        int n = record_addresses(&at, got, DEPTH + 1);
        const report_frame_t* fr;
        int want = report_stack(c, (uint32_t)innermost(s), &fr);
        EXPECT_EQ_I(n, want);
        int same = n == want;
        for (int k = 0; k < want && same; k++)
            same = got[k] == fr[k].address;
        EXPECT_TRUE(same);
    }
    report_ctx_free(c);
    free(json);
    model_free(&m);
}

int main(void) {
    snprintf(tmp_path, sizeof tmp_path, "/tmp/heaplens-test-json-stacks-%d.hl", (int)getpid());
    RUN_TEST(records_list_every_frame_innermost_first);
    RUN_TEST(records_match_report_stack);
    unlink(tmp_path);
    return TEST_SUMMARY();
}
