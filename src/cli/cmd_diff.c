// SPDX-License-Identifier: MIT
// cmd_diff.c - heaplens diff OLD.hl NEW.hl: what grew between two traces, by call site.
// Sites are matched by their symbolized stack (function names and source files, innermost
// first; module + offset for frames without a symbol), never by address, so two runs of the same
// program - different ASLR, even a rebuilt binary - line up. Per site: allocations, bytes
// allocated, bytes still live at exit, and leaked bytes (definitely + indirectly lost, after the
// reachability scan). Text (sorted by growth), --json, --html (the report page in diff mode).
//
// Also heaplens html REPORT.json [-o PAGE.html]: the report page for a JSON report written
// earlier (by --json, or by another tool in the same shape).
//
// Bytes at the peak per site come from the aggregate pass (aggregate.h), run on each trace.
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../analyze/aggregate.h"
#include "../analyze/json_check.h"
#include "../analyze/report_html.h"
#include "../common/hash.h"
#include "cli.h"
#include "outfile.h"

enum { M_ALLOCS, M_BYTES, M_LIVE, M_LEAKED, M_PEAK, NMETRIC };
static const char* const metric_key[NMETRIC] = {"allocations", "bytes", "live_bytes",
                                                "leaked_bytes", "peak_bytes"};

typedef struct dsite_s {
    char* key;
    uint64_t hash;
    uint32_t stack[2];  // a representative stack id in old [0] and new [1] (0: absent)
    uint64_t v[2][NMETRIC];
} dsite_t;

typedef struct dtable_s {
    dsite_t* v;
    size_t n, cap;
    size_t* slots; // 1 + index into v, 0 empty; power-of-two size
    size_t nslots;
} dtable_t;

typedef struct dside_s {
    const char* path;
    model_t* m;
    report_ctx_t* ctx;
    aggregate_t agg; // per-site bytes at the peak
    uint64_t leaked_bytes;
} dside_t;

static dsite_t* dt_get(dtable_t* t, const char* key) {
    if (t->n * 2 >= t->nslots) {
        size_t ns = t->nslots ? t->nslots * 2 : 1024;
        size_t* fresh = calloc(ns, sizeof *fresh);
        if (!fresh)
            return NULL;
        for (size_t i = 0; i < t->n; i++) {
            size_t j = t->v[i].hash & (ns - 1);
            while (fresh[j])
                j = (j + 1) & (ns - 1);
            fresh[j] = i + 1;
        }
        free(t->slots);
        t->slots = fresh;
        t->nslots = ns;
    }
    uint64_t h = hl_str_hash(key);
    size_t j = h & (t->nslots - 1);
    for (; t->slots[j]; j = (j + 1) & (t->nslots - 1)) {
        dsite_t* s = &t->v[t->slots[j] - 1];
        if (s->hash == h && strcmp(s->key, key) == 0)
            return s;
    }
    if (t->n == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 256;
        dsite_t* fresh = realloc(t->v, nc * sizeof *fresh);
        if (!fresh)
            return NULL;
        t->v = fresh;
        t->cap = nc;
    }
    dsite_t* s = &t->v[t->n];
    memset(s, 0, sizeof *s);
    s->key = strdup(key);
    if (!s->key)
        return NULL;
    s->hash = h;
    t->slots[j] = ++t->n;
    return s;
}

static void dt_free(dtable_t* t) {
    for (size_t i = 0; i < t->n; i++)
        free(t->v[i].key);
    free(t->v);
    free(t->slots);
}

// The matching key of a stack: "function\tfile\n" per frame; module+offset without a symbol.
static char* stack_key(dside_t* d, uint32_t stack) {
    const report_frame_t* fr;
    int n = report_stack(d->ctx, stack, &fr);
    char* buf = NULL;
    size_t len = 0;
    FILE* f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    for (int i = 0; i < n; i++) {
        if (fr[i].function) {
            fprintf(f, "%s\t%s\n", fr[i].function, fr[i].file ? fr[i].file : "");
        } else {
            const md_module_t* md = model_module_of(d->m, fr[i].address);
            fprintf(f, "%s+0x%llx\t\n", fr[i].module ? fr[i].module : "?",
                    md ? fr[i].address - (unsigned long long)md->bias : fr[i].address);
        }
    }
    if (n == 0)
        fprintf(f, "(no stack %u)\n", stack);
    fclose(f);
    return buf;
}

static int add_side(dtable_t* t, dside_t* d, int side) {
    model_t* m = d->m;
    char** keys = calloc(m->nstacks + 1, sizeof *keys); // per stack id, made once
    uint64_t* live = calloc(m->nstacks + 1, sizeof *live); // bytes live at the end, per stack
    if (!keys || !live) {
        free(keys);
        free(live);
        return -1;
    }
    model_live_by_stack(m, live, NULL);
    int rc = 0;
    for (size_t id = 1; id < m->nstacks && rc == 0; id++) {
        // The aggregate's window is the whole trace here: its counts are every ALLOC's.
        const ag_site_t* as = ag_site_for(&d->agg, (uint32_t)id);
        uint64_t allocations = as ? as->allocations : 0;
        if (!allocations && !live[id])
            continue;
        keys[id] = stack_key(d, (uint32_t)id);
        dsite_t* ds = keys[id] ? dt_get(t, keys[id]) : NULL;
        if (!ds) {
            rc = -1;
            break;
        }
        if (!ds->stack[side])
            ds->stack[side] = (uint32_t)id;
        ds->v[side][M_ALLOCS] += allocations;
        ds->v[side][M_BYTES] += as ? as->bytes : 0;
        ds->v[side][M_LIVE] += live[id];
        if (as)
            ds->v[side][M_PEAK] += as->peak_bytes;
    }
    free(live);
    report_leaks_t lk;
    report_leaks(d->ctx, NULL, &lk);
    d->leaked_bytes = lk.kinds[HL_LEAK_DEFINITE].bytes + lk.kinds[HL_LEAK_INDIRECT].bytes;
    for (size_t i = 0; i < lk.nrecords && rc == 0; i++) {
        const md_leak_record_t* r = lk.records[i];
        if (r->kind != HL_LEAK_DEFINITE && r->kind != HL_LEAK_INDIRECT)
            continue;
        int known = r->stack < m->nstacks && keys[r->stack];
        char* k = known ? keys[r->stack] : stack_key(d, r->stack);
        dsite_t* ds = k ? dt_get(t, k) : NULL;
        if (!known)
            free(k);
        if (!ds) {
            rc = -1;
            break;
        }
        if (!ds->stack[side])
            ds->stack[side] = r->stack;
        ds->v[side][M_LEAKED] += r->bytes;
    }
    for (size_t id = 0; id <= m->nstacks; id++)
        free(keys[id]);
    free(keys);
    return rc;
}

static int g_sort = M_BYTES;

// new - old of two counts, as a signed number; held at the ends of its range when the counts are
// further apart than it reaches (only a damaged trace has such counts).
static long long change(uint64_t old, uint64_t new) {
    if (new >= old)
        return new - old > (uint64_t)LLONG_MAX ? LLONG_MAX : (long long)(new - old);
    return old - new > (uint64_t)LLONG_MAX ? LLONG_MIN : -(long long)(old - new);
}

static long long delta(const dsite_t* s, int k) {
    return change(s->v[0][k], s->v[1][k]);
}

static int by_growth(const void* a, const void* b) {
    const dsite_t* x = a;
    const dsite_t* y = b;
    long long dx = delta(x, g_sort), dy = delta(y, g_sort);
    if (dx != dy)
        return dx < dy ? 1 : -1;
    for (int k = 0; k < NMETRIC; k++)
        if (delta(x, k) != delta(y, k))
            return delta(x, k) < delta(y, k) ? 1 : -1;
    return strcmp(x->key, y->key);
}

static const char* human(long long v, char* buf, size_t cap, int is_signed) {
    const char* u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double a = v < 0 ? -(double)v : (double)v;
    int i = 0;
    while (a >= 1024 && i < 4) {
        a /= 1024;
        i++;
    }
    const char* sign = v < 0 ? "-" : is_signed && v > 0 ? "+" : "";
    if (i == 0)
        snprintf(buf, cap, "%s%.0f B", sign, a);
    else
        snprintf(buf, cap, "%s%.*f %s", sign, a < 10 ? 2 : a < 100 ? 1 : 0, a, u[i]);
    return buf;
}

static const char* status_of(const dsite_t* s) {
    return !s->stack[0] ? "new" : !s->stack[1] ? "gone" : "both";
}

// "function (file:line) < caller" for the text: the first two named frames.
static void site_label(dside_t* sides, const dsite_t* s, char* buf, size_t cap) {
    int side = s->stack[1] ? 1 : 0;
    const report_frame_t* fr;
    int n = report_stack(sides[side].ctx, s->stack[side], &fr);
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0, shown = 0; i < n && shown < 3 && len + 1 < cap; i++) {
        const report_frame_t* f = &fr[i];
        const char* file = f->file ? strrchr(f->file, '/') : NULL;
        file = file ? file + 1 : f->file;
        int w;
        if (f->function && file)
            w = snprintf(buf + len, cap - len, "%s%s (%s:%u)", shown ? " < " : "", f->function, file,
                         f->line);
        else if (f->function)
            w = snprintf(buf + len, cap - len, "%s%s", shown ? " < " : "", f->function);
        else
            w = snprintf(buf + len, cap - len, "%s%s@0x%llx", shown ? " < " : "",
                         f->module ? f->module : "?", f->address);
        if (w < 0)
            break;
        len += (size_t)w < cap - len ? (size_t)w : cap - len - 1;
        shown++;
    }
    if (n == 0)
        snprintf(buf, cap, "(no stack)");
}

static void jside(FILE* out, const dside_t* d) {
    const model_t* m = d->m;
    fputs("{\"trace\": ", out);
    report_json_string(out, d->path);
    fputs(", \"exe\": ", out);
    report_json_string(out, m->exe);
    fputs(", \"argv\": ", out);
    report_json_argv(out, m);
    fprintf(out,
            ", \"totals\": {\"allocations\": %llu, \"bytes_allocated\": %llu, "
            "\"peak_heap_bytes\": %llu, \"in_use_bytes\": %llu, \"leaked_bytes\": %llu, "
            "\"rss_peak\": %llu}}",
            (unsigned long long)m->allocations, (unsigned long long)m->bytes_allocated,
            (unsigned long long)m->peak_bytes, (unsigned long long)m->heap_bytes,
            (unsigned long long)d->leaked_bytes, (unsigned long long)m->rss_peak);
}

static int write_json(FILE* out, dside_t* sides, const dtable_t* t) {
    fputs("{\n\"diff\": {\n\"old\": ", out);
    jside(out, &sides[0]);
    fputs(",\n\"new\": ", out);
    jside(out, &sides[1]);
    fprintf(out, ",\n\"sort\": \"%s\",\n\"sites\": [", metric_key[g_sort]);
    for (size_t i = 0; i < t->n; i++) {
        const dsite_t* s = &t->v[i];
        int side = s->stack[1] ? 1 : 0;
        fprintf(out, "%s\n{\"status\": \"%s\"", i ? "," : "", status_of(s));
        for (int k = 0; k < NMETRIC; k++)
            fprintf(out, ", \"%s\": {\"old\": %llu, \"new\": %llu, \"delta\": %lld}", metric_key[k],
                    (unsigned long long)s->v[0][k], (unsigned long long)s->v[1][k], delta(s, k));
        fputs(", \"stack\": ", out);
        report_json_stack(out, sides[side].ctx, s->stack[side]);
        fputc('}', out);
    }
    fputs("\n]\n}\n}\n", out);
    return ferror(out) ? -1 : 0;
}

// Why the last open_out failed, for the line that says so.
static char open_out_why[256];

static FILE* open_out(const char* path) {
    open_out_why[0] = 0;
    return outfile_fopen(path, open_out_why, sizeof open_out_why);
}

static int close_out(FILE* f) {
    if (f == stdout)
        return fflush(f) == 0 ? 0 : -1;
    return fclose(f) == 0 ? 0 : -1;
}

static void write_text(FILE* out, dside_t* sides, const dtable_t* t, size_t top) {
    const model_t* o = sides[0].m;
    const model_t* n = sides[1].m;
    char a[32], b[32], c[32];
    fprintf(out, "heaplens diff: %s -> %s\n", sides[0].path, sides[1].path);
    fprintf(out, "  peak heap        %10s -> %10s  %11s\n",
            human(change(0, o->peak_bytes), a, 32, 0), human(change(0, n->peak_bytes), b, 32, 0),
            human(change(o->peak_bytes, n->peak_bytes), c, 32, 1));
    fprintf(out, "  bytes allocated  %10s -> %10s  %11s\n",
            human(change(0, o->bytes_allocated), a, 32, 0),
            human(change(0, n->bytes_allocated), b, 32, 0),
            human(change(o->bytes_allocated, n->bytes_allocated), c, 32, 1));
    fprintf(out, "  allocations      %10llu -> %10llu  %+11lld\n",
            (unsigned long long)o->allocations, (unsigned long long)n->allocations,
            change(o->allocations, n->allocations));
    fprintf(out, "  leaked           %10s -> %10s  %11s\n",
            human(change(0, sides[0].leaked_bytes), a, 32, 0),
            human(change(0, sides[1].leaked_bytes), b, 32, 0),
            human(change(sides[0].leaked_bytes, sides[1].leaked_bytes), c, 32, 1));
    size_t grown = 0;
    for (size_t i = 0; i < t->n; i++)
        grown += delta(&t->v[i], g_sort) > 0;
    fprintf(out, "\nsites that grew in %s: %zu of %zu (top %zu)\n",
            g_sort == M_BYTES ? "bytes allocated" : metric_key[g_sort], grown, t->n,
            top < grown ? top : grown);
    fprintf(out, "  %3s %11s %11s %11s %11s %11s  %s\n", "#", "bytes", "allocs", "at peak",
            "live@exit", "leaked", "site");
    char label[1024];
    for (size_t i = 0, shown = 0; i < t->n && shown < top; i++) {
        const dsite_t* s = &t->v[i];
        if (delta(s, g_sort) <= 0)
            break;
        site_label(sides, s, label, sizeof label);
        char d[32], e[32];
        fprintf(out, "  %3zu %11s %+11lld %11s %11s %11s  %s%s\n", ++shown,
                human(delta(s, M_BYTES), a, 32, 1), delta(s, M_ALLOCS),
                human(delta(s, M_PEAK), e, 32, 1), human(delta(s, M_LIVE), b, 32, 1),
                human(delta(s, M_LEAKED), d, 32, 1), label, s->stack[0] ? "" : "  [new]");
    }
}

static int load_side(dside_t* d, const char* path, const char* sysroot) {
    d->path = path;
    d->m = calloc(1, sizeof *d->m);
    if (!d->m) {
        cli_error("out of memory");
        return -1;
    }
    int rc = model_load(d->m, path);
    if (cli_trace_is_corrupt(path, d->m))
        return -1;
    if (rc != 0) {
        cli_error("%s: %s", path, d->m->read.message);
        return -1;
    }
    if (!model_is_complete(d->m))
        cli_error("%s: %s (using what was readable)", path, model_incomplete_reason(d->m));
    d->ctx = report_ctx_new(d->m, sysroot);
    if (!d->ctx) {
        cli_error("out of memory");
        return -1;
    }
    ag_opts_t ao;
    memset(&ao, 0, sizeof ao);
    char err[256] = "";
    if (aggregate_build(&d->agg, d->ctx, path, &ao, err, sizeof err) != 0) {
        cli_error("%s", err); // names the trace
        return -1;
    }
    return 0;
}

static void free_side(dside_t* d) {
    aggregate_free(&d->agg);
    if (d->ctx)
        report_ctx_free(d->ctx);
    if (d->m) {
        model_free(d->m);
        free(d->m);
    }
}

static void diff_usage(FILE* out) {
    fputs("usage: heaplens diff [options] OLD.hl NEW.hl\n"
          "What grew between two traces of a program, by call site.\n"
          "  --json FILE     the comparison as JSON ('-' for stdout)\n"
          "  --html FILE     the comparison as a self-contained HTML page\n"
          "  --sort KEY      bytes (default), allocations, peak, live, leaked\n"
          "  -n N            sites listed in the text (default 20)\n"
          "  --sysroot DIR   look up the traced binaries under DIR\n"
          "  -q, --quiet     no text report\n"
          "  -h, --help      this help\n",
          out);
}

int cmd_diff(int argc, char** argv) {
    const char *paths[2] = {NULL, NULL}, *json = NULL, *html = NULL, *sysroot = NULL;
    int quiet = 0;
    long top = 20;
    g_sort = M_BYTES;
    for (int i = 1; i < argc; i++) {
        const char* a = argv[i];
        const char* v = NULL;
#define OPT(name) (!strcmp(a, name) && i + 1 < argc ? (v = argv[++i]) : \
                   !strncmp(a, name "=", sizeof name) ? (v = a + sizeof name) : NULL)
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            diff_usage(stdout);
            return 0;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            quiet = 1;
        } else if (OPT("--json")) {
            json = v;
        } else if (OPT("--html")) {
            html = v;
        } else if (OPT("--sysroot")) {
            sysroot = v;
        } else if (OPT("-n")) {
            char* end;
            top = strtol(v, &end, 10);
            if (*end || top < 0) {
                cli_error("diff: -n: expected a number, got '%s'", v);
                return 2;
            }
        } else if (OPT("--sort")) {
            if (!strcmp(v, "bytes"))
                g_sort = M_BYTES;
            else if (!strcmp(v, "allocations") || !strcmp(v, "allocs"))
                g_sort = M_ALLOCS;
            else if (!strcmp(v, "live"))
                g_sort = M_LIVE;
            else if (!strcmp(v, "leaked"))
                g_sort = M_LEAKED;
            else if (!strcmp(v, "peak"))
                g_sort = M_PEAK;
            else {
                cli_error("diff: --sort: unknown key '%s' (bytes, allocations, peak, live, leaked)",
                          v);
                return 2;
            }
        } else if (a[0] == '-' && a[1]) {
            cli_error("diff: unknown option '%s'", a);
            return 2;
        } else if (!paths[0]) {
            paths[0] = a;
        } else if (!paths[1]) {
            paths[1] = a;
        } else {
            cli_error("diff: two traces, not more ('%s')", a);
            return 2;
        }
#undef OPT
    }
    if (!paths[1]) {
        cli_error("diff: which traces? usage: heaplens diff [options] OLD.hl NEW.hl");
        return 2;
    }
    if (json && html && !strcmp(json, "-") && !strcmp(html, "-")) {
        cli_error("diff: --json and --html cannot both go to stdout ('-')");
        return 2;
    }
    dside_t sides[2];
    memset(sides, 0, sizeof sides);
    dtable_t t;
    memset(&t, 0, sizeof t);
    int status = 1;
    // Each failure says itself in one line: load_side names the trace and why.
    if (load_side(&sides[0], paths[0], sysroot) != 0 ||
        load_side(&sides[1], paths[1], sysroot) != 0)
        goto done;
    if (add_side(&t, &sides[0], 0) != 0 || add_side(&t, &sides[1], 1) != 0) {
        cli_error("diff: out of memory");
        goto done;
    }
    status = 0;
    if (t.n)
        qsort(t.v, t.n, sizeof *t.v, by_growth);
    // A JSON or HTML document on stdout is all that goes there.
    int doc_on_stdout = (json && !strcmp(json, "-")) || (html && !strcmp(html, "-"));
    if (!quiet && !doc_on_stdout)
        write_text(stdout, sides, &t, (size_t)top);
    if (json) {
        FILE* f = open_out(json);
        if (!f || write_json(f, sides, &t) != 0 || close_out(f) != 0) {
            cli_error("%s: cannot write the JSON diff%s%s", json, open_out_why[0] ? ": " : "",
                      open_out_why);
            status = 1;
        }
    }
    if (html) {
        char* buf = NULL;
        size_t len = 0;
        FILE* mem = open_memstream(&buf, &len);
        int bad = !mem || write_json(mem, sides, &t) != 0;
        if (mem)
            fclose(mem);
        FILE* f = bad ? NULL : open_out(html);
        if (!f || report_html(f, buf, len) != 0 || close_out(f) != 0) {
            cli_error("%s: cannot write the HTML diff%s%s", html, open_out_why[0] ? ": " : "",
                      open_out_why);
            status = 1;
        }
        free(buf);
    }
done:
    dt_free(&t);
    free_side(&sides[0]);
    free_side(&sides[1]);
    return status;
}

// A JSON report read whole into memory, at most HTML_INPUT_MAX bytes (the largest reports are
// a few hundred MB). Returns 0, or 1 after one error line. What is not a report (a trace, a
// binary, /etc/passwd, an endless device) is told from its first bytes.
#define HTML_INPUT_MAX (1ull << 30)
#define HTML_READ_BLOCK (1u << 20)

static int read_report(const char* in, char** out, size_t* out_len) {
    FILE* f = strcmp(in, "-") == 0 ? stdin : fopen(in, "r");
    if (!f) {
        cli_error("%s: %s", in, strerror(errno));
        return 1;
    }
    char* buf = NULL;
    size_t len = 0, cap = 0, got, lead = 0; // white space before the first character
    const char* why = NULL;
    do {
        if (len + HTML_READ_BLOCK > cap) {
            cap = cap ? cap * 2 : 2 * HTML_READ_BLOCK;
            char* fresh = cap <= HTML_INPUT_MAX ? realloc(buf, cap) : NULL;
            if (!fresh) {
                why = cap <= HTML_INPUT_MAX ? "out of memory" : "larger than any JSON report";
                break;
            }
            buf = fresh;
        }
        got = fread(buf + len, 1, cap - len, f);
        len += got;
        while (lead < len && buf[lead] && strchr(" \t\r\n", buf[lead]))
            lead++;
        if (lead < len && buf[lead] != '{')
            why = "not a JSON report (it does not start with '{')";
    } while (got > 0 && !why);
    if (!why && ferror(f))
        why = strerror(errno);
    if (f != stdin)
        fclose(f);
    json_check_t jc = {.keys = (const char* const[]){"totals", "diff", NULL}};
    if (!why && json_check(buf, len, &jc) != 0) {
        cli_error("%s: not a JSON report (%s at byte %zu)", in, jc.error, jc.error_at);
        free(buf);
        return 1;
    }
    if (!why && !(jc.is_object && jc.found))
        why = "not a heaplens JSON report (no \"totals\" or \"diff\")";
    if (why) {
        cli_error("%s: %s", in, why);
        free(buf);
        return 1;
    }
    *out = buf;
    *out_len = len;
    return 0;
}

// heaplens html REPORT.json [-o PAGE.html]: the page for a JSON report written earlier.
int cmd_html(int argc, char** argv) {
    const char *in = NULL, *out = "-";
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            cli_usage_html(stdout);
            return 0;
        }
        if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) && i + 1 < argc)
            out = argv[++i];
        else if (argv[i][0] == '-' && argv[i][1]) {
            cli_error("html: unknown option '%s' (usage: heaplens html REPORT.json [-o PAGE.html])",
                      argv[i]);
            return 2;
        } else
            in = argv[i];
    }
    if (!in) {
        cli_error("html: which JSON report? usage: heaplens html REPORT.json [-o PAGE.html]");
        return 2;
    }
    char* buf;
    size_t len;
    if (read_report(in, &buf, &len) != 0)
        return 1; // nothing written: no page for what is not a report
    FILE* o = open_out(out);
    int rc = !o || report_html(o, buf, len) != 0 || close_out(o) != 0;
    if (rc)
        cli_error("%s: cannot write the page%s%s", out, open_out_why[0] ? ": " : "", open_out_why);
    free(buf);
    return rc;
}
