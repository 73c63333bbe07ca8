// SPDX-License-Identifier: MIT
// main.c - heaplens: subcommand dispatch, usage, and the shared report options.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../analyze/report_html.h"
#include "../analyze/report_sarif.h"
#include "../analyze/aggregate.h"
#include "cli.h"
#include "outfile.h"

void cli_error(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("heaplens: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

// The options of run and report that shape the report, for both usages.
static const char report_options_help[] =
    "report options:\n"
    "  --json FILE              write the machine report ('-' for stdout)\n"
    "  --html FILE              write a self-contained HTML report (chart, flame graph)\n"
    "  --sarif FILE             write SARIF 2.1.0 (code scanning): leak records, heap errors\n"
    "  --show-leak-kinds=LIST   definite,indirect,possible,reachable or all\n"
    "                           (default definite,indirect,possible)\n"
    "  --suppressions=FILE      LeakSanitizer-style leak:PATTERN lines\n"
    "  --error-exitcode=N       exit N when leaks (definite, indirect) or heap errors exist\n"
    "  --sysroot DIR            look up the traced binaries under DIR\n"
    "  --debug-dir DIR          separate debug information under DIR (by build-id:\n"
    "                           DIR/.build-id/xx/rest.debug); may be repeated\n"
    "  -q, --quiet              no report on stderr\n";

void cli_usage_run(FILE* out) {
    fputs("usage: heaplens run [options] -- PROGRAM [ARGS...]\n"
          "Runs PROGRAM with the agent preloaded, and reports on its heap when it ends.\n"
          "run options:\n"
          "  -o, --output FILE        trace file (default heaplens.PROG.PID.hl; %p pid, %e program)\n"
          "  -d, --depth N            frames per backtrace (default 32; the stack of a release,\n"
          "                           kept to name it in a double free, at most 12)\n"
          "  --guard=N                guard bytes after each block to catch overruns (default 8;\n"
          "                           0 leaves the allocator's layout untouched)\n"
          "  --redzone=N              N bytes of red zone before and after each block (the one\n"
          "                           after is the guard); an underrun or overrun is reported\n"
          "                           at release, realloc or exit with the bytes that changed\n"
          "  --paint=alloc:B,free:B   fill new blocks with byte B (calloc's stay zero) and\n"
          "                           released ones with another; either half alone\n"
          "  --hoard=SIZE             hold released blocks back from reuse, first in first out,\n"
          "                           up to SIZE bytes (K, M, G), painted (0xDD unless --paint\n"
          "                           free: says): a write to one is reported when it leaves\n"
          "                           the hoard or at exit\n"
          "  --guard-pages=RATE       place allocations of up to a page (1: every one, 1/N:\n"
          "                           one in N) against an inaccessible page, released ones\n"
          "                           kept inaccessible a while: a read or write past the end\n"
          "                           or after release is reported where it happens (stack,\n"
          "                           address, read or write), and the program goes on\n"
          "  --guard-sites=REGEX      only allocations whose stack passes through a function\n"
          "                           matching REGEX go on guard pages (every one, or one in N\n"
          "                           of them with --guard-pages=1/N); names looked up in the\n"
          "                           program's, its libraries' and the objects in its\n"
          "                           directory, LD_LIBRARY_PATH and run path\n"
          "  --guard-pages-before     the guard page before each such block (underruns), the\n"
          "                           block at the start of its page\n"
          "  --guard-pages-abort      after reporting such a fault, end the program with\n"
          "                           SIGSEGV, as the access would have without heaplens\n"
          "  --sample-interval=MS     heap/RSS sample period (default 10)\n"
          "  --allocator-stats[=MS]   sample the allocator's own figures (glibc mallinfo2 and\n"
          "                           malloc_info: arena, in use, free, mmap'd, per arena) and\n"
          "                           VmRSS, VmHWM, VmSwap, RssAnon every MS ms (default 100),\n"
          "                           for report --timeline and the page\n"
          "  --remote ADDR            send the trace to a collector (heaplens server) at\n"
          "                           unix:PATH or tcp:HOST:PORT instead of a file; if it cannot\n"
          "                           be reached, one line, and the trace goes to the file\n"
          "  --remote-token FILE      the collector's secret (a 0600 file), sent first\n"
          "  --no-follow              do not trace forked children or exec'd programs (and keep\n"
          "                           heaplens out of their environment)\n"
          "  --no-scan                skip the reachability scan at exit\n"
          "  --no-control             no control socket (heaplens shell cannot reach it)\n"
          "  --wait                   start the program only once `heaplens shell PID` connects\n"
          "  --alert-growth R         while it runs, each call site whose live bytes rose in each\n"
          "                           quarter of the last window by R bytes/s or more, once; after\n"
          "                           the report, those of the whole run\n"
          "  --alert-window S         that window, in seconds (default 60)\n"
          "  --no-release-stacks      do not unwind at free (faster; a double free then names\n"
          "                           only the allocation and the second release)\n"
          "  -h, --help               this help\n",
          out);
    fputs(report_options_help, out);
}

void cli_usage_report(FILE* out) {
    fputs("usage: heaplens report [options] TRACE\n"
          "The report of a trace heaplens run wrote, its views, and files other tools read.\n",
          out);
    fputs(report_options_help, out);
    fputs("report views (text on stdout, or keys of the --json object):\n"
          "  --summary                totals, peak and when, leaks by kind, temporary allocations\n"
          "  --top N                  the N biggest call sites, with their stacks\n"
          "  --sort KEY               rank call sites by allocations, bytes (default), peak,\n"
          "                           leaked or temporary\n"
          "  --histogram              allocation sizes in power-of-two buckets\n"
          "  --timeline               heap, mapped and RSS bytes over time (and the allocator's\n"
          "                           figures of run --allocator-stats, with RSS - live heap)\n"
          "  --threads                allocations, bytes and frees per thread\n"
          "  --growth                 call sites whose live bytes rose in each quarter of the\n"
          "                           window (progressive leaks)\n"
          "  --growth-rate R          ... and by at least R bytes per second\n"
          "  --from T, --to T         count only events in this window (ns; or us, ms, s suffix)\n"
          "  --filter REGEX           only call sites with a function matching (POSIX extended)\n"
          "  --buckets N              timeline points at most (default 1000)\n"
          "report files ('-' for stdout):\n"
          "  --collapsed FILE         folded stacks \"main;f;g VALUE\" (flamegraph.pl, speedscope)\n"
          "  --metric M               what --collapsed and --flamegraph count: allocations, bytes\n"
          "                           (default), peak, leaked or temporary\n"
          "  --flamegraph FILE.svg    a standalone SVG flame graph\n"
          "  --pprof FILE.pb.gz       pprof profile (alloc/inuse objects and space)\n"
          "  --massif FILE            Valgrind massif format, for ms_print and massif-visualizer\n"
          "  -h, --help               this help\n",
          out);
}

void cli_usage_html(FILE* out) {
    fputs("usage: heaplens html REPORT.json [-o PAGE.html]\n"
          "The HTML page of a JSON report (heaplens run/report --json, heaplens diff --json).\n"
          "  -o, --output FILE        the page (default '-', stdout)\n"
          "  -h, --help               this help\n",
          out);
}

static void usage(FILE* out) {
    fputs("usage: heaplens run [options] -- PROGRAM [ARGS...]\n"
          "       heaplens report [options] TRACE\n"
          "       heaplens diff [options] OLD.hl NEW.hl\n"
          "       heaplens html REPORT.json [-o PAGE.html]\n"
          "       heaplens memcheck [valgrind options] PROGRAM [ARGS...]\n"
          "       heaplens server --listen ADDR [-o DIR] [--token FILE]   (the collector)\n"
          "       heaplens shell PID       (talk to a traced process while it runs)\n"
          "       heaplens attach [options] PID   (trace a running process from now on)\n"
          "       heaplens detach [options] PID\n"
          "       heaplens --version\n"
          "'heaplens COMMAND --help' lists a command's options; run's and report's are:\n"
          "\n",
          out);
    cli_usage_run(out);
    fputc('\n', out);
    cli_usage_report(out);
}

void cli_report_defaults(cli_report_opts_t* o) {
    memset(o, 0, sizeof *o);
    o->show_kinds = (1u << HL_LEAK_DEFINITE) | (1u << HL_LEAK_INDIRECT) |
                    (1u << HL_LEAK_POSSIBLE) | (1u << HL_KIND_UNSCANNED);
}

const char* cli_option_value(int argc, char** argv, int* i, const char* name, int* missing) {
    size_t n = strlen(name);
    const char* a = argv[*i];
    if (strncmp(a, name, n) != 0)
        return NULL;
    if (a[n] == '=')
        return a + n + 1;
    if (a[n] == 0) {
        if (*i + 1 < argc) {
            (*i)++;
            return argv[*i];
        }
        if (missing)
            *missing = 1;
    }
    return NULL;
}

static int parse_kinds(const char* s, unsigned* out) {
    unsigned k = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char* tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        if (!strcmp(tok, "all"))
            k |= 0x1f;
        else if (!strcmp(tok, "none"))
            ;
        else if (!strcmp(tok, "definite"))
            k |= 1u << HL_LEAK_DEFINITE;
        else if (!strcmp(tok, "indirect"))
            k |= 1u << HL_LEAK_INDIRECT;
        else if (!strcmp(tok, "possible"))
            k |= 1u << HL_LEAK_POSSIBLE;
        else if (!strcmp(tok, "reachable"))
            k |= 1u << HL_LEAK_REACHABLE;
        else
            return -1;
    }
    *out = k | (1u << HL_KIND_UNSCANNED);
    return 0;
}

int cli_report_option(int argc, char** argv, int* i, cli_report_opts_t* o) {
    const char* a = argv[*i];
    const char* v;
    if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
        o->is_quiet = 1;
        return 1;
    }
    if ((v = cli_option_value(argc, argv, i, "--json", NULL))) {
        o->json_path = v;
        return 1;
    }
    if ((v = cli_option_value(argc, argv, i, "--html", NULL))) {
        o->html_path = v;
        return 1;
    }
    if ((v = cli_option_value(argc, argv, i, "--sarif", NULL))) {
        o->sarif_path = v;
        return 1;
    }
    if ((v = cli_option_value(argc, argv, i, "--suppressions", NULL))) {
        o->suppressions = v;
        return 1;
    }
    if ((v = cli_option_value(argc, argv, i, "--sysroot", NULL))) {
        o->sysroot = v;
        return 1;
    }
    if ((v = cli_option_value(argc, argv, i, "--debug-dir", NULL))) {
        if (v[0] != '/' || strchr(v, ':')) {
            cli_error("--debug-dir: '%s' must be an absolute path without ':'", v);
            return -1;
        }
        if (o->ndebug_dirs >= (int)(sizeof o->debug_dirs / sizeof *o->debug_dirs)) {
            cli_error("--debug-dir: at most %zu directories",
                      sizeof o->debug_dirs / sizeof *o->debug_dirs);
            return -1;
        }
        o->debug_dirs[o->ndebug_dirs++] = v;
        return 1;
    }
    if ((v = cli_option_value(argc, argv, i, "--show-leak-kinds", NULL))) {
        if (parse_kinds(v, &o->show_kinds) != 0) {
            cli_error("--show-leak-kinds: unknown kind in '%s' (definite, indirect, possible, "
                      "reachable, all)", v);
            return -1;
        }
        return 1;
    }
    if ((v = cli_option_value(argc, argv, i, "--error-exitcode", NULL))) {
        char* end;
        long n = strtol(v, &end, 10);
        if (*end || n < 1 || n > 255) {
            cli_error("--error-exitcode: expected a number from 1 to 255, got '%s'", v);
            return -1;
        }
        o->error_exitcode = (int)n;
        return 1;
    }
    return 0;
}

int cli_write_html(const char* path, report_ctx_t* ctx, const report_opts_t* ro,
                   const char* trace) {
    char err[512] = "cannot open for writing";
    FILE* f = outfile_fopen(path, err, sizeof err);
    if (!f) {
        cli_error("%s: cannot write the HTML report: %s", path, err);
        return 1;
    }
    int status = 0;
    if (report_html_trace(f, ctx, ro, trace, err, sizeof err) != 0) {
        cli_error("%s: %s", path, err);
        status = 1;
    }
    if ((f == stdout ? fflush(f) : fclose(f)) != 0 && !status) {
        cli_error("%s: cannot write the HTML report", path);
        status = 1;
    }
    return status;
}

int cli_trace_is_corrupt(const char* trace, const model_t* m) {
    if (!m->read.is_corrupt)
        return 0;
    cli_error("%s: corrupt trace: %s", trace, m->read.message);
    return 1;
}

int cli_write_sarif(const char* path, report_ctx_t* ctx, const report_opts_t* ro) {
    char err[512] = "cannot open for writing";
    FILE* f = outfile_fopen(path, err, sizeof err);
    if (!f) {
        cli_error("%s: cannot write the SARIF report: %s", path, err);
        return 1;
    }
    int failed = report_sarif(f, ctx, ro, HEAPLENS_VERSION) != 0;
    if ((f == stdout ? fflush(f) : fclose(f)) != 0)
        failed = 1;
    if (failed)
        cli_error("%s: cannot write the SARIF report", path);
    return failed;
}

static void prefetch_module(void* arg, md_module_t* md) {
    symbolizer_t* sym = arg;
    if (md->sym_handle >= 0 || !md->path)
        return; // queued already, or nothing to open
    md->sym_handle = symbolizer_add_module(sym, md->path, md->build_id, md->build_id_len);
    if (md->sym_handle >= 0)
        symbolizer_prefetch(sym, md->sym_handle);
}

// The page's views need a pass over every record: made beside the model's, in the same reading.
static int page_record(const rd_record_t* r, void* arg) {
    aggregate_record(r, arg);
    return 0; // a pass out of memory says so at its end; the model reads on
}

int cli_trace_suppressions(cli_trace_t* t, const cli_report_opts_t* o) {
    if (!o->suppressions)
        return 0;
    char err[512];
    t->supp = suppressions_load(o->suppressions, err, sizeof err);
    if (!t->supp) {
        cli_error("%s", err);
        return 1;
    }
    return 0;
}

int cli_trace_begin(cli_trace_t* t, const cli_report_opts_t* o, int with_page) {
    memset(t, 0, sizeof *t);
    t->m = calloc(1, sizeof *t->m);
    if (!t->m) {
        cli_error("out of memory");
        cli_trace_close(t);
        return 1;
    }
    t->sym = symbolizer_new_cached(o->sysroot);
    for (int k = 0; t->sym && k < o->ndebug_dirs; k++)
        if (symbolizer_add_debug_dir(t->sym, o->debug_dirs[k]) != 0) {
            symbolizer_free(t->sym);
            t->sym = NULL;
        }
    if (!t->sym) {
        cli_error("out of memory");
        cli_trace_close(t);
        return 1;
    }
    // A JSON, HTML or SARIF report names every frame of its stacks: the debug information of
    // the modules the trace's stacks pass through is opened on a second thread while the trace
    // is read. The text report names few frames, often none, and opens only what it names.
    int names_all = o->json_path || o->html_path || o->sarif_path;
    aggregate_t* page = with_page ? calloc(1, sizeof *page) : NULL;
    if (page && aggregate_begin(page, t->m, 0) != 0) {
        free(page);
        page = NULL; // the page makes its own pass
    }
    t->page = page;
    t->obs = (model_observer_t){.module_seen = names_all ? prefetch_module : NULL,
                                .module_arg = t->sym,
                                .record = page ? page_record : NULL,
                                .record_arg = page};
    t->is_observed = names_all || page;
    return 0;
}

const model_observer_t* cli_trace_observer(const cli_trace_t* t) {
    return t->is_observed ? &t->obs : NULL;
}

int cli_trace_finish(cli_trace_t* t, const char* trace, int rc) {
    if (!cli_trace_is_corrupt(trace, t->m) && rc != 0)
        cli_error("%s: %s", trace, t->m->read.message);
    if (rc != 0 || t->m->read.is_corrupt) {
        cli_trace_close(t);
        return 1;
    }
    char err[256];
    if (t->page && aggregate_end(t->page, err, sizeof err) != 0) {
        aggregate_free(t->page);
        free(t->page);
        t->page = NULL;
    }
    t->ctx = report_ctx_new_with(t->m, t->sym);
    t->sym = NULL; // the context's now, freed with it (or by report_ctx_new_with on failure)
    if (!t->ctx) {
        cli_error("out of memory");
        cli_trace_close(t);
        return 1;
    }
    return 0;
}

// with_page: the HTML page's views too (cli_trace_t.page), in the same reading.
static int trace_open(cli_trace_t* t, const char* trace, const cli_report_opts_t* o,
                      int with_page) {
    if (cli_trace_begin(t, o, with_page) != 0)
        return 1;
    if (cli_trace_suppressions(t, o) != 0) {
        cli_trace_close(t);
        return 1;
    }
    const model_observer_t* obs = cli_trace_observer(t);
    int rc = obs ? model_load_observed(t->m, trace, obs) : model_load(t->m, trace);
    return cli_trace_finish(t, trace, rc);
}

int cli_trace_open(cli_trace_t* t, const char* trace, const cli_report_opts_t* o) {
    return trace_open(t, trace, o, 0);
}

int cli_trace_has_errors(cli_trace_t* t) {
    report_leaks_t lk;
    report_leaks(t->ctx, t->supp, &lk);
    return lk.kinds[HL_LEAK_DEFINITE].blocks + lk.kinds[HL_LEAK_INDIRECT].blocks > 0 ||
           t->m->nerrors > 0;
}

void cli_trace_close(cli_trace_t* t) {
    symbolizer_free(t->sym);
    if (t->page) {
        aggregate_free(t->page);
        free(t->page);
    }
    report_ctx_free(t->ctx);
    if (t->m) {
        model_free(t->m);
        free(t->m);
    }
    suppressions_free(t->supp);
    memset(t, 0, sizeof *t);
}

int cli_report_trace(const char* trace, const cli_report_opts_t* o, const report_child_t* kids,
                     size_t nkids, int exit_status, int exit_signal, int* has_errors) {
    *has_errors = 0;
    cli_trace_t t;
    if (trace_open(&t, trace, o, o->html_path != NULL) != 0)
        return 1;
    return cli_report_loaded(&t, trace, o, kids, nkids, exit_status, exit_signal, has_errors);
}

int cli_report_loaded(cli_trace_t* tp, const char* trace, const cli_report_opts_t* o,
                      const report_child_t* kids, size_t nkids, int exit_status, int exit_signal,
                      int* has_errors) {
    cli_trace_t t = *tp;
    memset(tp, 0, sizeof *tp);
    report_opts_t ro = {
        .show_kinds = o->show_kinds,
        .max_records = 25,
        .supp = t.supp,
        .trace_path = trace,
        .children = kids,
        .nchildren = nkids,
        .exit_status = exit_status,
        .exit_signal = exit_signal,
        .aggregate = t.page,
    };
    int status = 0;
    if (!o->is_quiet) {
        report_text(stderr, t.ctx, &ro);
        fflush(stderr);
    }
    if (o->json_path) {
        char why[256] = "";
        FILE* f = outfile_fopen(o->json_path, why, sizeof why);
        if (!f || report_json(f, t.ctx, &ro) != 0) {
            cli_error("%s: cannot write the JSON report%s%s", o->json_path, why[0] ? ": " : "",
                      why);
            status = 1;
        }
        if (f && f != stdout)
            fclose(f);
    }
    if (o->html_path && cli_write_html(o->html_path, t.ctx, &ro, trace) != 0)
        status = 1;
    if (o->sarif_path && cli_write_sarif(o->sarif_path, t.ctx, &ro) != 0)
        status = 1;
    *has_errors = cli_trace_has_errors(&t);
    cli_trace_close(&t);
    return status;
}

int cli_trace_is_live;

void cli_usage_report_options(FILE* out) {
    fputs(report_options_help, out);
}

int cli_report_growth(const char* trace, const cli_report_opts_t* o, double rate) {
    cli_trace_t t;
    if (cli_trace_open(&t, trace, o) != 0)
        return 1;
    aggregate_t a;
    memset(&a, 0, sizeof a);
    ag_opts_t ao = {.growth = 1};
    char err[512];
    int status = 1;
    char* text = NULL;
    size_t len = 0;
    FILE* mem = NULL;
    if (aggregate_build(&a, t.ctx, trace, &ao, err, sizeof err) != 0) {
        cli_error("%s", err);
    } else if ((mem = open_memstream(&text, &len)) != NULL) {
        ag_view_opts_t v = {.growth = 1, .growth_rate = rate};
        ag_views_text(mem, t.ctx, &a, &v);
        fclose(mem);
        // the run's report: every line marked, as the rest of it
        for (char* line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
            fprintf(stderr, "==heaplens== %s\n", line);
        fflush(stderr);
        free(text);
        status = 0;
    }
    aggregate_free(&a);
    cli_trace_close(&t);
    return status;
}

int cli_is_help(const char* a) {
    return !strcmp(a, "-h") || !strcmp(a, "--help");
}

// The subcommands; each answers -h and --help with its own usage, on stdout.
static const struct {
    const char* name;
    int (*run)(int argc, char** argv);
} commands[] = {
    {"run", cmd_run},   {"report", cmd_report},     {"diff", cmd_diff},
    {"html", cmd_html}, {"memcheck", cmd_memcheck}, {"server", cmd_server},
    {"shell", cmd_shell},   {"attach", cmd_attach},     {"detach", cmd_detach},
};

int main(int argc, char** argv) {
    const char* self = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    if (!strcmp(self, "heaplens-memcheck"))
        return cmd_memcheck(argc, argv);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++) {
        if (strcmp(argv[1], commands[i].name) != 0)
            continue;
        return commands[i].run(argc - 1, argv + 1);
    }
    if (cli_is_help(argv[1]) || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("heaplens %s\n", HEAPLENS_VERSION);
        return 0;
    }
    char names[256];
    size_t used = 0;
    for (size_t i = 0; i < sizeof commands / sizeof *commands && used < sizeof names; i++)
        used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "",
                                 commands[i].name);
    cli_error("unknown command '%s' (%s; see heaplens --help)", argv[1], names);
    return 2;
}
