// SPDX-License-Identifier: MIT
// test_reader.c - the decoder and the model on traces built byte by byte: a well-formed trace
// gives exact totals, peak and leak records; every truncation point and every flipped byte
// ends decoding with a message, never a crash.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "../../src/analyze/model.h"
#include "../../src/common/format.h"
#include "../../src/common/varint.h"
#include "harness.h"
#include "trace_builder.h"

// Thread 1 allocates 100 (stack 1), 200 (stack 2), 300 (stack 1); frees the 200; the scan
// says the 100 is definitely lost and the 300 still reachable.
static void build_records(buf_t* r) {
    tag(r, REC_INFO);
    u(r, 42), u(r, 1), u(r, 0), u(r, 32), u(r, 8), u(r, HL_INFO_FROM_START);
    str(r, "/bin/prog");
    str(r, "prog");
    u(r, 0);
    // Stack 2 is main (0x1010) alone; stack 1 is f (0x1000) called from main.
    tag(r, REC_STACK);
    sv(r, 2), u(r, 2), sv(r, 0x1010);   // id 2, parent 0
    tag(r, REC_STACK);
    sv(r, 1), u(r, 1), sv(r, -0x10);    // id 3, parent 2
    tag(r, REC_STACK);
    sv(r, 1), u(r, 4), sv(r, 0x0);      // id 4, parent 0
    tag(r, REC_ALLOC);
    u(r, 1), sv(r, 10), sv(r, 0x5000), u(r, 100), u(r, 3), u(r, HL_FN_MALLOC);
    tag(r, REC_ALLOC);
    u(r, 1), sv(r, 10), sv(r, 0x100), u(r, 200), u(r, 4), u(r, HL_FN_NEW);
    tag(r, REC_ALLOC);
    u(r, 1), sv(r, 10), sv(r, 0x100), u(r, 300), u(r, 3), u(r, HL_FN_CALLOC);
    tag(r, REC_FREE);
    u(r, 1), sv(r, 10), u(r, 1), sv(r, 1), u(r, HL_FN_DELETE); // block (1, 3 - 1)
    tag(r, REC_SCAN);
    sv(r, 10), u(r, HL_SCAN_ALL_THREADS | HL_SCAN_AT_EXIT), u(r, 2);
    tag(r, REC_VERDICT);
    u(r, 1), u(r, 1), u(r, HL_LEAK_DEFINITE), u(r, 0), u(r, 0);
    tag(r, REC_VERDICT);
    u(r, 1), u(r, 3), u(r, HL_LEAK_REACHABLE), u(r, 0), u(r, 0);
    tag(r, REC_END);
    sv(r, 10), u(r, HL_END_EXIT), u(r, 0);
}

static size_t build_file(uint8_t* out, size_t cap) {
    buf_t* raw = calloc(1, sizeof *raw);
    build_records(raw);
    size_t n = trace_file(out, cap, raw);
    free(raw);
    return n;
}

static char tmp_path[64];
static void write_file(const uint8_t* data, size_t len) { write_bytes(tmp_path, data, len); }

TEST(model_totals_peak_and_leaks) {
    uint8_t file[1 << 16];
    size_t n = build_file(file, sizeof file);
    write_file(file, n);
    model_t m;
    ASSERT_TRUE(model_load(&m, tmp_path) == 0);
    EXPECT_EQ_U(m.pid, 42);
    EXPECT_EQ_U(m.allocations, 3);
    EXPECT_EQ_U(m.frees, 1);
    EXPECT_EQ_U(m.bytes_allocated, 600);
    EXPECT_EQ_U(m.peak_bytes, 600);
    EXPECT_EQ_U(m.heap_bytes, 400);
    EXPECT_EQ_U(m.calls[HL_FN_NEW], 1);
    EXPECT_EQ_U(m.calls[HL_FN_DELETE], 1);
    EXPECT_TRUE(m.is_scanned);
    EXPECT_EQ_U(m.leaks[HL_LEAK_DEFINITE].bytes, 100);
    EXPECT_EQ_U(m.leaks[HL_LEAK_REACHABLE].bytes, 300);
    EXPECT_EQ_U(m.nrecords, 2);
    EXPECT_EQ_U(m.records[0].kind, HL_LEAK_DEFINITE);
    EXPECT_EQ_U(m.records[0].stack, 3);
    const md_stack_t* st = model_stack(&m, 3);
    ASSERT_TRUE(st != NULL);
    EXPECT_EQ_U(st->n, 2);
    EXPECT_EQ_U(st->ips[0], 0x1000);
    EXPECT_EQ_U(st->ips[1], 0x1010);
    EXPECT_TRUE(model_stack(&m, 99) == NULL);
    EXPECT_TRUE(m.has_end);
    EXPECT_TRUE(!m.read.is_truncated && !m.read.is_corrupt);
    model_free(&m);
}

TEST(every_truncation_is_reported_not_crashed) {
    uint8_t file[1 << 16];
    size_t n = build_file(file, sizeof file);
    for (size_t cut = 0; cut < n; cut++) {
        write_file(file, cut);
        model_t m;
        int rc = model_load(&m, tmp_path);
        if (cut < HL_FILE_HEADER_SIZE + HL_CHUNK_HEADER_SIZE + 1) {
            EXPECT_TRUE(rc != 0);
        } else {
            // One chunk: cut anywhere inside it, nothing decodes, and the reason is given.
            EXPECT_TRUE(rc != 0 || m.read.is_truncated);
        }
        EXPECT_TRUE(m.read.message[0] != 0);
        model_free(&m);
    }
}

TEST(every_flipped_byte_is_caught) {
    uint8_t file[1 << 16];
    size_t n = build_file(file, sizeof file);
    for (size_t at = 0; at < n; at++) {
        if (at >= 12 && at < 16)
            continue; // the header's reserved flags: later versions may set them
        uint8_t copy[1 << 16];
        memcpy(copy, file, n);
        copy[at] ^= 0x5a;
        write_file(copy, n);
        model_t m;
        int rc = model_load(&m, tmp_path);
        // The header fails its magic, a chunk header its bounds, the payload zstd's checksum.
        EXPECT_TRUE(rc != 0 || m.read.is_corrupt || m.read.is_truncated);
        model_free(&m);
    }
}

TEST(garbage_is_not_a_trace) {
    const char junk[] = "this is not a trace at all, just text\n";
    write_file((const uint8_t*)junk, sizeof junk);
    model_t m;
    EXPECT_TRUE(model_load(&m, tmp_path) != 0);
    EXPECT_TRUE(strstr(m.read.message, "not a heaplens trace") != NULL);
    model_free(&m);
}

int main(void) {
    snprintf(tmp_path, sizeof tmp_path, "/tmp/test_reader.%d.hl", (int)getpid());
    RUN_TEST(model_totals_peak_and_leaks);
    RUN_TEST(every_truncation_is_reported_not_crashed);
    RUN_TEST(every_flipped_byte_is_caught);
    RUN_TEST(garbage_is_not_a_trace);
    unlink(tmp_path);
    return TEST_SUMMARY();
}
