// SPDX-License-Identifier: MIT
// fuzz_trace.c - libFuzzer target: any bytes as a trace, through everything that reads one.
// The input is made a trace file in memory (a memfd, read by path as the CLI reads a file), then
// loaded into a model, symbolized, aggregated and written in every report format (text, JSON,
// SARIF, HTML, views, collapsed stacks, flame graph SVG, pprof, massif, Valgrind's text and XML)
// to /dev/null; the CLI's own `report` (views in the JSON) and `diff` run on it too. A trace the
// CLI refuses as corrupt gets no reports, as from the CLI. Every JSON document written (report,
// views, SARIF, the CLI's report and diff) must be JSON in strict UTF-8 (json_check.h), or the
// target stops as on a crash.
//
// Two kinds of input, so that mutations reach the records and not only the framing:
// - a file that starts with "HLTRACE\0" is the trace as it is (header, chunks, zstd, checksums);
// - anything else is the records themselves: chunks of raw record bytes, each a varint length
//   and its bytes (tests/fuzz/unpack.c makes these from real traces), which the target frames
//   as the agent does: one zstd stream, a flushed part per chunk, each with its checksum. The
//   diff's old side is then the trace of the first half of the chunks.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "../../src/analyze/aggregate.h"
#include "../../src/analyze/json_check.h"
#include "../../src/analyze/report.h"
#include "../../src/analyze/report_html.h"
#include "../../src/analyze/report_sarif.h"
#include "../../src/analyze/report_valgrind.h"
#include "frame.h"

int LLVMFuzzerInitialize(int* argc, char*** argv);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int heaplens_main(int argc, char** argv); // src/cli/main.c, built with -Dmain=heaplens_main

// Chunks of one input at most: the agent writes one per 8 ms, and more only repeat the framing.
#define FZ_CHUNKS_MAX 64

static FILE* devnull;
static fr_writer_t framer;
static suppressions_t* supp;
static vsupp_t* vsupp;
// Where the traces' modules are looked up: HEAPLENS_FUZZ_SYSROOT (tests/fuzz/run.sh makes one
// holding the test programs alone), else nowhere. Symbolizing libc from its separate debug info
// for every input would make the fuzzer a hundred times slower and test only libdw.
static char* sysroot;

typedef struct trace_file_s {
    int fd;
    char path[64];
} trace_file_t;
static trace_file_t traces[2]; // [0] the diff's old side, [1] the input's trace
static trace_file_t cli_json;  // the CLI's --json output

static int memfd(trace_file_t* t, const char* name) {
    t->fd = memfd_create(name, MFD_CLOEXEC);
    snprintf(t->path, sizeof t->path, "/proc/self/fd/%d", t->fd);
    return t->fd;
}

// A small file of the given text, for the suppression loaders (they read paths).
static const char* text_file(const char* name, const char* text) {
    trace_file_t t;
    if (memfd(&t, name) < 0 || write(t.fd, text, strlen(text)) != (ssize_t)strlen(text))
        return NULL;
    static char paths[2][64];
    static int n;
    char* p = paths[n++ & 1];
    snprintf(p, 64, "%s", t.path);
    return p;
}

int LLVMFuzzerInitialize(int* argc, char*** argv) {
    (void)argc, (void)argv;
    // Every input is a new trace: answers kept on disk would only grow a file per run and make
    // one input's result depend on the inputs before it.
    setenv("HEAPLENS_SYMBOL_CACHE", "off", 1);
    devnull = fopen("/dev/null", "w");
    // The CLI's text goes to stdout: keep it out of the fuzzer's log. (Its one-line errors go
    // to stderr; run the fuzzer with -close_fd_mask=2 to hide them.)
    int fd = open("/dev/null", O_WRONLY);
    if (fd >= 0)
        dup2(fd, 1);
    if (!devnull || memfd(&traces[0], "old.hl") < 0 || memfd(&traces[1], "new.hl") < 0 ||
        memfd(&cli_json, "out.json") < 0) {
        fprintf(stderr, "fuzz_trace: cannot set up\n");
        abort();
    }
    const char* root = getenv("HEAPLENS_FUZZ_SYSROOT");
    sysroot = strdup(root && root[0] ? root : "/nonexistent");
    char err[256];
    const char* ls = text_file("leak.supp", "leak:main\nleak:*alloc*\nleak:libc.so*\n");
    supp = ls ? suppressions_load(ls, err, sizeof err) : NULL;
    const char* vs = text_file("vg.supp", "{\n  any-leak\n  Memcheck:Leak\n  match-leak-kinds: "
                                          "definite,possible\n  ...\n  fun:main\n}\n");
    vsupp = vs ? vsupp_load(NULL, vs, err, sizeof err) : NULL;
    if (!supp || !vsupp) { // the target would test less than it says
        fprintf(stderr, "fuzz_trace: the suppressions do not load: %s\n", err);
        abort();
    }
    return 0;
}

static int rewind_file(trace_file_t* t) {
    return ftruncate(t->fd, 0) == 0 && lseek(t->fd, 0, SEEK_SET) == 0 ? 0 : -1;
}

static void must_be_json(const char* what, const char* buf, size_t len) {
    json_check_t jc = {0};
    if (json_check(buf, len, &jc) != 0) {
        fprintf(stderr, "fuzz_trace: the %s is not JSON: %s at byte %zu of %zu\n", what, jc.error,
                jc.error_at, len);
        abort();
    }
}

typedef void (*json_writer_t)(FILE* out, report_ctx_t* ctx, const report_opts_t* ro,
                              const aggregate_t* a);

// What fn writes, into memory and checked.
static void json_of(const char* what, json_writer_t fn, report_ctx_t* ctx, const report_opts_t* ro,
                    const aggregate_t* a) {
    char* buf = NULL;
    size_t len = 0;
    FILE* mem = open_memstream(&buf, &len);
    if (!mem)
        return;
    fn(mem, ctx, ro, a);
    if (fclose(mem) == 0)
        must_be_json(what, buf, len);
    free(buf);
}

static void w_report(FILE* out, report_ctx_t* ctx, const report_opts_t* ro, const aggregate_t* a) {
    (void)a;
    report_json(out, ctx, ro);
}
static void w_sarif(FILE* out, report_ctx_t* ctx, const report_opts_t* ro, const aggregate_t* a) {
    (void)a;
    report_sarif(out, ctx, ro, "fuzz");
}
static void w_views(FILE* out, report_ctx_t* ctx, const report_opts_t* ro, const aggregate_t* a) {
    (void)ro;
    ag_view_opts_t v = {1, 1, 1, 1, 5, AG_METRIC_PEAK, 1, 0};
    fputs("{\"views\": true", out); // the keys come each after a comma
    ag_views_json(out, ctx, a, &v);
    fputs("}", out);
}

// The CLI's JSON output (cli_json's file), checked.
static void cli_json_check(const char* what) {
    struct stat st;
    if (fstat(cli_json.fd, &st) != 0 || st.st_size == 0)
        return; // not written: the CLI said why
    char* buf = malloc((size_t)st.st_size);
    if (buf && pread(cli_json.fd, buf, (size_t)st.st_size, 0) == st.st_size)
        must_be_json(what, buf, (size_t)st.st_size);
    free(buf);
}

// Every report of one loaded trace, to /dev/null.
static void reports(report_ctx_t* ctx, const char* path) {
    report_opts_t ro = {
        .show_kinds = 0x1f,
        .max_records = 25,
        .supp = supp,
        .trace_path = path,
        .exit_status = -1,
    };
    report_text(devnull, ctx, &ro);
    json_of("JSON report", w_report, ctx, &ro, NULL);
    json_of("SARIF log", w_sarif, ctx, &ro, NULL);
    char err[512];
    report_html_trace(devnull, ctx, &ro, path, err, sizeof err);

    aggregate_t a;
    memset(&a, 0, sizeof a);
    ag_opts_t ao = {.max_buckets = 50, .growth = 1};
    if (aggregate_build(&a, ctx, path, &ao, err, sizeof err) == 0) {
        for (int metric = 0; metric < AG_METRIC_COUNT; metric++) {
            ag_view_opts_t v = {1, 1, 1, 1, 5, metric, 1, 1000};
            ag_views_text(devnull, ctx, &a, &v);
            ag_write_collapsed(devnull, ctx, &a, metric);
            ag_write_flamegraph(devnull, ctx, &a, metric, "fuzz <&\">");
        }
        json_of("views' JSON", w_views, ctx, &ro, &a);
        ag_write_pprof(devnull, ctx, &a);
        ag_write_massif(devnull, ctx, &a);
    }
    aggregate_free(&a);
    // A window and a filter: the pass's other branches.
    memset(&a, 0, sizeof a);
    ag_opts_t win = {.max_buckets = 7, .has_from = 1, .from_ns = 1000, .has_to = 1,
                     .to_ns = 50000000, .filter = "alloc|main|^_Z", .growth = 1};
    if (aggregate_build(&a, ctx, path, &win, err, sizeof err) == 0) {
        ag_view_opts_t v = {1, 1, 1, 1, 3, AG_METRIC_LEAKED, 1, 0};
        ag_views_text(devnull, ctx, &a, &v);
        ag_write_massif(devnull, ctx, &a);
    }
    aggregate_free(&a);

    vg_opts_t vo = {
        .leak_check = VG_LEAK_CHECK_FULL,
        .show_kinds = 0xf,
        .error_kinds = 0x5,
        .num_callers = 12,
        .gen_suppressions = 1,
        .verbosity = 2,
        .show_counts = 1,
        .supp = vsupp,
        .exit_status = -1,
        .tool_version = "heaplens fuzz",
    };
    vg_report_t* r = vg_report_new(ctx, &vo);
    if (r) {
        vg_report_text(devnull, r);
        vg_report_xml(devnull, r);
        vg_report_errors(r);
        vg_report_free(r);
    }
}

static void analyze(const char* path) {
    model_t m;
    int rc = model_load(&m, path);
    if (rc == 0 && !m.read.is_corrupt) { // the CLI refuses a corrupt trace (cli_trace_open)
        model_is_complete(&m);
        model_incomplete_reason(&m);
        report_ctx_t* ctx = report_ctx_new(&m, sysroot);
        if (ctx) {
            reports(ctx, path);
            report_ctx_free(ctx);
        }
    }
    model_free(&m);
}

static void cli(char** argv) {
    int argc = 0;
    while (argv[argc])
        argc++;
    heaplens_main(argc, argv);
    fflush(stdout);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    int is_file = size >= 8 && memcmp(data, HL_TRACE_MAGIC, 8) == 0;
    const char* old = traces[1].path;
    if (rewind_file(&traces[1]) != 0)
        return 0;
    if (is_file) {
        if (fr_put(traces[1].fd, data, size) != 0)
            return 0;
    } else {
        fr_span_t c[FZ_CHUNKS_MAX];
        size_t n = fr_split(data, size, c, FZ_CHUNKS_MAX);
        if (fr_trace(&framer, traces[1].fd, c, n) != 0)
            return 0;
        if (n >= 2 && rewind_file(&traces[0]) == 0 &&
            fr_trace(&framer, traces[0].fd, c, n / 2) == 0)
            old = traces[0].path;
    }
    const char* path = traces[1].path;
    analyze(path);
    if (rewind_file(&cli_json) == 0) {
        cli((char*[]){"heaplens", "report", "-q", "--summary", "--top", "5", "--histogram",
                      "--timeline", "--threads", "--json", cli_json.path, "--sysroot", sysroot,
                      (char*)path, NULL});
        cli_json_check("report --json with views");
    }
    if (rewind_file(&cli_json) == 0) {
        cli((char*[]){"heaplens", "diff", "--json", cli_json.path, "--html", "/dev/null", "--sort",
                      "peak", "--sysroot", sysroot, (char*)old, (char*)path, NULL});
        cli_json_check("diff --json");
    }
    return 0;
}
