// SPDX-License-Identifier: MIT
// test_aggregate.c - the second pass (aggregate.c) on a trace built byte by byte, two threads:
// exact timeline buckets and peak, bytes per stack at the peak, temporaries (FREE_TEMP, per
// thread), the size histogram, per-thread totals, --from/--to windows, a release ahead of its
// allocation, and no crash on any truncation. Also the CRC-32 and the stored-gzip framing of
// the pprof writer.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "../../src/analyze/aggregate.h"
#include "../../src/common/format.h"
#include "../../src/common/varint.h"
#include "harness.h"
#include "trace_builder.h"

// Record times are in the trace's unit (format.h: microseconds); the reader gives nanoseconds.
#define TICK_NS 1000

// A heap event of thread `thread` at t: the SWITCH and TIME the writer would put before it.
static void at(buf_t* b, uint64_t thread, int64_t t) {
    rec_switch(b, thread);
    rec_time(b, t);
}

static void alloc_rec(buf_t* b, uint64_t thread, int64_t t, uint64_t size, uint64_t stack) {
    at(b, thread, t);
    rec_alloc(b, HL_FN_MALLOC, size, stack);
}

enum { ST_A = 1, ST_B = 2, ST_C = 3 };

// A site's numbers; a stack no event named reads as all zero.
static const ag_site_t* site(const aggregate_t* a, uint32_t stack) {
    static const ag_site_t none;
    const ag_site_t* s = ag_site_for(a, stack);
    return s ? s : &none;
}

// Times in ticks:
// t=100  T1 alloc A 100          heap  100
// t=200  T1 alloc B 1000         heap 1100
// t=300  T1 free_temp (1000, B)  heap  100   temporary
// t=400  T2 alloc C 500          heap  600
// t=500  T1 alloc A 700          heap 1300   the peak: A 800, C 500 (3 blocks)
// t=600  T2 free (100, A)        heap 1200   another thread: not temporary
// t=700  T1 alloc C 64           heap 1264
// t=800  T1 free_temp (64, C)    heap 1200   temporary
// t=900  T2 alloc B 2            heap 1202
// t=950  T2 alloc B 8            heap 1210
// t=1000 T2 free (2, B)          heap 1208   T2 allocated in between: not temporary
// t=1100 mmap 4096; t=1200 sample rss 9999; t=1250 a scan, superseded by the one at t=1300;
// t=1400 end.
// Left: A 700 definite, C 500 reachable, B 8 possible.
static void build_records(buf_t* r) {
    rec_info(r, 42);
    rec_thread(r, 1, 111);
    rec_thread(r, 2, 222);
    rec_stack(r, ST_A, 0, 0x1000);
    rec_stack(r, ST_B, 0, 0x2000);
    rec_stack(r, ST_C, 0, 0x3000);
    alloc_rec(r, 1, 100, 100, ST_A);
    alloc_rec(r, 1, 200, 1000, ST_B);
    at(r, 1, 300);
    rec_free_temp(r, HL_FN_FREE, 1000, ST_B);
    alloc_rec(r, 2, 400, 500, ST_C);
    alloc_rec(r, 1, 500, 700, ST_A);
    at(r, 2, 600);
    rec_free(r, HL_FN_FREE, 100, ST_A);
    alloc_rec(r, 1, 700, 64, ST_C);
    at(r, 1, 800);
    rec_free_temp(r, HL_FN_FREE, 64, ST_C);
    alloc_rec(r, 2, 900, 2, ST_B);
    alloc_rec(r, 2, 950, 8, ST_B);
    at(r, 2, 1000);
    rec_free(r, HL_FN_FREE, 2, ST_B);
    at(r, 1, 1100);
    rec_mmap(r, 0x7000000, 4096, ST_A);
    rec_sample(r, 1200, 1208, 3, 4096, 9999);
    rec_scan(r, 1250, HL_SCAN_AT_EXIT, 1); // superseded by the next one
    rec_verdict(r, HL_LEAK_DEFINITE, 0x90000, 500, ST_C, HL_FN_MALLOC, 0);
    rec_scan(r, 1300, HL_SCAN_ALL_THREADS | HL_SCAN_AT_EXIT, 3);
    rec_verdict(r, HL_LEAK_REACHABLE, 0x20000, 500, ST_C, HL_FN_MALLOC, 0);
    rec_verdict(r, HL_LEAK_DEFINITE, 0x30000, 700, ST_A, HL_FN_MALLOC, 0);
    rec_verdict(r, HL_LEAK_POSSIBLE, 0x40000, 8, ST_B, HL_FN_MALLOC, 0);
    rec_end(r, 1400);
}

static size_t build_file(uint8_t* out, size_t cap) {
    buf_t* raw = calloc(1, sizeof *raw);
    if (!raw)
        return 0;
    build_records(raw);
    size_t n = trace_file(out, cap, raw);
    free(raw);
    return n;
}

static char tmp_path[64];
static void write_file(const uint8_t* data, size_t len) { write_bytes(tmp_path, data, len); }

typedef struct fixture_s {
    model_t m;
    report_ctx_t* c;
    aggregate_t a;
    int rc;
} fixture_t;

static int quiet; // a failure is expected: do not print it

static int load(fixture_t* f, const ag_opts_t* o) {
    uint8_t file[1 << 16];
    write_file(file, build_file(file, sizeof file));
    memset(f, 0, sizeof *f);
    if (model_load(&f->m, tmp_path) != 0)
        return -1;
    f->c = report_ctx_new(&f->m, NULL);
    char err[256];
    f->rc = aggregate_build(&f->a, f->c, tmp_path, o, err, sizeof err);
    if (f->rc != 0 && !quiet)
        fprintf(stderr, "  aggregate_build: %s\n", err);
    return f->rc;
}

static void unload(fixture_t* f) {
    aggregate_free(&f->a);
    report_ctx_free(f->c);
    model_free(&f->m);
}

TEST(peak_and_sites) {
    fixture_t f;
    ag_opts_t o = {0};
    ASSERT_TRUE(load(&f, &o) == 0);
    const aggregate_t* a = &f.a;
    EXPECT_EQ_U(a->peak_bytes, 1300);
    EXPECT_EQ_U(a->peak_blocks, 3);
    EXPECT_EQ_I(a->peak_time_ns, 500 * TICK_NS);
    EXPECT_EQ_U(a->peak_bytes, f.m.peak_bytes); // the first pass agrees
    EXPECT_EQ_I(a->peak_time_ns, f.m.peak_time_ns);
    ASSERT_TRUE(ag_site_for(a, ST_A) && ag_site_for(a, ST_B) && ag_site_for(a, ST_C));
    EXPECT_EQ_U((*site(a, ST_A)).peak_bytes, 800);
    EXPECT_EQ_U((*site(a, ST_A)).peak_blocks, 2);
    EXPECT_EQ_U((*site(a, ST_B)).peak_bytes, 0);
    EXPECT_EQ_U((*site(a, ST_C)).peak_bytes, 500);
    EXPECT_EQ_U((*site(a, ST_A)).allocations, 2);
    EXPECT_EQ_U((*site(a, ST_A)).bytes, 800);
    EXPECT_EQ_U((*site(a, ST_B)).allocations, 3);
    EXPECT_EQ_U((*site(a, ST_B)).bytes, 1010);
    EXPECT_EQ_U((*site(a, ST_A)).leaked_bytes, 700);
    EXPECT_EQ_U((*site(a, ST_C)).leaked_bytes, 500);
    EXPECT_EQ_U((*site(a, ST_B)).leaked_bytes, 8);
    EXPECT_EQ_U(a->totals.allocations, 7);
    EXPECT_EQ_U(a->totals.bytes, 2374);
    EXPECT_EQ_U(a->totals.frees, 4);
    EXPECT_EQ_U(a->totals.leaked_bytes, 1208);
    EXPECT_EQ_U(a->totals.leaked_blocks, 3);
    EXPECT_EQ_U(a->totals.leaks[HL_LEAK_DEFINITE].bytes, 700);
    EXPECT_EQ_U(a->totals.leaks[HL_LEAK_REACHABLE].bytes, 500);
    EXPECT_EQ_U(a->totals.leaks[HL_LEAK_POSSIBLE].bytes, 8);
    EXPECT_EQ_U(a->mapped_peak, 4096);
    EXPECT_EQ_U(a->rss_peak, 9999);
    // The address map: the last scan's blocks, in its order.
    EXPECT_TRUE(a->has_exit_map);
    ASSERT_TRUE(a->nexit_map == 3);
    EXPECT_EQ_U(a->exit_map[0].addr, 0x20000);
    EXPECT_EQ_U(a->exit_map[0].size, 500);
    EXPECT_EQ_U(a->exit_map[0].kind, HL_LEAK_REACHABLE);
    EXPECT_EQ_U(a->exit_map[2].addr, 0x40000);
    // Sorted by peak: A (800), C (500); B has none at the peak.
    const ag_site_t** v;
    long n = ag_sorted_sites(a, AG_METRIC_PEAK, &v);
    ASSERT_TRUE(n == 2);
    EXPECT_EQ_U(v[0]->stack, ST_A);
    EXPECT_EQ_U(v[1]->stack, ST_C);
    free(v);
    unload(&f);
}

TEST(temporaries_follow_heaptrack) {
    fixture_t f;
    ag_opts_t o = {0};
    ASSERT_TRUE(load(&f, &o) == 0);
    const aggregate_t* a = &f.a;
    EXPECT_EQ_U(a->totals.temporary, 2);
    EXPECT_EQ_U(a->totals.temporary_bytes, 1064);
    EXPECT_EQ_U((*site(a, ST_B)).temporary, 1); // the 1000, not the 2 (T2 allocated in between)
    EXPECT_EQ_U((*site(a, ST_C)).temporary, 1); // the 64
    EXPECT_EQ_U((*site(a, ST_A)).temporary, 0); // freed by another thread
    unload(&f);
}

TEST(histogram_and_threads) {
    fixture_t f;
    ag_opts_t o = {0};
    ASSERT_TRUE(load(&f, &o) == 0);
    const aggregate_t* a = &f.a;
    EXPECT_EQ_U(a->hist[7].count, 2); // [64, 128): 100, 64
    EXPECT_EQ_U(a->hist[7].bytes, 164);
    EXPECT_EQ_U(a->hist[10].count, 2); // [512, 1024): 1000, 700
    EXPECT_EQ_U(a->hist[10].bytes, 1700);
    EXPECT_EQ_U(a->hist[9].count, 1);
    EXPECT_EQ_U(a->hist[2].bytes, 2);
    EXPECT_EQ_U(a->hist[4].bytes, 8);
    uint64_t lo, hi;
    ag_hist_bounds(7, &lo, &hi);
    EXPECT_EQ_U(lo, 64);
    EXPECT_EQ_U(hi, 128);
    const ag_thread_t* t1 = ag_thread_for(a, 1);
    const ag_thread_t* t2 = ag_thread_for(a, 2);
    ASSERT_TRUE(t1 && t2 && a->nthreads == 2 && t1 < t2);
    EXPECT_EQ_U(t1->tid, 111);
    EXPECT_EQ_U(t1->allocations, 4);
    EXPECT_EQ_U(t1->bytes, 1864);
    EXPECT_EQ_U(t1->frees, 2);
    EXPECT_EQ_U(t2->tid, 222);
    EXPECT_EQ_U(t2->allocations, 3);
    EXPECT_EQ_U(t2->bytes, 510);
    EXPECT_EQ_U(t2->frees, 2);
    unload(&f);
}

TEST(timeline_buckets_keep_maxima) {
    fixture_t f;
    ag_opts_t o = {.max_buckets = 7};
    ASSERT_TRUE(load(&f, &o) == 0);
    const aggregate_t* a = &f.a;
    // 0..1400 ticks in at most 7 buckets: width 1400 ticks / 7 + 1 ns.
    EXPECT_EQ_I(a->bucket_ns, 200 * TICK_NS + 1);
    ASSERT_TRUE(a->ntimeline == 7);
    EXPECT_EQ_U(a->timeline[0].heap_bytes, 1100); // 100, 1100
    EXPECT_EQ_U(a->timeline[1].heap_bytes, 1100); // starts at 1100, then 100, 600
    EXPECT_EQ_U(a->timeline[2].heap_bytes, 1300); // 1300, 1200: the peak
    EXPECT_EQ_U(a->timeline[2].heap_blocks, 3);
    EXPECT_EQ_I(a->timeline[2].time_ns, 2 * (200 * TICK_NS + 1));
    EXPECT_EQ_U(a->timeline[3].heap_bytes, 1264);
    EXPECT_EQ_U(a->timeline[4].heap_bytes, 1210);
    EXPECT_EQ_U(a->timeline[5].mapped_bytes, 4096);
    EXPECT_EQ_U(a->timeline[5].rss_bytes, 9999);
    EXPECT_EQ_U(a->timeline[6].heap_bytes, 1208); // carried to the end
    EXPECT_EQ_U(a->timeline[6].rss_bytes, 9999);
    unload(&f);
    // Never more points than asked, whatever the count.
    for (size_t nb = 1; nb < 40; nb++) {
        ag_opts_t o2 = {.max_buckets = nb};
        ASSERT_TRUE(load(&f, &o2) == 0);
        EXPECT_TRUE(f.a.ntimeline >= 1 && f.a.ntimeline <= nb);
        uint64_t max = 0;
        for (size_t i = 0; i < f.a.ntimeline; i++)
            max = f.a.timeline[i].heap_bytes > max ? f.a.timeline[i].heap_bytes : max;
        EXPECT_EQ_U(max, 1300);
        unload(&f);
    }
}

TEST(window_and_filter) {
    fixture_t f;
    ag_opts_t o = {.has_from = 1, .from_ns = 450 * TICK_NS, .has_to = 1, .to_ns = 1050 * TICK_NS};
    ASSERT_TRUE(load(&f, &o) == 0);
    const aggregate_t* a = &f.a;
    EXPECT_EQ_U(a->totals.allocations, 4); // 700, 64, 2, 8
    EXPECT_EQ_U(a->totals.bytes, 774);
    EXPECT_EQ_U(a->totals.temporary, 1);   // the 64; the 1000 began before the window
    EXPECT_EQ_U(a->peak_bytes, 1300);
    EXPECT_EQ_I(a->peak_time_ns, 500 * TICK_NS);
    EXPECT_EQ_U(a->totals.leaked_bytes, 708); // allocated in the window, live at the end
    unload(&f);

    // A temporary counts when it was made in the window too: the 1000 was made before 250.
    ag_opts_t cut = {.has_from = 1, .from_ns = 250 * TICK_NS};
    ASSERT_TRUE(load(&f, &cut) == 0);
    EXPECT_EQ_U(f.a.totals.frees, 4);
    EXPECT_EQ_U(f.a.totals.temporary, 1);
    EXPECT_EQ_U(f.a.totals.temporary_bytes, 64);
    unload(&f);

    ag_opts_t late = {.has_from = 1, .from_ns = 550 * TICK_NS};
    ASSERT_TRUE(load(&f, &late) == 0);
    EXPECT_EQ_U(f.a.peak_bytes, 1264); // the highest level reached inside the window
    EXPECT_EQ_I(f.a.peak_time_ns, 700 * TICK_NS);
    EXPECT_EQ_U((*site(&f.a, ST_A)).peak_bytes, 700);
    EXPECT_EQ_U((*site(&f.a, ST_C)).peak_bytes, 564);
    unload(&f);

    ag_opts_t none = {.filter = "^nothing_is_called_this$"};
    ASSERT_TRUE(load(&f, &none) == 0);
    EXPECT_EQ_U(f.a.totals.allocations, 0);
    EXPECT_EQ_U(f.a.peak_bytes, 0);
    unload(&f);

    ag_opts_t bad = {.filter = "(unclosed"};
    quiet = 1;
    EXPECT_TRUE(load(&f, &bad) != 0);
    quiet = 0;
    unload(&f);
}

// The views of a pass that kept no call site: empty lists, said so. (The JSON view did not free
// the empty ranking: the fuzzer's leak check found it; make check-asan runs this under LSan.)
TEST(views_with_no_site_kept) {
    fixture_t f;
    ag_opts_t none = {.filter = "^nothing_is_called_this$"};
    ASSERT_TRUE(load(&f, &none) == 0);
    char* buf = NULL;
    size_t len = 0;
    FILE* out = open_memstream(&buf, &len);
    ASSERT_TRUE(out != NULL);
    ag_view_opts_t v = {.summary = 1, .top = 5, .sort = AG_METRIC_BYTES};
    ag_views_json(out, f.c, &f.a, &v);
    ag_views_text(out, f.c, &f.a, &v);
    fclose(out);
    EXPECT_TRUE(buf && strstr(buf, "\"sites\": [\n  ]") != NULL);
    EXPECT_TRUE(buf && strstr(buf, "(no call site has any)") != NULL);
    free(buf);
    unload(&f);
}

TEST(truncated_traces_do_not_crash) {
    uint8_t file[1 << 16];
    size_t n = build_file(file, sizeof file);
    for (size_t cut = 0; cut < n; cut++) {
        write_file(file, cut);
        model_t m;
        if (model_load(&m, tmp_path) == 0) {
            report_ctx_t* c = report_ctx_new(&m, NULL);
            aggregate_t a;
            char err[256];
            ag_opts_t o = {0};
            if (aggregate_build(&a, c, tmp_path, &o, err, sizeof err) == 0)
                EXPECT_TRUE(a.ntimeline >= 1);
            aggregate_free(&a);
            report_ctx_free(c);
        }
        model_free(&m);
    }
}

TEST(crc32_and_stored_gzip) {
    EXPECT_EQ_U(ag_crc32(0, "123456789", 9), 0xCBF43926u);
    EXPECT_EQ_U(ag_crc32(ag_crc32(0, "1234", 4), "56789", 5), 0xCBF43926u);
    // 70000 bytes: two stored blocks (65535 + 4465), then CRC and size.
    size_t len = 70000;
    uint8_t* data = malloc(len);
    for (size_t i = 0; i < len; i++)
        data[i] = (uint8_t)(i * 7);
    char* out = NULL;
    size_t olen = 0;
    FILE* f = open_memstream(&out, &olen);
    EXPECT_EQ_I(ag_write_gzip_stored(f, data, len), 0);
    fclose(f);
    ASSERT_TRUE(olen == 10 + 5 + 65535 + 5 + 4465 + 8);
    const uint8_t* p = (const uint8_t*)out;
    EXPECT_EQ_U(p[0], 0x1f);
    EXPECT_EQ_U(p[1], 0x8b);
    EXPECT_EQ_U(p[2], 8);
    EXPECT_EQ_U(p[10], 0); // not final, stored
    EXPECT_EQ_U(p[11] | p[12] << 8, 65535);
    EXPECT_EQ_U((p[13] | p[14] << 8) ^ 0xffff, 65535);
    EXPECT_TRUE(memcmp(p + 15, data, 65535) == 0);
    const uint8_t* b2 = p + 15 + 65535;
    EXPECT_EQ_U(b2[0], 1); // final
    EXPECT_EQ_U(b2[1] | b2[2] << 8, 4465);
    const uint8_t* tr = p + olen - 8;
    uint32_t crc = (uint32_t)tr[0] | (uint32_t)tr[1] << 8 | (uint32_t)tr[2] << 16 |
                   (uint32_t)tr[3] << 24;
    EXPECT_EQ_U(crc, ag_crc32(0, data, len));
    EXPECT_EQ_U(tr[4] | tr[5] << 8 | tr[6] << 16, len);
    free(out);
    free(data);
}

// FREE_EXPLICIT ahead of its ALLOC (the writer could not name the site yet): the level dips
// below zero for an instant, which no timeline point, peak or site shows.
TEST(free_explicit_ahead_of_its_alloc) {
    buf_t* r = calloc(1, sizeof *r);
    ASSERT_TRUE(r != NULL);
    rec_info(r, 42);
    rec_stack(r, ST_A, 0, 0x1000);
    rec_stack(r, ST_B, 0, 0x2000);
    at(r, 2, 100);
    rec_free_explicit(r, HL_FN_FREE, 1, 40, ST_B);
    alloc_rec(r, 1, 100, 8, ST_A);  // -32
    alloc_rec(r, 1, 100, 40, ST_B); // 8
    alloc_rec(r, 1, 200, 100, ST_A);
    at(r, 1, 300);
    rec_free_temp(r, HL_FN_FREE, 100, ST_A);
    rec_end(r, 400);
    uint8_t file[1 << 12];
    write_file(file, trace_file(file, sizeof file, r));
    free(r);
    model_t m;
    ASSERT_TRUE(model_load(&m, tmp_path) == 0);
    report_ctx_t* c = report_ctx_new(&m, NULL);
    aggregate_t a;
    ag_opts_t o = {.max_buckets = 4};
    char err[256];
    ASSERT_TRUE(aggregate_build(&a, c, tmp_path, &o, err, sizeof err) == 0);
    EXPECT_EQ_U(a.peak_bytes, 108);
    EXPECT_EQ_I(a.peak_time_ns, 200 * TICK_NS);
    for (size_t i = 0; i < a.ntimeline; i++)
        EXPECT_TRUE(a.timeline[i].heap_bytes <= 108);
    EXPECT_EQ_U(a.timeline[0].heap_bytes, 8);
    EXPECT_EQ_U((*site(&a, ST_B)).peak_bytes, 0);
    EXPECT_EQ_U((*site(&a, ST_B)).frees, 1);
    EXPECT_EQ_U((*site(&a, ST_B)).leaked_bytes, 0);
    EXPECT_EQ_U((*site(&a, ST_A)).leaked_bytes, 8);
    EXPECT_EQ_U((*site(&a, ST_A)).peak_bytes, 108);
    EXPECT_EQ_U(a.totals.temporary, 2); // the explicit one's flag, and the FREE_TEMP
    EXPECT_EQ_U(a.totals.leaks[HL_KIND_UNSCANNED].bytes, 8);
    aggregate_free(&a);
    report_ctx_free(c);
    model_free(&m);
}

// With a window, which of a site's blocks live at the end were made in it is estimated: the
// youngest go first. Here one site: two blocks before the window, two inside, one after.
TEST(leaked_in_a_window_takes_the_young_first) {
    buf_t* r = calloc(1, sizeof *r);
    ASSERT_TRUE(r != NULL);
    rec_info(r, 42);
    rec_stack(r, ST_A, 0, 0x1000);
    alloc_rec(r, 1, 100, 16, ST_A);
    alloc_rec(r, 1, 110, 16, ST_A);
    alloc_rec(r, 1, 500, 16, ST_A);
    alloc_rec(r, 1, 510, 16, ST_A);
    at(r, 1, 600);
    rec_free(r, HL_FN_FREE, 16, ST_A); // one of the two made inside
    alloc_rec(r, 1, 900, 16, ST_A);
    at(r, 1, 950);
    rec_free(r, HL_FN_FREE, 16, ST_A); // the one made after
    rec_scan(r, 1000, HL_SCAN_AT_EXIT, 3);
    rec_verdict(r, HL_LEAK_DEFINITE, 0x100, 16, ST_A, HL_FN_MALLOC, 0);
    rec_verdict(r, HL_LEAK_DEFINITE, 0x200, 16, ST_A, HL_FN_MALLOC, 0);
    rec_verdict(r, HL_LEAK_REACHABLE, 0x300, 16, ST_A, HL_FN_MALLOC, 0);
    rec_end(r, 1100);
    uint8_t file[1 << 12];
    write_file(file, trace_file(file, sizeof file, r));
    free(r);
    model_t m;
    ASSERT_TRUE(model_load(&m, tmp_path) == 0);
    report_ctx_t* c = report_ctx_new(&m, NULL);
    aggregate_t a;
    char err[256];
    ag_opts_t all = {0};
    ASSERT_TRUE(aggregate_build(&a, c, tmp_path, &all, err, sizeof err) == 0);
    EXPECT_EQ_U(a.totals.leaked_blocks, 3); // no window: exact
    EXPECT_EQ_U(a.totals.leaks[HL_LEAK_DEFINITE].blocks, 2);
    EXPECT_EQ_U(a.totals.leaks[HL_LEAK_REACHABLE].blocks, 1);
    EXPECT_TRUE(a.has_exit_map);
    ASSERT_TRUE(a.nexit_map == 3);
    EXPECT_EQ_U(a.exit_map[2].addr, 0x300);
    EXPECT_EQ_U(a.exit_map[2].kind, HL_LEAK_REACHABLE);
    aggregate_free(&a);
    ag_opts_t win = {.has_from = 1, .from_ns = 400 * TICK_NS, .has_to = 1, .to_ns = 800 * TICK_NS};
    ASSERT_TRUE(aggregate_build(&a, c, tmp_path, &win, err, sizeof err) == 0);
    EXPECT_EQ_U(a.totals.allocations, 2);
    EXPECT_EQ_U(a.totals.leaked_blocks, 1);
    EXPECT_EQ_U(a.totals.leaked_bytes, 16);
    const md_kind_total_t* lk = a.totals.leaks;
    EXPECT_EQ_U(lk[HL_LEAK_DEFINITE].blocks + lk[HL_LEAK_REACHABLE].blocks, 1);
    aggregate_free(&a);
    report_ctx_free(c);
    model_free(&m);
}

TEST(parse_times) {
    int64_t t = 0;
    EXPECT_EQ_I(ag_parse_time("1500", &t), 0);
    EXPECT_EQ_I(t, 1500);
    EXPECT_EQ_I(ag_parse_time("1.5ms", &t), 0);
    EXPECT_EQ_I(t, 1500000);
    EXPECT_EQ_I(ag_parse_time("2s", &t), 0);
    EXPECT_EQ_I(t, 2000000000);
    EXPECT_EQ_I(ag_parse_time("20us", &t), 0);
    EXPECT_EQ_I(t, 20000);
    EXPECT_TRUE(ag_parse_time("-1", &t) != 0);
    EXPECT_TRUE(ag_parse_time("ms", &t) != 0);
    EXPECT_TRUE(ag_parse_time("3 parsecs", &t) != 0);
}

// The pass fed by the model's own reading (aggregate_begin/record/end, one reading for the HTML
// page) gives aggregate_build's numbers: sites, totals, histogram, threads, peak, exit map; its
// timeline keeps the maxima in at most max_buckets buckets of a doubled width.
TEST(streamed_pass_matches_two_passes) {
    size_t counts[] = {1, 2, 3, 7, 40, 1000};
    for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
        fixture_t f;
        ag_opts_t o = {.max_buckets = counts[k]};
        ASSERT_TRUE(load(&f, &o) == 0);
        model_t m;
        aggregate_t s;
        ASSERT_TRUE(aggregate_begin(&s, &m, counts[k]) == 0);
        model_observer_t obs = {.record = aggregate_record, .record_arg = &s};
        ASSERT_TRUE(model_load_observed(&m, tmp_path, &obs) == 0);
        char err[256];
        ASSERT_TRUE(aggregate_end(&s, err, sizeof err) == 0);
        const aggregate_t* a = &f.a;
        EXPECT_EQ_U(s.nsites, a->nsites);
        for (size_t i = 0; i < s.nsites && i < a->nsites; i++) {
            const ag_site_t *x = &s.sites[i], *y = &a->sites[i];
            EXPECT_TRUE(x->stack == y->stack && x->allocations == y->allocations &&
                        x->bytes == y->bytes && x->frees == y->frees &&
                        x->peak_bytes == y->peak_bytes && x->peak_blocks == y->peak_blocks &&
                        x->leaked_bytes == y->leaked_bytes && x->temporary == y->temporary &&
                        x->leaked_blocks == y->leaked_blocks &&
                        x->temporary_bytes == y->temporary_bytes);
        }
        EXPECT_TRUE(!memcmp(&s.totals, &a->totals, sizeof s.totals));
        EXPECT_TRUE(!memcmp(s.hist, a->hist, sizeof s.hist));
        EXPECT_EQ_U(s.nthreads, a->nthreads);
        for (size_t i = 0; i < s.nthreads && i < a->nthreads; i++)
            EXPECT_TRUE(s.threads[i].index == a->threads[i].index &&
                        s.threads[i].tid == a->threads[i].tid &&
                        s.threads[i].allocations == a->threads[i].allocations &&
                        s.threads[i].temporary == a->threads[i].temporary);
        EXPECT_EQ_I(s.peak_time_ns, a->peak_time_ns);
        EXPECT_EQ_U(s.peak_bytes, 1300);
        EXPECT_EQ_U(s.peak_blocks, a->peak_blocks);
        EXPECT_EQ_U(s.mapped_peak, a->mapped_peak);
        EXPECT_EQ_U(s.rss_peak, a->rss_peak);
        EXPECT_EQ_I(s.end_ns, a->end_ns);
        EXPECT_TRUE(s.has_exit_map && s.nexit_map == a->nexit_map &&
                    s.exit_map_total == a->exit_map_total);
        EXPECT_TRUE(s.ntimeline >= 1 && s.ntimeline <= counts[k]);
        EXPECT_TRUE(s.bucket_ns >= AG_STREAM_BUCKET_NS && s.bucket_ns % AG_STREAM_BUCKET_NS == 0);
        // enough buckets to cover the run, never twice too many
        EXPECT_TRUE((int64_t)s.ntimeline * s.bucket_ns > s.end_ns);
        EXPECT_TRUE(s.bucket_ns == AG_STREAM_BUCKET_NS ||
                    (int64_t)counts[k] * (s.bucket_ns / 2) <= s.end_ns);
        uint64_t max = 0, rss = 0;
        for (size_t i = 0; i < s.ntimeline; i++) {
            const ag_point_t* pt = &s.timeline[i];
            EXPECT_EQ_I(pt->time_ns, (int64_t)i * s.bucket_ns);
            if (pt->heap_bytes > max)
                max = pt->heap_bytes;
            if (s.peak_time_ns >= pt->time_ns && s.peak_time_ns < pt->time_ns + s.bucket_ns)
                EXPECT_TRUE(pt->heap_bytes == 1300 && pt->heap_blocks == 3);
            rss = pt->rss_bytes > rss ? pt->rss_bytes : rss;
        }
        EXPECT_EQ_U(max, 1300);
        EXPECT_EQ_U(rss, 9999);
        EXPECT_TRUE(s.timeline[s.ntimeline - 1].heap_bytes >= 1208); // the end level carried
        aggregate_free(&s);
        model_free(&m);
        unload(&f);
    }
}

int main(void) {
    snprintf(tmp_path, sizeof tmp_path, "/tmp/test_aggregate.%d.hl", (int)getpid());
    RUN_TEST(peak_and_sites);
    RUN_TEST(temporaries_follow_heaptrack);
    RUN_TEST(histogram_and_threads);
    RUN_TEST(timeline_buckets_keep_maxima);
    RUN_TEST(window_and_filter);
    RUN_TEST(views_with_no_site_kept);
    RUN_TEST(truncated_traces_do_not_crash);
    RUN_TEST(crc32_and_stored_gzip);
    RUN_TEST(parse_times);
    RUN_TEST(free_explicit_ahead_of_its_alloc);
    RUN_TEST(leaked_in_a_window_takes_the_young_first);
    RUN_TEST(streamed_pass_matches_two_passes);
    unlink(tmp_path);
    return TEST_SUMMARY();
}
