// SPDX-License-Identifier: MIT
// test_heap_traced.c - what the reports say of a heap the agent saw only in part or not at
// all (INFO's HL_INFO_HEAP_* flags, set when the program defines its own allocator): the JSON's
// "heap_traced" and "trace_complete", and the text report's line, on traces built byte by byte.
// A trace with no heap events and the UNTRACED flag must not pass for a program that allocated
// nothing.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/analyze/report.h"
#include "../../src/common/format.h"
#include "harness.h"
#include "trace_builder.h"

static char tmp_path[64];

// A whole run: INFO with these flags, one allocation unless the heap was not traced, a scan,
// the end.
static void build(buf_t* b, uint64_t info_flags) {
    tag(b, REC_INFO);
    u(b, 42), u(b, 1), u(b, 0), u(b, 32), u(b, 0), u(b, info_flags);
    str(b, "/bin/prog");
    str(b, "prog");
    u(b, 0);
    rec_thread(b, 1, 42);
    rec_stack(b, 1, 0, 0x1000);
    if (!(info_flags & HL_INFO_HEAP_UNTRACED)) {
        rec_switch(b, 1);
        rec_time(b, 100);
        rec_alloc(b, HL_FN_MALLOC, 64, 1);
    }
    rec_scan(b, 200, HL_SCAN_AT_EXIT, 0);
    rec_end(b, 300);
}

// The JSON and text reports of that run, each in a buffer the caller frees.
static int reports(uint64_t info_flags, char** json, char** text) {
    buf_t* raw = calloc(1, sizeof *raw);
    static uint8_t file[1 << 16];
    if (!raw)
        return -1;
    build(raw, info_flags);
    write_bytes(tmp_path, file, trace_file(file, sizeof file, raw));
    free(raw);
    model_t m;
    if (model_load(&m, tmp_path) != 0)
        return -1;
    report_ctx_t* c = report_ctx_new(&m, NULL);
    report_opts_t o = {.max_records = 25, .exit_status = 0};
    size_t len;
    FILE* f = open_memstream(json, &len);
    report_json(f, c, &o);
    fclose(f);
    f = open_memstream(text, &len);
    report_text(f, c, &o);
    fclose(f);
    report_ctx_free(c);
    model_free(&m);
    return 0;
}

TEST(whole_heap) {
    char *json, *text;
    ASSERT_TRUE(reports(HL_INFO_FROM_START, &json, &text) == 0);
    EXPECT_TRUE(strstr(json, "\"heap_traced\": \"all\"") != NULL);
    EXPECT_TRUE(strstr(json, "\"trace_complete\": true") != NULL);
    EXPECT_TRUE(strstr(text, "traced:") == NULL);
    free(json);
    free(text);
}

TEST(partly_traced_heap_is_not_a_complete_trace) {
    char *json, *text;
    ASSERT_TRUE(reports(HL_INFO_HEAP_PARTIAL, &json, &text) == 0);
    EXPECT_TRUE(strstr(json, "\"heap_traced\": \"partial\"") != NULL);
    EXPECT_TRUE(strstr(json, "\"trace_complete\": false") != NULL);
    EXPECT_TRUE(strstr(text, "==heaplens== heap partly traced: ") != NULL);
    free(json);
    free(text);
}

TEST(untraced_heap_says_so) {
    char *json, *text;
    ASSERT_TRUE(reports(HL_INFO_HEAP_UNTRACED, &json, &text) == 0);
    EXPECT_TRUE(strstr(json, "\"heap_traced\": \"none\"") != NULL);
    EXPECT_TRUE(strstr(json, "\"trace_complete\": false") != NULL);
    EXPECT_TRUE(strstr(text, "==heaplens== heap NOT traced: ") != NULL);
    EXPECT_TRUE(strstr(text, "heap partly traced") == NULL);
    free(json);
    free(text);
}

int main(void) {
    snprintf(tmp_path, sizeof tmp_path, "/tmp/test_heap_traced.%d.hl", (int)getpid());
    RUN_TEST(whole_heap);
    RUN_TEST(partly_traced_heap_is_not_a_complete_trace);
    RUN_TEST(untraced_heap_says_so);
    unlink(tmp_path);
    return TEST_SUMMARY();
}
