// SPDX-License-Identifier: MIT
// test_reader.c - the decoder and the model on traces built byte by byte: a well-formed trace
// gives exact totals, peak and leak records; chunks decode as parts of one stream; a damaged
// chunk ends the trace with its offset; every truncation point and every flipped byte ends
// decoding with a message, never a crash.
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "../../src/analyze/model.h"
#include "../../src/analyze/sites.h"
#include "../../src/common/format.h"
#include "../../src/common/varint.h"
#include "harness.h"
#include "trace_builder.h"

static char tmp_path[64];
static void write_file(const uint8_t* data, size_t len) { write_bytes(tmp_path, data, len); }

static buf_t* new_buf(void) {
    buf_t* b = calloc(1, sizeof *b);
    if (b)
        rec_info(b, 42);
    return b;
}

// Thread 1 allocates 100 (stack 3), 200 (stack 4), 300 (stack 3); frees the 200; the scan
// says the 100 is definitely lost and the 300 still reachable.
static void build_records(buf_t* r) {
    // Stack 2 is main (0x1010) alone; stack 3 is f (0x1000) called from main.
    rec_stack(r, 2, 0, 0x1010);
    rec_stack(r, 3, 2, 0x1000);
    rec_stack(r, 4, 0, 0x1000);
    rec_switch(r, 1);
    rec_time(r, 10);
    rec_alloc(r, HL_FN_MALLOC, 100, 3);
    rec_alloc(r, HL_FN_NEW, 200, 4);
    rec_alloc(r, HL_FN_CALLOC, 300, 3);
    rec_free(r, HL_FN_DELETE, 200, 4);
    rec_scan(r, 20, HL_SCAN_ALL_THREADS | HL_SCAN_AT_EXIT, 2);
    rec_verdict(r, HL_LEAK_DEFINITE, 0x5000, 100, 3, HL_FN_MALLOC, 0);
    rec_verdict(r, HL_LEAK_REACHABLE, 0x5100, 300, 3, HL_FN_CALLOC, 0);
    rec_end(r, 30);
}

static size_t build_file(uint8_t* out, size_t cap) {
    buf_t* raw = new_buf();
    build_records(raw);
    size_t n = trace_file(out, cap, raw);
    free(raw);
    return n;
}

// Site numbers: a stack's first pair is found at the stack's id, other sizes of it, sizes of
// 4 GiB and more and stack ids past the direct range in the table; every pair keeps its number
// as either grows, and a pair never named reads 0.
TEST(sites_number_pairs_in_order_wherever_they_are_kept) {
    sites_t s;
    sites_init(&s);
    uint64_t early;
    const uint64_t huge = 1ull << 33;
    const uint32_t far = SITES_FIRST_STACKS + 5;
    EXPECT_EQ_U(sites_name(&s, 48, 7, &early), 1); // the stack's first: its entry
    EXPECT_EQ_U(sites_name(&s, 64, 7, &early), 2); // another size: the table
    EXPECT_EQ_U(sites_name(&s, huge, 9, &early), 3); // 8 GiB: the table, the entry left empty
    EXPECT_EQ_U(sites_name(&s, 16, 9, &early), 4); // then the stack's first of a small size
    EXPECT_EQ_U(sites_name(&s, 32, far, &early), 5); // past the direct range
    // thousands more, in both places, so that the table grows several times
    for (uint32_t k = 0; k < 5000; k++) {
        EXPECT_EQ_U(sites_name(&s, 8, 100 + k, &early), 6 + 2 * k);
        EXPECT_EQ_U(sites_name(&s, 24, 100 + k, &early), 7 + 2 * k);
    }
    EXPECT_EQ_U(sites_find(&s, 48, 7), 1);
    EXPECT_EQ_U(sites_find(&s, 64, 7), 2);
    EXPECT_EQ_U(sites_find(&s, huge, 9), 3);
    EXPECT_EQ_U(sites_find(&s, 16, 9), 4);
    EXPECT_EQ_U(sites_find(&s, 32, far), 5);
    EXPECT_EQ_U(sites_find(&s, 8, 4099), 6 + 2 * 3999);
    EXPECT_EQ_U(sites_find(&s, 24, 4099), 7 + 2 * 3999);
    EXPECT_EQ_U(sites_name(&s, 48, 7, &early), 1); // named again: the same number
    EXPECT_EQ_U(sites_find(&s, 80, 7), 0);   // never named: a size, a stack, a far stack
    EXPECT_EQ_U(sites_find(&s, 48, 8), 0);
    EXPECT_EQ_U(sites_find(&s, 48, far + 1), 0);
    EXPECT_EQ_U(sites_find(&s, huge, 7), 0);
    EXPECT_EQ_U(s.n, 5 + 10000);
    sites_free(&s);
}

// md_grow_used zeroes the items about to be used and leaves the rest of a new capacity alone:
// the items in [used, need) read zero whatever the memory held before, every time.
TEST(grown_arrays_zero_what_they_hand_out) {
    size_t cap = 0;
    uint64_t* v = md_grow_used(NULL, &cap, 0, 5, sizeof *v);
    ASSERT_TRUE(v != NULL && cap >= 5);
    for (size_t i = 0; i < 5; i++)
        EXPECT_EQ_U(v[i], 0);
    for (size_t i = 0; i < cap; i++)
        v[i] = 0xdeadbeef; // what a program's earlier use (or the allocator) left there
    v = md_grow_used(v, &cap, 5, 7, sizeof *v); // within the capacity: no new memory
    ASSERT_TRUE(v != NULL);
    EXPECT_EQ_U(v[4], 0xdeadbeef); // an item in use is kept
    EXPECT_EQ_U(v[5], 0);
    EXPECT_EQ_U(v[6], 0);
    size_t before = cap;
    v = md_grow_used(v, &cap, 7, before + 3, sizeof *v); // past it: a new capacity
    ASSERT_TRUE(v != NULL && cap >= before + 3);
    EXPECT_EQ_U(v[6], 0);
    for (size_t i = 7; i < before + 3; i++)
        EXPECT_EQ_U(v[i], 0);
    free(v);
}

// What lives at the end on the stack with the trace's id (model_live_by_stack); 0 when the
// trace never named it.
static uint64_t stack_live(const model_t* m, uint64_t trace_id, int blocks) {
    uint32_t id = model_stack_number(m, trace_id);
    uint64_t* bytes = calloc(m->nstacks + 1, sizeof *bytes);
    uint64_t* counts = calloc(m->nstacks + 1, sizeof *counts);
    uint64_t sum = 0;
    if (bytes && counts) {
        model_live_by_stack(m, bytes, counts);
        sum = id ? (blocks ? counts[id] : bytes[id]) : 0;
    }
    free(bytes);
    free(counts);
    return sum;
}

TEST(model_totals_peak_and_leaks) {
    uint8_t file[1 << 16];
    size_t n = build_file(file, sizeof file);
    ASSERT_TRUE(n > 0);
    write_file(file, n);
    model_t m;
    ASSERT_TRUE(model_load(&m, tmp_path) == 0);
    EXPECT_EQ_U(m.pid, 42);
    EXPECT_EQ_U(m.allocations, 3);
    EXPECT_EQ_U(m.frees, 1);
    EXPECT_EQ_U(m.bytes_allocated, 600);
    EXPECT_EQ_U(m.peak_bytes, 600);
    EXPECT_EQ_I(m.peak_time_ns, 10000);
    EXPECT_EQ_U(m.heap_bytes, 400);
    EXPECT_EQ_U(m.heap_blocks, 2);
    EXPECT_EQ_U(m.calls[HL_FN_NEW], 1);
    EXPECT_EQ_U(m.calls[HL_FN_DELETE], 1);
    EXPECT_EQ_U(stack_live(&m, 3, 0), 400);
    EXPECT_EQ_U(stack_live(&m, 3, 1), 2);
    EXPECT_EQ_U(stack_live(&m, 4, 0), 0);
    EXPECT_TRUE(m.is_scanned);
    EXPECT_EQ_U(m.leaks[HL_LEAK_DEFINITE].bytes, 100);
    EXPECT_EQ_U(m.leaks[HL_LEAK_REACHABLE].bytes, 300);
    EXPECT_EQ_U(m.leaks[HL_KIND_UNSCANNED].blocks, 0);
    EXPECT_EQ_U(m.nrecords, 2);
    EXPECT_EQ_U(m.records[0].kind, HL_LEAK_DEFINITE);
    EXPECT_EQ_U(m.records[0].stack, model_stack_number(&m, 3));
    uint64_t ips[MD_STACK_DEPTH_MAX];
    EXPECT_EQ_U(model_stack_ips(&m, model_stack_number(&m, 3), ips, MD_STACK_DEPTH_MAX), 2);
    EXPECT_EQ_U(ips[0], 0x1000);
    EXPECT_EQ_U(ips[1], 0x1010);
    EXPECT_EQ_U(model_stack_ips(&m, model_stack_number(&m, 3), ips, 1), 1); // cut at max
    EXPECT_EQ_U(model_stack_ips(&m, 0, ips, MD_STACK_DEPTH_MAX), 0);
    EXPECT_TRUE(model_stack_number(&m, 99) == 0);
    EXPECT_TRUE(m.has_end);
    EXPECT_TRUE(!m.read.is_truncated && !m.read.is_corrupt);
    model_free(&m);
}

// Records as the callback sees them.
typedef struct seen_s {
    rd_record_t r[64];
    int n;
} seen_t;

static int keep(const rd_record_t* r, void* arg) {
    seen_t* s = arg;
    if (s->n < 64)
        s->r[s->n++] = *r;
    return 0;
}

static const rd_record_t* nth_of(const seen_t* s, int tag, int nth) {
    for (int i = 0; i < s->n; i++)
        if (s->r[i].tag == tag && nth-- == 0)
            return &s->r[i];
    return NULL;
}

// A heap event takes the last SWITCH and the last timed record, across chunks; "dt" deltas
// restart at each chunk; a release comes with its site's size and stack.
TEST(heap_events_take_current_thread_and_time) {
    buf_t* b = new_buf();
    ASSERT_TRUE(b != NULL);
    tw_t w;
    ASSERT_TRUE(tw_open(&w, 1 << 20, HL_TRACE_VERSION) == 0);
    rec_switch(b, 3);
    rec_time(b, 1000);
    rec_alloc(b, HL_FN_NEW, 48, 7);
    rec_sample(b, 1500, 48, 1, 0, 0); // a timed record: it sets the time too
    rec_switch(b, 4);
    rec_alloc(b, HL_FN_MALLOC, 16, 9);
    ASSERT_TRUE(tw_chunk(&w, b, 0) == 0);
    rec_free_temp(b, HL_FN_FREE, 16, 9); // before any time in this chunk: still 1500 us
    rec_time(b, 2500);                   // absolute again: the chunk's deltas start at 0
    rec_switch(b, 3);
    rec_free(b, HL_FN_DELETE, 48, 7);
    rec_free_explicit(b, HL_FN_FREE, 1, 16, 9);
    rec_mmap(b, 0x7000, 4096, 7);
    rec_end(b, 3000);
    ASSERT_TRUE(tw_chunk(&w, b, 1) == 0);
    write_file(w.data, w.len);
    tw_close(&w);
    free(b);

    seen_t* s = calloc(1, sizeof *s);
    rd_result_t res;
    ASSERT_TRUE(rd_read_file(tmp_path, keep, s, &res) == 0);
    EXPECT_EQ_U(res.chunks, 2);
    EXPECT_TRUE(!res.is_corrupt && !res.is_truncated);
    const rd_record_t* a0 = nth_of(s, REC_ALLOC, 0);
    const rd_record_t* a1 = nth_of(s, REC_ALLOC, 1);
    const rd_record_t* f0 = nth_of(s, REC_FREE, 0);
    const rd_record_t* f1 = nth_of(s, REC_FREE, 1);
    const rd_record_t* f2 = nth_of(s, REC_FREE, 2);
    const rd_record_t* mm = nth_of(s, REC_MMAP, 0);
    ASSERT_TRUE(a0 && a1 && f0 && f1 && f2 && mm);
    EXPECT_EQ_U(a0->thread, 3);
    EXPECT_EQ_I(a0->time_ns, 1000000);
    EXPECT_EQ_U(a0->fn, HL_FN_NEW);
    EXPECT_EQ_U(a0->u[0], 48);
    EXPECT_EQ_U(a0->u[1], 7);
    EXPECT_EQ_U(a0->u[2], 1);
    EXPECT_EQ_U(a0->wire_tag, REC_ALLOC | HL_FN_NEW);
    EXPECT_EQ_U(a1->thread, 4);
    EXPECT_EQ_I(a1->time_ns, 1500000);
    EXPECT_EQ_U(a1->u[2], 2);
    EXPECT_EQ_U(f0->thread, 4);
    EXPECT_EQ_I(f0->time_ns, 1500000);
    EXPECT_TRUE(f0->is_temporary);
    EXPECT_EQ_U(f0->u[0], 16);
    EXPECT_EQ_U(f0->u[1], 9);
    EXPECT_EQ_U(f0->u[2], 2);
    EXPECT_EQ_U(f0->fn, HL_FN_FREE);
    EXPECT_EQ_U(f1->thread, 3);
    EXPECT_EQ_I(f1->time_ns, 2500000);
    EXPECT_TRUE(!f1->is_temporary);
    EXPECT_EQ_U(f1->u[0], 48);
    EXPECT_EQ_U(f1->u[1], 7);
    EXPECT_EQ_U(f1->fn, HL_FN_DELETE);
    EXPECT_EQ_U(f2->wire_tag, REC_FREE_EXPLICIT);
    EXPECT_TRUE(f2->is_temporary);
    EXPECT_EQ_U(f2->u[0], 16);
    EXPECT_EQ_U(f2->u[1], 9);
    EXPECT_EQ_U(f2->u[2], 2); // its pair is site 2
    EXPECT_EQ_U(mm->thread, 3);
    EXPECT_EQ_U(mm->u[1], 4096);
    EXPECT_EQ_U(mm->u[4], 7);
    EXPECT_EQ_I(mm->time_ns, 2500000);
    free(s);
}

// n ALLOC/FREE pairs of pseudo-random sizes on one thread: records zstd cannot squeeze much
// the first time, and finds whole in its window the second time.
static void churn(buf_t* b, int n) {
    uint64_t x = 12345;
    rec_switch(b, 1);
    for (int i = 0; i < n; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t size = 1 + (x >> 33) % 5000, stack = 1 + (x >> 50) % 8;
        rec_alloc(b, HL_FN_MALLOC, size, stack);
        if (i % 3 != 2)
            rec_free(b, HL_FN_FREE, size, stack);
    }
}

// Three chunks of one stream: churn, the same churn again, the end. The second chunk's bytes
// are the first's; zstd stores them as a reference into the history, so the second decodes
// only after the first.
static size_t build_stream(tw_t* w, buf_t* b, int with_end) {
    if (tw_open(w, 4u << 20, HL_TRACE_VERSION) != 0)
        return 0;
    churn(b, 2000);
    tw_chunk(w, b, 0);
    churn(b, 2000);
    tw_chunk(w, b, 0);
    rec_end(b, 10);
    tw_chunk(w, b, with_end);
    return w->len;
}

static uint32_t rd32(const uint8_t* p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

TEST(chunks_decode_as_one_stream) {
    buf_t* b = new_buf();
    tw_t w;
    ASSERT_TRUE(b && build_stream(&w, b, 1) > 0);
    ASSERT_TRUE(w.nchunks == 3);
    const uint8_t* c2 = w.data + w.chunk_at[1];
    EXPECT_TRUE(rd32(c2 + 4) * 20 < rd32(c2 + 8)); // stored far below raw: it is a back-reference
    write_file(w.data, w.len);
    model_t m;
    ASSERT_TRUE(model_load(&m, tmp_path) == 0);
    EXPECT_EQ_U(m.read.chunks, 3);
    EXPECT_TRUE(!m.read.is_corrupt && !m.read.is_truncated);
    EXPECT_EQ_U(m.allocations, 4000);
    EXPECT_EQ_U(m.frees, 2 * 1334);
    EXPECT_EQ_U(m.heap_blocks, 2 * 666);
    EXPECT_TRUE(m.has_end);
    model_free(&m);

    // The second chunk after a file header alone: without the history it cannot decode.
    uint8_t* alone = malloc(w.len);
    size_t n2 = HL_CHUNK_HEADER_SIZE + rd32(c2 + 4);
    memcpy(alone, w.data, HL_FILE_HEADER_SIZE);
    memcpy(alone + HL_FILE_HEADER_SIZE, c2, n2);
    write_file(alone, HL_FILE_HEADER_SIZE + n2);
    rd_result_t res;
    seen_t* s = calloc(1, sizeof *s);
    EXPECT_EQ_I(rd_read_file(tmp_path, keep, s, &res), 0);
    EXPECT_TRUE(res.is_corrupt);
    EXPECT_EQ_U(res.records, 0);
    EXPECT_TRUE(strstr(res.message, "at byte 16") != NULL);
    free(s);
    free(alone);
    tw_close(&w);
    free(b);
}

// A process killed before it closed its trace leaves a frame without its end: nothing wrong.
TEST(a_stream_without_its_end_reads_whole) {
    buf_t* b = new_buf();
    tw_t w;
    ASSERT_TRUE(b && build_stream(&w, b, 0) > 0);
    write_file(w.data, w.len);
    model_t m;
    ASSERT_TRUE(model_load(&m, tmp_path) == 0);
    EXPECT_TRUE(!m.read.is_corrupt && !m.read.is_truncated);
    EXPECT_STREQ(m.read.message, "");
    EXPECT_EQ_U(m.allocations, 4000);
    EXPECT_TRUE(m.has_end);
    model_free(&m);
    tw_close(&w);
    free(b);
}

TEST(a_checksum_mismatch_ends_the_trace) {
    buf_t* b = new_buf();
    tw_t w;
    ASSERT_TRUE(b && build_stream(&w, b, 1) > 0);
    char where[64];
    snprintf(where, sizeof where, "at byte %zu", w.chunk_at[1]);
    w.data[w.chunk_at[1] + 12] ^= 1; // the second chunk's checksum
    write_file(w.data, w.len);
    model_t m;
    ASSERT_TRUE(model_load(&m, tmp_path) == 0);
    EXPECT_TRUE(m.read.is_corrupt);
    EXPECT_TRUE(!m.read.is_truncated);
    EXPECT_TRUE(strstr(m.read.message, where) != NULL);
    EXPECT_TRUE(strstr(m.read.message, "checksum") != NULL);
    EXPECT_EQ_U(m.read.chunks, 1);
    EXPECT_EQ_U(m.allocations, 2000); // the first chunk's; nothing after the damage
    EXPECT_TRUE(!m.has_end);
    model_free(&m);

    // A damaged byte inside the stored data: caught by zstd or by the checksum, same end.
    w.data[w.chunk_at[1] + 12] ^= 1;
    w.data[w.chunk_at[1] + HL_CHUNK_HEADER_SIZE + 3] ^= 0x40;
    write_file(w.data, w.len);
    ASSERT_TRUE(model_load(&m, tmp_path) == 0);
    EXPECT_TRUE(m.read.is_corrupt);
    EXPECT_TRUE(strstr(m.read.message, where) != NULL);
    EXPECT_EQ_U(m.allocations, 2000);
    model_free(&m);
    tw_close(&w);
    free(b);
}

TEST(a_file_cut_inside_a_later_chunk_is_truncated) {
    buf_t* b = new_buf();
    tw_t w;
    ASSERT_TRUE(b && build_stream(&w, b, 1) > 0);
    size_t cut = w.chunk_at[1] + HL_CHUNK_HEADER_SIZE + 5;
    write_file(w.data, cut);
    model_t m;
    ASSERT_TRUE(model_load(&m, tmp_path) == 0);
    EXPECT_TRUE(m.read.is_truncated);
    EXPECT_TRUE(!m.read.is_corrupt);
    char where[64];
    snprintf(where, sizeof where, "at byte %zu", w.chunk_at[1]);
    EXPECT_TRUE(strstr(m.read.message, where) != NULL);
    EXPECT_EQ_U(m.allocations, 2000);
    model_free(&m);
    tw_close(&w);
    free(b);
}

// A trace read while it is written (heaplens run follows its program's): the file grows a few
// bytes at a time, cut anywhere (inside a chunk's header, inside its stored bytes); each read
// takes the chunks that are whole and waits at the rest, never calling the file truncated, and
// what it read in the end is what reading the whole file gives.
TEST(a_trace_followed_as_it_grows_reads_as_the_whole) {
    buf_t* b = new_buf();
    tw_t w;
    ASSERT_TRUE(b && build_stream(&w, b, 1) > 0);
    write_file(w.data, w.len);
    model_t whole;
    ASSERT_TRUE(model_load(&whole, tmp_path) == 0);

    write_file(w.data, HL_FILE_HEADER_SIZE);
    model_t m;
    model_begin(&m, NULL);
    rd_stream_t* s;
    ASSERT_TRUE(rd_stream_open(tmp_path, &s, &m.read) == 0);
    int waits = 0, mores = 0, others = 0;
    uint64_t chunks_seen = 0;
    for (size_t at = HL_FILE_HEADER_SIZE; at < w.len;) {
        size_t step = w.len - at < 7 ? w.len - at : 7;
        FILE* f = fopen(tmp_path, "ab");
        ASSERT_TRUE(f != NULL);
        fwrite(w.data + at, 1, step, f);
        fclose(f);
        at += step;
        int rc = model_read(&m, s, 1);
        waits += rc == RD_WAIT;
        mores += rc == RD_MORE;
        others += rc != RD_WAIT && rc != RD_MORE;
        // A chunk is taken once it is whole, not before.
        int whole_chunks = 0;
        for (int k = 0; k < w.nchunks; k++) {
            size_t end = k + 1 < w.nchunks ? w.chunk_at[k + 1] : w.len;
            whole_chunks += end <= at;
        }
        EXPECT_TRUE(m.read.chunks <= (uint64_t)whole_chunks);
        EXPECT_TRUE(m.read.chunks + 1 >= (uint64_t)whole_chunks); // one a call at most
        chunks_seen = m.read.chunks;
    }
    EXPECT_EQ_I(others, 0);
    EXPECT_TRUE(waits > 100 && mores > 0);
    EXPECT_TRUE(chunks_seen >= 2);
    EXPECT_EQ_I(model_read(&m, s, 0), 0); // the rest, to the end
    rd_stream_close(s);
    ASSERT_TRUE(model_end(&m, 0) == 0);
    EXPECT_TRUE(!m.read.is_corrupt && !m.read.is_truncated);
    EXPECT_EQ_U(m.read.chunks, whole.read.chunks);
    EXPECT_EQ_U(m.read.records, whole.read.records);
    EXPECT_EQ_U(m.allocations, whole.allocations);
    EXPECT_EQ_U(m.frees, whole.frees);
    EXPECT_EQ_U(m.heap_blocks, whole.heap_blocks);
    EXPECT_EQ_U(m.peak_bytes, whole.peak_bytes);
    EXPECT_TRUE(m.has_end && whole.has_end);
    model_free(&m);
    model_free(&whole);
    tw_close(&w);
    free(b);
}

TEST(a_free_of_an_undefined_site_is_corrupt) {
    buf_t* b = new_buf();
    rec_switch(b, 1);
    rec_alloc(b, HL_FN_MALLOC, 8, 1);
    rec_alloc(b, HL_FN_MALLOC, 16, 1);
    rec_free_site(b, HL_FN_FREE, 2);
    rec_free_site(b, HL_FN_FREE, 3); // only sites 1 and 2 exist
    rec_alloc(b, HL_FN_MALLOC, 32, 1);
    uint8_t file[1 << 12];
    size_t n = trace_file(file, sizeof file, b);
    write_file(file, n);
    model_t m;
    ASSERT_TRUE(model_load(&m, tmp_path) == 0);
    EXPECT_TRUE(m.read.is_corrupt);
    EXPECT_TRUE(strstr(m.read.message, "site 3") != NULL);
    EXPECT_TRUE(strstr(m.read.message, "chunk at byte 16") != NULL);
    EXPECT_EQ_U(m.allocations, 2); // decoding stopped at the bad release
    EXPECT_EQ_U(m.frees, 1);
    model_free(&m);
    free(b);
}

// A temporary free is the release of its thread's latest ALLOC, whichever thread allocated
// last overall; a thread that allocated nothing has nothing to release that way.
TEST(a_temporary_free_releases_its_threads_latest_alloc) {
    buf_t* b = new_buf();
    rec_switch(b, 1);
    rec_alloc(b, HL_FN_MALLOC, 100, 1);
    rec_switch(b, 2);
    rec_alloc(b, HL_FN_MALLOC, 7, 2);
    rec_switch(b, 1);
    rec_free_temp(b, HL_FN_FREE, 100, 1); // thread 1's: 100 bytes at stack 1, not thread 2's 7
    rec_switch(b, 3);
    rec_free_temp(b, HL_FN_FREE, 0, 0); // thread 3 never allocated
    rec_alloc(b, HL_FN_MALLOC, 32, 1);
    uint8_t file[1 << 12];
    size_t n = trace_file(file, sizeof file, b);
    write_file(file, n);
    model_t m;
    ASSERT_TRUE(model_load(&m, tmp_path) == 0);
    EXPECT_TRUE(m.read.is_corrupt);
    EXPECT_TRUE(strstr(m.read.message, "site 0") != NULL);
    EXPECT_EQ_U(m.allocations, 2);
    EXPECT_EQ_U(m.frees, 1);
    EXPECT_EQ_U(m.heap_bytes, 7); // thread 1's block went, thread 2's is live
    EXPECT_EQ_U(m.heap_blocks, 1);
    model_free(&m);
    free(b);
}

TEST(a_version_2_trace_is_refused) {
    buf_t* b = new_buf();
    tw_t w;
    ASSERT_TRUE(tw_open(&w, 1 << 16, 2) == 0);
    tw_chunk(&w, b, 1);
    write_file(w.data, w.len);
    tw_close(&w);
    free(b);
    model_t m;
    EXPECT_EQ_I(model_load(&m, tmp_path), -EINVAL);
    EXPECT_TRUE(strstr(m.read.message, "version 2") != NULL);
    EXPECT_TRUE(strstr(m.read.message, "version 3") != NULL);
    EXPECT_TRUE(strchr(m.read.message, '\n') == NULL);
    model_free(&m);
}

// A trace of one INFO record whose header says `version` and `flags`, loaded into *m.
static int load_info_trace(uint32_t version, uint32_t flags, model_t* m) {
    buf_t* b = new_buf();
    tw_t w;
    if (tw_open(&w, 1 << 16, version) != 0) {
        free(b);
        return -ENOMEM;
    }
    le32(w.data + 12, flags);
    rec_info(b, 42);
    tw_chunk(&w, b, 1);
    write_file(w.data, w.len);
    tw_close(&w);
    free(b);
    return model_load(m, tmp_path);
}

// Version 3 differs only in lacking two function codes: its traces are read as they are; one
// from a later heaplens is refused, in one line.
TEST(a_version_3_trace_is_read_a_later_one_refused) {
    model_t m;
    EXPECT_EQ_I(load_info_trace(HL_TRACE_VERSION_OLDEST, 0, &m), 0);
    model_free(&m);
    EXPECT_EQ_I(load_info_trace(HL_TRACE_VERSION + 1, 0, &m), -EINVAL);
    EXPECT_TRUE(strstr(m.read.message, "version 5") != NULL);
    EXPECT_TRUE(strchr(m.read.message, '\n') == NULL);
    model_free(&m);
}

// The header says what machine the trace came from: word size and byte order (a collector on
// another machine shows it); 0 (traces from before the field) reads as 8 bytes, little-endian.
TEST(the_header_names_the_targets_word_size_and_byte_order) {
    const uint32_t flags[] = {0, 4, 8 | HL_HDR_BIG_ENDIAN, 3};
    const unsigned words[] = {8, 4, 8, 0};
    const int big[] = {0, 0, 1, 0};
    for (int k = 0; k < 4; k++) {
        model_t m;
        int rc = load_info_trace(HL_TRACE_VERSION, flags[k], &m);
        if (words[k]) {
            EXPECT_EQ_I(rc, 0);
            EXPECT_EQ_U(m.read.word_size, words[k]);
            EXPECT_EQ_I(m.read.is_big_endian, big[k]);
        } else {
            EXPECT_EQ_I(rc, -EINVAL); // a 3-byte pointer: not a trace
            EXPECT_TRUE(strstr(m.read.message, "pointer size") != NULL);
        }
        model_free(&m);
    }
}

// Verdicts in address order: an indirectly lost block may name a leader that comes after it.
// Stacks: 1 and 2 definitely lost, 3 reached only through them.
TEST(verdict_leaders_forward_and_back) {
    buf_t* b = new_buf();
    rec_switch(b, 1);
    rec_alloc(b, HL_FN_MALLOC, 32, 1);
    rec_alloc(b, HL_FN_MALLOC, 64, 2);
    rec_alloc(b, HL_FN_MALLOC, 16, 3);
    rec_alloc(b, HL_FN_MALLOC, 8, 3);
    rec_alloc(b, HL_FN_MALLOC, 8, 3);
    // A first scan that a second one supersedes.
    rec_scan(b, 5, HL_SCAN_AT_EXIT, 5);
    rec_verdict(b, HL_LEAK_REACHABLE, 0x1000, 16, 3, HL_FN_MALLOC, 0);
    rec_free(b, HL_FN_FREE, 8, 3);
    rec_scan(b, 10, HL_SCAN_ALL_THREADS | HL_SCAN_AT_EXIT, 4);
    rec_verdict(b, HL_LEAK_INDIRECT, 0x1000, 16, 3, HL_FN_MALLOC, 0x3000); // leader ahead
    rec_verdict(b, HL_LEAK_DEFINITE, 0x2000, 32, 1, HL_FN_MALLOC, 0);
    rec_verdict(b, HL_LEAK_DEFINITE, 0x3000, 64, 2, HL_FN_MALLOC, 0);
    rec_verdict(b, HL_LEAK_INDIRECT, 0x4000, 8, 3, HL_FN_MALLOC, 0x2000); // leader behind
    uint8_t file[1 << 12];
    write_file(file, trace_file(file, sizeof file, b)); // no END: the verdicts end the trace
    free(b);
    model_t m;
    ASSERT_TRUE(model_load(&m, tmp_path) == 0);
    EXPECT_TRUE(m.is_scanned);
    EXPECT_EQ_U(m.scan_flags, HL_SCAN_ALL_THREADS | HL_SCAN_AT_EXIT);
    EXPECT_EQ_U(m.leaks[HL_LEAK_DEFINITE].bytes, 96);
    EXPECT_EQ_U(m.leaks[HL_LEAK_INDIRECT].bytes, 24);
    EXPECT_EQ_U(m.leaks[HL_LEAK_INDIRECT].blocks, 2);
    EXPECT_EQ_U(m.leaks[HL_LEAK_REACHABLE].blocks, 0); // the first scan's verdict is void
    const md_site_t* s16 = model_site(&m, 3);              // (16, stack 3)
    ASSERT_TRUE(s16 != NULL);
    EXPECT_EQ_U(s16->verdicts[HL_LEAK_REACHABLE], 0);
    EXPECT_EQ_U(s16->verdicts[HL_LEAK_INDIRECT], 1);
    EXPECT_EQ_U(m.leaks[HL_KIND_UNSCANNED].blocks, 0);
    ASSERT_TRUE(m.nrecords == 3);
    // Sorted by kind, then direct + indirect bytes: stack 2 (64 + 16), stack 1 (32 + 8).
    EXPECT_EQ_U(m.records[0].kind, HL_LEAK_DEFINITE);
    EXPECT_EQ_U(m.records[0].stack, model_stack_number(&m, 2));
    EXPECT_EQ_U(m.records[0].indirect_bytes, 16);
    EXPECT_EQ_U(m.records[0].indirect_blocks, 1);
    EXPECT_EQ_U(m.records[1].stack, model_stack_number(&m, 1));
    EXPECT_EQ_U(m.records[1].indirect_bytes, 8);
    EXPECT_EQ_U(m.records[2].kind, HL_LEAK_INDIRECT);
    EXPECT_EQ_U(m.records[2].bytes, 24);
    model_free(&m);
}

// Without a scan (the process was killed), what lives at the end is reported per stack as
// unscanned; with a scan, blocks beyond its verdicts are too.
static void live_at_the_end(buf_t* b) {
    rec_switch(b, 1);
    rec_alloc(b, HL_FN_MALLOC, 10, 1);
    rec_alloc(b, HL_FN_MALLOC, 10, 1);
    rec_alloc(b, HL_FN_MALLOC, 20, 1);
    rec_alloc(b, HL_FN_MALLOC, 5, 2);
    rec_free(b, HL_FN_FREE, 10, 1);
    rec_free(b, HL_FN_FREE, 5, 2);
}

TEST(live_blocks_without_verdicts_are_unscanned) {
    buf_t* b = new_buf();
    live_at_the_end(b);
    uint8_t file[1 << 12];
    write_file(file, trace_file(file, sizeof file, b));
    free(b);
    model_t m;
    ASSERT_TRUE(model_load(&m, tmp_path) == 0);
    EXPECT_TRUE(!m.is_scanned);
    ASSERT_TRUE(m.nrecords == 1);
    EXPECT_EQ_U(m.records[0].kind, HL_KIND_UNSCANNED);
    EXPECT_EQ_U(m.records[0].stack, model_stack_number(&m, 1));
    EXPECT_EQ_U(m.records[0].bytes, 30);
    EXPECT_EQ_U(m.records[0].blocks, 2);
    EXPECT_EQ_U(m.leaks[HL_KIND_UNSCANNED].bytes, 30);
    model_free(&m);

    // The same, scanned, and a block made after the scan.
    b = new_buf();
    live_at_the_end(b);
    rec_scan(b, 1, HL_SCAN_AT_EXIT, 2);
    rec_verdict(b, HL_LEAK_DEFINITE, 0x100, 10, 1, HL_FN_MALLOC, 0);
    rec_verdict(b, HL_LEAK_REACHABLE, 0x200, 20, 1, HL_FN_MALLOC, 0);
    rec_alloc(b, HL_FN_MALLOC, 10, 1);
    write_file(file, trace_file(file, sizeof file, b));
    free(b);
    ASSERT_TRUE(model_load(&m, tmp_path) == 0);
    EXPECT_EQ_U(m.leaks[HL_LEAK_DEFINITE].bytes, 10);
    EXPECT_EQ_U(m.leaks[HL_LEAK_REACHABLE].bytes, 20);
    EXPECT_EQ_U(m.leaks[HL_KIND_UNSCANNED].bytes, 10);
    EXPECT_EQ_U(m.leaks[HL_KIND_UNSCANNED].blocks, 1);
    model_free(&m);
}

// FREE_EXPLICIT: a release the writer could not name by site. Thread 2 releases a block of
// thread 1 whose ALLOC is written after it (the level dips below zero for an instant), then
// one of a pair already named.
TEST(free_explicit_before_and_after_its_site) {
    buf_t* b = new_buf();
    rec_stack(b, 1, 0, 0x1000);
    rec_stack(b, 2, 0, 0x2000);
    rec_switch(b, 2);
    rec_time(b, 10);
    rec_free_explicit(b, HL_FN_FREE, 0, 40, 2); // (40, 2): no site yet
    rec_switch(b, 1);
    rec_alloc(b, HL_FN_MALLOC, 8, 1);           // the level: -32 + 40 - 40 ...
    rec_alloc(b, HL_FN_MALLOC, 40, 2);          // names (40, 2), already released
    rec_alloc(b, HL_FN_MALLOC, 100, 1);
    rec_alloc(b, HL_FN_MALLOC, 40, 2);          // 148: the peak
    rec_switch(b, 2);
    rec_free_explicit(b, HL_FN_FREE, 0, 40, 2); // the pair is site 2 now
    rec_alloc(b, HL_FN_MALLOC, 7, 2);
    uint8_t file[1 << 12];
    write_file(file, trace_file(file, sizeof file, b));
    free(b);
    model_t m;
    ASSERT_TRUE(model_load(&m, tmp_path) == 0);
    EXPECT_TRUE(!m.read.is_corrupt);
    EXPECT_EQ_U(m.allocations, 5);
    EXPECT_EQ_U(m.frees, 2);
    EXPECT_EQ_U(m.calls[HL_FN_FREE], 2);
    EXPECT_EQ_U(m.heap_bytes, 115);
    EXPECT_EQ_U(m.heap_blocks, 3);
    EXPECT_EQ_U(m.peak_bytes, 148); // never the wrapped level of the early release
    EXPECT_EQ_U(m.peak_blocks, 3);
    EXPECT_EQ_U(stack_live(&m, 2, 0), 7);
    EXPECT_EQ_U(stack_live(&m, 2, 1), 1);
    EXPECT_EQ_U(stack_live(&m, 1, 0), 108);
    EXPECT_EQ_U(m.leaks[HL_KIND_UNSCANNED].bytes, 115);
    EXPECT_EQ_U(m.leaks[HL_KIND_UNSCANNED].blocks, 3);
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
        // The header fails its magic, a chunk header its bounds, the payload the checksum.
        EXPECT_TRUE(rc != 0 || m.read.is_corrupt || m.read.is_truncated);
        if (!(rc != 0 || m.read.is_corrupt || m.read.is_truncated))
            fprintf(stderr, "  byte %zu of %zu\n", at, n);
        model_free(&m);
    }
}

// Found by the fuzzer: a STACK whose parent no record defined numbers the parent while it holds
// the child's entry, and numbering it may move the array (the child's ip and parent were
// written to freed memory, and lost).
TEST(a_stack_under_an_undefined_parent_keeps_its_frame) {
    buf_t* raw = new_buf();
    ASSERT_TRUE(raw != NULL);
    enum { N = 300 };
    for (uint64_t i = 0; i < N; i++) // ids 1000, 1002, ...; parents 999, 1001, ... never defined
        rec_stack(raw, 1000 + 2 * i, 999 + 2 * i, 0x4000 + 16 * i);
    rec_end(raw, 5);
    static uint8_t file[1 << 16];
    size_t n = trace_file(file, sizeof file, raw);
    free(raw);
    ASSERT_TRUE(n > 0);
    write_file(file, n);
    model_t m;
    ASSERT_TRUE(model_load(&m, tmp_path) == 0);
    EXPECT_TRUE(!m.read.is_corrupt);
    int wrong = 0;
    for (uint64_t i = 0; i < N; i++) {
        uint32_t id = model_stack_number(&m, 1000 + 2 * i);
        uint32_t parent = model_stack_number(&m, 999 + 2 * i);
        if (!id || !parent || m.stacks[id].ip != 0x4000 + 16 * i || m.stacks[id].parent != parent)
            wrong++;
    }
    EXPECT_EQ_I(wrong, 0);
    model_free(&m);
}

// An ERROR_CHANGE belongs to the error before it: offset (negative before the block), the span
// and up to 16 bytes as seen and as left; one that claims more bytes than it spans is corrupt.
TEST(error_changes_attach_to_their_error) {
    buf_t* b = new_buf();
    rec_stack(b, 2, 0, 0x1000);
    rec_error(b, HL_ERR_UNDERFLOW, 5, 2, 0x5000, 40, 2, 0);
    const uint8_t seen[] = {0x75, 0x01}, left[] = {0xd3, 0x02};
    rec_error_change(b, -3, 2, 2, seen, left);
    rec_error(b, HL_ERR_WRITE_AFTER_FREE, 6, 0, 0x6000, 256, 2, 2);
    uint8_t many[HL_CHANGE_BYTES];
    memset(many, 0x77, sizeof many);
    rec_error_change(b, 100, 4000, HL_CHANGE_BYTES, many, many);
    rec_error(b, HL_ERR_OVERFLOW, 7, 2, 0x7000, 8, 2, 0); // no change: an old agent's record
    rec_end(b, 30);
    uint8_t file[1 << 12];
    write_file(file, trace_file(file, sizeof file, b));
    model_t m;
    ASSERT_TRUE(model_load(&m, tmp_path) == 0);
    EXPECT_TRUE(!m.read.is_corrupt);
    ASSERT_TRUE(m.nerrors == 3);
    EXPECT_TRUE(m.errors[0].has_change);
    EXPECT_EQ_I(m.errors[0].change_offset, -3);
    EXPECT_EQ_U(m.errors[0].change_length, 2);
    EXPECT_EQ_U(m.errors[0].seen[0], 0x75);
    EXPECT_EQ_U(m.errors[0].seen[1], 0x01);
    EXPECT_EQ_U(m.errors[0].expected[1], 0x02);
    EXPECT_EQ_U(m.errors[1].change_n, HL_CHANGE_BYTES);
    EXPECT_EQ_U(m.errors[1].change_length, 4000);
    EXPECT_EQ_U(m.errors[1].seen[15], 0x77);
    EXPECT_TRUE(!m.errors[2].has_change);
    EXPECT_TRUE(!strcmp(hl_error_kind_name(m.errors[1].kind), "write_after_free"));
    model_free(&m);
    free(b);

    b = new_buf();
    rec_error(b, HL_ERR_OVERFLOW, 5, 0, 0x5000, 40, 0, 0);
    rec_error_change(b, 40, 1, 2, seen, left); // 2 bytes shown of a 1-byte change
    write_file(file, trace_file(file, sizeof file, b));
    ASSERT_TRUE(model_load(&m, tmp_path) == 0);
    EXPECT_TRUE(m.read.is_corrupt);
    model_free(&m);
    free(b);
}

// ALLOC_STATS beside the live heap: values a record lacks or says are not available read as
// such, values and arena fields a later version adds are skipped, and every count past what
// the record holds or the format allows makes the trace corrupt.
TEST(allocator_stats_beside_the_heap) {
    uint64_t v[HL_AS_COUNT + 2];
    for (int k = 0; k < HL_AS_COUNT + 2; k++)
        v[k] = 1000u * (uint64_t)(k + 1);
    buf_t* b = new_buf();
    rec_stack(b, 2, 0, 0x1000);
    rec_switch(b, 1);
    rec_time(b, 10);
    rec_alloc(b, HL_FN_MALLOC, 5000, 2);
    uint32_t all = (1u << HL_AS_COUNT) - 1;
    rec_alloc_stats(b, 20, HL_AS_SRC_MALLINFO2, all, HL_AS_COUNT, v, 2, 2, HL_AS_ARENA_FIELDS, 7);
    rec_alloc(b, HL_FN_MALLOC, 3000, 2);
    // a later version: two more values, six fields per arena, one of three arenas listed
    rec_alloc_stats(b, 30, HL_AS_SRC_MALLINFO2, all | 3u << HL_AS_COUNT, HL_AS_COUNT + 2, v, 3, 1,
                    6, 100);
    rec_free(b, HL_FN_FREE, 5000, 2);
    // another allocator: only the process's figures, and an older record of 8 values
    rec_alloc_stats(b, 40, HL_AS_SRC_NONE, 1u << HL_AS_VM_RSS, 8, v, 0, 0, 0, 0);
    rec_end(b, 50);
    uint8_t file[1 << 12];
    write_file(file, trace_file(file, sizeof file, b));
    model_t m;
    ASSERT_TRUE(model_load(&m, tmp_path) == 0);
    EXPECT_TRUE(!m.read.is_corrupt);
    const as_series_t* s = &m.alloc_stats;
    ASSERT_TRUE(s->records == 3 && s->n == 3);
    EXPECT_EQ_U(s->samples[0].heap_bytes, 5000);
    EXPECT_EQ_I(s->samples[0].time_ns, 20000);
    EXPECT_EQ_U(s->samples[0].value[HL_AS_IN_USE], 2000);
    EXPECT_EQ_U(s->samples[0].arenas, 2);
    EXPECT_EQ_U(s->samples[1].heap_bytes, 8000);
    EXPECT_EQ_U(s->samples[1].available, all); // the two unknown values are not kept
    EXPECT_EQ_U(s->peak.heap_bytes, 8000);     // the record with the most live heap
    EXPECT_EQ_U(s->peak_arenas.listed, 1);
    EXPECT_EQ_U(s->peak_arenas.v[0][HL_AS_ARENA_FREE_BLOCKS], 103);
    EXPECT_EQ_U(s->samples[2].heap_bytes, 3000);
    EXPECT_EQ_U(s->samples[2].available, 1u << HL_AS_VM_RSS);
    EXPECT_EQ_U(s->samples[2].value[HL_AS_IN_USE], 0);
    EXPECT_EQ_U(s->last.value[HL_AS_VM_RSS], 8000);
    EXPECT_EQ_U(s->source, HL_AS_SRC_NONE);
    model_free(&m);
    free(b);

    // bounds: more values than the format allows, more arenas than listed or allowed, more
    // arena fields than allowed, counts past the record's bytes
    struct {
        uint64_t n, arenas, m, fields;
    } bad[] = {{HL_AS_VALUES_MAX + 1, 0, 0, 0},
               {HL_AS_COUNT, 1, 2, HL_AS_ARENA_FIELDS},
               {HL_AS_COUNT, HL_AS_ARENAS_MAX + 1, HL_AS_ARENAS_MAX + 1, 1},
               {HL_AS_COUNT, 1, 1, HL_AS_ARENA_FIELDS_MAX + 1}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        b = new_buf();
        uint64_t many[HL_AS_VALUES_MAX + 1] = {0};
        rec_alloc_stats(b, 20, HL_AS_SRC_MALLINFO2, 1, bad[i].n, many, bad[i].arenas, bad[i].m,
                        bad[i].fields, 1);
        rec_end(b, 50);
        write_file(file, trace_file(file, sizeof file, b));
        ASSERT_TRUE(model_load(&m, tmp_path) == 0);
        EXPECT_TRUE(m.read.is_corrupt);
        EXPECT_TRUE(m.alloc_stats.records == 0);
        model_free(&m);
        free(b);
    }
    // the first record of a trace lists no arenas (another allocator): no arena array exists yet
    b = new_buf();
    rec_alloc_stats(b, 20, HL_AS_SRC_NONE, 1u << HL_AS_VM_RSS, HL_AS_COUNT, v, 0, 0, 0, 0);
    rec_end(b, 50);
    write_file(file, trace_file(file, sizeof file, b));
    ASSERT_TRUE(model_load(&m, tmp_path) == 0);
    EXPECT_TRUE(!m.read.is_corrupt);
    EXPECT_TRUE(m.alloc_stats.records == 1 && m.alloc_stats.peak_arenas.listed == 0);
    model_free(&m);
    free(b);
    b = new_buf(); // a count of a million values in a record of a few bytes
    tag(b, REC_ALLOC_STATS);
    dt(b, 20);
    u(b, 1), u(b, 1), u(b, 1000000);
    write_file(file, trace_file(file, sizeof file, b));
    ASSERT_TRUE(model_load(&m, tmp_path) == 0);
    EXPECT_TRUE(m.read.is_corrupt);
    model_free(&m);
    free(b);
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
    RUN_TEST(heap_events_take_current_thread_and_time);
    RUN_TEST(chunks_decode_as_one_stream);
    RUN_TEST(a_stream_without_its_end_reads_whole);
    RUN_TEST(a_checksum_mismatch_ends_the_trace);
    RUN_TEST(a_file_cut_inside_a_later_chunk_is_truncated);
    RUN_TEST(a_trace_followed_as_it_grows_reads_as_the_whole);
    RUN_TEST(a_free_of_an_undefined_site_is_corrupt);
    RUN_TEST(a_temporary_free_releases_its_threads_latest_alloc);
    RUN_TEST(a_version_2_trace_is_refused);
    RUN_TEST(a_version_3_trace_is_read_a_later_one_refused);
    RUN_TEST(the_header_names_the_targets_word_size_and_byte_order);
    RUN_TEST(verdict_leaders_forward_and_back);
    RUN_TEST(live_blocks_without_verdicts_are_unscanned);
    RUN_TEST(free_explicit_before_and_after_its_site);
    RUN_TEST(every_truncation_is_reported_not_crashed);
    RUN_TEST(every_flipped_byte_is_caught);
    RUN_TEST(a_stack_under_an_undefined_parent_keeps_its_frame);
    RUN_TEST(error_changes_attach_to_their_error);
    RUN_TEST(allocator_stats_beside_the_heap);
    RUN_TEST(garbage_is_not_a_trace);
    RUN_TEST(grown_arrays_zero_what_they_hand_out);
    RUN_TEST(sites_number_pairs_in_order_wherever_they_are_kept);
    unlink(tmp_path);
    return TEST_SUMMARY();
}
