// SPDX-License-Identifier: MIT
// cmd_report.c - heaplens report TRACE: the same report as at the end of a run, from the file;
// with view options (--summary, --top, --histogram, --timeline, --threads) the views instead,
// and with --collapsed, --flamegraph, --pprof, --massif files other tools read.
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../analyze/aggregate.h"
#include "../analyze/report_html.h"
#include "cli.h"
#include "outfile.h"

typedef struct views_s {
    ag_view_opts_t v;
    ag_opts_t ag;
    int metric;
    const char* collapsed;
    const char* flamegraph;
    const char* pprof;
    const char* massif;
} views_t;

static int has_view(const views_t* w) {
    return w->v.summary || w->v.top > 0 || w->v.histogram || w->v.timeline || w->v.threads ||
           w->v.growth;
}

static int has_output(const views_t* w) {
    return w->collapsed || w->flamegraph || w->pprof || w->massif;
}

static int parse_count(const char* opt, const char* v, long lo, long hi, long* out) {
    char* end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (!*v || *end || errno || n < lo || n > hi) {
        cli_error("%s: expected a number from %ld to %ld, got '%s'", opt, lo, hi, v);
        return -1;
    }
    *out = n;
    return 0;
}

// One view option at argv[*i]: 1 when it was one, 0 when not, -1 on a bad value.
static int view_option(int argc, char** argv, int* i, views_t* w) {
    const char* a = argv[*i];
    const char* v;
    int missing = 0;
    long n;
    if (!strcmp(a, "--summary"))
        return w->v.summary = 1;
    if (!strcmp(a, "--histogram"))
        return w->v.histogram = 1;
    if (!strcmp(a, "--timeline"))
        return w->v.timeline = 1;
    if (!strcmp(a, "--threads"))
        return w->v.threads = 1;
    if (!strcmp(a, "--growth")) {
        w->ag.growth = 1;
        return w->v.growth = 1;
    }
    if ((v = cli_option_value(argc, argv, i, "--growth-rate", &missing))) {
        char* end;
        double r = strtod(v, &end);
        if (!*v || *end || r < 0) {
            cli_error("--growth-rate: expected bytes per second, got '%s'", v);
            return -1;
        }
        w->v.growth_rate = r;
        w->ag.growth = 1;
        return w->v.growth = 1;
    }
    if ((v = cli_option_value(argc, argv, i, "--top", &missing))) {
        if (parse_count("--top", v, 1, 1000000, &n) != 0)
            return -1;
        w->v.top = (int)n;
        return 1;
    }
    if ((v = cli_option_value(argc, argv, i, "--sort", &missing))) {
        if ((w->v.sort = ag_metric_parse(v)) < 0) {
            cli_error("--sort: unknown key '%s' (allocations, bytes, peak, leaked, temporary)", v);
            return -1;
        }
        if (w->v.top <= 0)
            w->v.top = -1; // --sort alone: the default count, unless --top comes
        return 1;
    }
    if ((v = cli_option_value(argc, argv, i, "--metric", &missing))) {
        if ((w->metric = ag_metric_parse(v)) < 0) {
            cli_error("--metric: unknown metric '%s' (allocations, bytes, peak, leaked, "
                      "temporary)",
                      v);
            return -1;
        }
        return 1;
    }
    if ((v = cli_option_value(argc, argv, i, "--from", &missing)) ||
        (v = cli_option_value(argc, argv, i, "--to", &missing))) {
        int is_from = strncmp(a, "--from", 6) == 0;
        int64_t t;
        if (ag_parse_time(v, &t) != 0) {
            cli_error("%s: expected a time like 1500000, 1500000ns, 20us, 1.5ms or 2s, got '%s'",
                      is_from ? "--from" : "--to", v);
            return -1;
        }
        if (is_from) {
            w->ag.has_from = 1;
            w->ag.from_ns = t;
        } else {
            w->ag.has_to = 1;
            w->ag.to_ns = t;
        }
        return 1;
    }
    if ((v = cli_option_value(argc, argv, i, "--filter", &missing))) {
        w->ag.filter = v;
        return 1;
    }
    if ((v = cli_option_value(argc, argv, i, "--buckets", &missing))) {
        if (parse_count("--buckets", v, 1, 1000000, &n) != 0)
            return -1;
        w->ag.max_buckets = (size_t)n;
        return 1;
    }
    if ((v = cli_option_value(argc, argv, i, "--collapsed", &missing))) {
        w->collapsed = v;
        return 1;
    }
    if ((v = cli_option_value(argc, argv, i, "--flamegraph", &missing))) {
        w->flamegraph = v;
        return 1;
    }
    if ((v = cli_option_value(argc, argv, i, "--pprof", &missing))) {
        w->pprof = v;
        return 1;
    }
    if ((v = cli_option_value(argc, argv, i, "--massif", &missing))) {
        w->massif = v;
        return 1;
    }
    if (missing) {
        cli_error("%s: needs a value", a);
        return -1;
    }
    return 0;
}

// report_json's object with the view keys added before its closing brace.
static int write_json(FILE* f, report_ctx_t* ctx, const report_opts_t* ro, const aggregate_t* a,
                      const views_t* w) {
    if (!has_view(w))
        return report_json(f, ctx, ro);
    char* buf = NULL;
    size_t len = 0;
    FILE* mem = open_memstream(&buf, &len);
    if (!mem)
        return -ENOMEM;
    int rc = report_json(mem, ctx, ro);
    if (fclose(mem) != 0 || rc != 0 || !buf) {
        free(buf);
        return rc ? rc : -EIO;
    }
    while (len > 0 && buf[len - 1] != '}')
        len--;
    if (len == 0) {
        free(buf);
        return -EINVAL;
    }
    len--; // the object's closing brace
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == ' '))
        len--;
    fwrite(buf, 1, len, f);
    free(buf);
    ag_views_json(f, ctx, a, &w->v);
    fputs("\n}\n", f);
    return ferror(f) ? -EIO : 0;
}

typedef int (*writer_t)(FILE* out, report_ctx_t* c, const aggregate_t* a, const views_t* w);

static int do_collapsed(FILE* out, report_ctx_t* c, const aggregate_t* a, const views_t* w) {
    return ag_write_collapsed(out, c, a, w->metric);
}
static int do_flamegraph(FILE* out, report_ctx_t* c, const aggregate_t* a, const views_t* w) {
    model_t* m = report_model(c);
    char title[512];
    const char* exe = m->exe ? strrchr(m->exe, '/') : NULL;
    snprintf(title, sizeof title, "heaplens: %s (pid %llu), %s",
             exe      ? exe + 1
             : m->exe ? m->exe
                      : "?",
             (unsigned long long)m->pid, ag_metric_name(w->metric));
    return ag_write_flamegraph(out, c, a, w->metric, title);
}
static int do_pprof(FILE* out, report_ctx_t* c, const aggregate_t* a, const views_t* w) {
    (void)w;
    return ag_write_pprof(out, c, a);
}
static int do_massif(FILE* out, report_ctx_t* c, const aggregate_t* a, const views_t* w) {
    (void)w;
    return ag_write_massif(out, c, a);
}

static int write_file(const char* path, const char* what, writer_t fn, report_ctx_t* c,
                      const aggregate_t* a, const views_t* w) {
    if (!path)
        return 0;
    int is_stdout = !strcmp(path, "-");
    char why[256];
    FILE* f = outfile_fopen(path, why, sizeof why);
    if (!f) {
        cli_error("%s: cannot write the %s: %s", path, what, why);
        return 1;
    }
    int rc = fn(f, c, a, w);
    if ((is_stdout ? fflush(f) : fclose(f)) != 0 && rc == 0)
        rc = -EIO;
    if (rc != 0) {
        cli_error("%s: cannot write the %s: %s", path, what, strerror(-rc));
        return 1;
    }
    return 0;
}

static int report_views(const char* trace, const cli_report_opts_t* o, views_t* w,
                        int* has_errors) {
    *has_errors = 0;
    cli_trace_t t;
    if (cli_trace_open(&t, trace, o) != 0)
        return 1;
    int status = 1;
    aggregate_t a;
    memset(&a, 0, sizeof a);
    char err[512];
    if (aggregate_build(&a, t.ctx, trace, &w->ag, err, sizeof err) != 0) {
        cli_error("%s", err);
        goto out;
    }
    report_ctx_t* ctx = t.ctx;
    report_opts_t ro = {
        .show_kinds = o->show_kinds,
        .max_records = 25,
        .supp = t.supp,
        .trace_path = trace,
        .exit_status = -1,
    };
    status = 0;
    int json_stdout = o->json_path && !strcmp(o->json_path, "-");
    if (!has_view(w) && !o->is_quiet) {
        report_text(stderr, ctx, &ro); // file outputs only: the usual report as well
        fflush(stderr);
    } else if (t.m->read.is_truncated || t.m->read.is_corrupt) {
        // the usual report would say so; the views alone must too
        cli_error("%s: trace cut short (%s): the report covers what was written", trace,
                  t.m->read.message);
    } else if (!model_is_complete(t.m) && !cli_trace_is_live) {
        cli_error("%s: %s", trace, model_incomplete_reason(t.m));
    }
    if (has_view(w) && !json_stdout) {
        ag_views_text(stdout, ctx, &a, &w->v);
        fflush(stdout);
    }
    if (o->json_path) {
        char why[256] = "";
        FILE* f = outfile_fopen(o->json_path, why, sizeof why);
        int rc = f ? write_json(f, ctx, &ro, &a, w) : -1;
        if (f && f != stdout && fclose(f) != 0)
            rc = -1;
        if (rc != 0) {
            cli_error("%s: cannot write the JSON report%s%s", o->json_path, why[0] ? ": " : "",
                      why);
            status = 1;
        }
    }
    // The page covers the whole trace: the pass made for the views serves it when it did too.
    if (!w->ag.has_from && !w->ag.has_to && !w->ag.filter && !w->ag.max_buckets)
        ro.aggregate = &a;
    if (o->html_path && cli_write_html(o->html_path, ctx, &ro, trace) != 0)
        status = 1;
    if (o->sarif_path && cli_write_sarif(o->sarif_path, ctx, &ro) != 0)
        status = 1;
    status |= write_file(w->collapsed, "collapsed stacks", do_collapsed, ctx, &a, w);
    status |= write_file(w->flamegraph, "flame graph", do_flamegraph, ctx, &a, w);
    status |= write_file(w->pprof, "pprof profile", do_pprof, ctx, &a, w);
    status |= write_file(w->massif, "massif file", do_massif, ctx, &a, w);
    *has_errors = cli_trace_has_errors(&t);
out:
    aggregate_free(&a);
    cli_trace_close(&t);
    return status;
}

int cmd_report(int argc, char** argv) {
    cli_report_opts_t o;
    cli_report_defaults(&o);
    views_t w;
    memset(&w, 0, sizeof w);
    w.v.sort = AG_METRIC_BYTES;
    w.metric = AG_METRIC_BYTES;
    const char* trace = NULL;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            cli_usage_report(stdout);
            return 0;
        }
        int r = cli_report_option(argc, argv, &i, &o);
        if (r == 0)
            r = view_option(argc, argv, &i, &w);
        if (r < 0)
            return 2;
        if (r > 0)
            continue;
        if (argv[i][0] == '-' && argv[i][1]) {
            cli_error("report: unknown option '%s'", argv[i]);
            return 2;
        }
        if (trace) {
            cli_error("report: one trace at a time ('%s' and '%s')", trace, argv[i]);
            return 2;
        }
        trace = argv[i];
    }
    if (!trace) {
        cli_error("report: which trace? usage: heaplens report [options] TRACE");
        return 2;
    }
    if (w.v.top < 0)
        w.v.top = 10;
    if (w.ag.has_from && w.ag.has_to && w.ag.to_ns < w.ag.from_ns) {
        cli_error("report: --to comes before --from");
        return 2;
    }
    char err[256];
    if (w.ag.filter && ag_filter_check(w.ag.filter, err, sizeof err) != 0) {
        cli_error("%s", err); // refused even where no view would use it
        return 1;
    }
    int has_errors;
    if (!has_view(&w) && !has_output(&w)) {
        if (cli_report_trace(trace, &o, NULL, 0, -1, 0, &has_errors) != 0)
            return 1;
    } else if (report_views(trace, &o, &w, &has_errors) != 0) {
        return 1;
    }
    return o.error_exitcode && has_errors ? o.error_exitcode : 0;
}
