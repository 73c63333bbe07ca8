// SPDX-License-Identifier: MIT
// growth_alert.c - heaplens run --alert-growth: the "progressive leak" of a long-running program
// said while it runs, not only in the report at its end. heaplens run's own process asks the
// program's agent to flush (its control socket), reads the trace as far as it is written, and
// runs the report's growth view over the last window; a call site is said once, the first time
// it is found growing. The program's threads never wait for this: its writer thread answers
// between passes.
#define _GNU_SOURCE
#include "growth_alert.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../analyze/aggregate.h"
#include "../analyze/report.h"

#define ALERT_ANSWER 4096 // a control answer: a trace's path and a few numbers

static int was_said(const growth_alert_t* g, uint32_t stack) {
    for (size_t i = 0; i < g->nsaid; i++)
        if (g->said[i] == stack)
            return 1;
    return 0;
}

static void note_said(growth_alert_t* g, uint32_t stack) {
    if (g->nsaid == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 16;
        uint32_t* fresh = realloc(g->said, cap * sizeof *fresh);
        if (!fresh)
            return; // said again next time: better than never
        g->said = fresh;
        g->cap = cap;
    }
    g->said[g->nsaid++] = stack;
}

// "FUNCTION (FILE:LINE)" of the site's innermost frame of the program.
static void where_of(report_ctx_t* ctx, uint32_t stack, char* out, size_t cap) {
    const report_frame_t* fr;
    int n = report_stack(ctx, stack, &fr);
    snprintf(out, cap, "an unknown place");
    for (int i = 0; i < n; i++) {
        if (!fr[i].function)
            continue;
        if (fr[i].file)
            snprintf(out, cap, "%s (%s:%u)", fr[i].function, fr[i].file, fr[i].line);
        else
            snprintf(out, cap, "%s (in %s)", fr[i].function, fr[i].module ? fr[i].module : "?");
        return;
    }
}

void growth_alert_check(growth_alert_t* g) {
    char ans[ALERT_ANSWER], when[32], trace[ALERT_ANSWER], tracing[16];
    if (g->is_off)
        return;
    if (cli_control_ask(g->pid, "status", ans, sizeof ans) != 0 ||
        cli_control_field(ans, "time", when, sizeof when) ||
        cli_control_field(ans, "tracing", tracing, sizeof tracing) ||
        cli_control_field(ans, "trace", trace, sizeof trace)) {
        g->is_off = 1; // gone, or no socket (--no-control): the report at the end says it all
        return;
    }
    if (trace[0] == '@') {
        g->is_off = 1; // the collector's trace: its host looks at it (heaplens shell ADDR PID)
        return;
    }
    if (strcmp(tracing, "on") != 0 || cli_control_ask(g->pid, "flush", ans, sizeof ans) != 0)
        return;
    int64_t now = strtoll(when, NULL, 10), from = now - (int64_t)(g->window_s * 1e9);
    cli_trace_t t;
    if (cli_trace_open(&t, trace, g->report) != 0) {
        g->is_off = 1;
        return;
    }
    aggregate_t a;
    memset(&a, 0, sizeof a);
    ag_opts_t ao = {.growth = 1, .has_from = 1, .from_ns = from > 0 ? from : 0};
    char err[512];
    ag_growth_t* grown = NULL;
    long n = aggregate_build(&a, t.ctx, trace, &ao, err, sizeof err) == 0
                 ? ag_growing_sites(&a, g->rate, &grown)
                 : -1;
    for (long i = 0; i < n; i++) {
        uint32_t stack = grown[i].site->stack;
        if (was_said(g, stack))
            continue;
        note_said(g, stack);
        char where[1024], rate[32], from_b[32], to_b[32];
        where_of(t.ctx, stack, where, sizeof where);
        fprintf(stderr,
                "==heaplens== growing at %.1f s: %s bytes/s from %s, live %s -> %s bytes over the "
                "last %.0f s\n",
                (double)now / 1e9, report_commas(rate, sizeof rate, (uint64_t)grown[i].bytes_per_s),
                where, report_commas(from_b, sizeof from_b, grown[i].live[0]),
                report_commas(to_b, sizeof to_b, grown[i].live[AG_GROWTH_WINDOWS]), g->window_s);
    }
    fflush(stderr);
    free(grown);
    aggregate_free(&a);
    cli_trace_close(&t);
}

void growth_alert_free(growth_alert_t* g) {
    free(g->said);
    g->said = NULL;
    g->nsaid = g->cap = 0;
}
