// SPDX-License-Identifier: MIT
// report_views.c - `heaplens report` views over an aggregate: --summary, --top/--sort,
// --histogram, --timeline, --threads, as text for a person and as extra keys of the JSON report.
#include <stdlib.h>
#include <string.h>

#include "aggregate.h"

const char* ag_frame_name(const report_frame_t* f, char* buf, size_t cap) {
    if (f->function)
        return f->function;
    if (f->module)
        snprintf(buf, cap, "%s@0x%llx", f->module, f->address);
    else
        snprintf(buf, cap, "0x%llx", f->address);
    return buf;
}

static const char* human(char* out, size_t cap, uint64_t v) {
    static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double d = (double)v;
    int u = 0;
    while (d >= 1024 && u < 4) {
        d /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(out, cap, "%llu B", (unsigned long long)v);
    else
        snprintf(out, cap, "%.1f %s", d, units[u]);
    return out;
}

static const char* kind_words(int kind) {
    static const char* w[] = {"definitely lost", "indirectly lost", "possibly lost",
                              "still reachable", "not scanned"};
    return kind >= 0 && kind < HL_NKINDS ? w[kind] : "?";
}

static double pct(uint64_t part, uint64_t whole) {
    return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

static void bar(FILE* out, uint64_t v, uint64_t max, int width) {
    int n = max ? (int)((double)v * width / (double)max + 0.5) : 0;
    for (int i = 0; i < n; i++)
        fputc('#', out);
}

// ---------------------------------------------------------------------------------------------
// Text
// ---------------------------------------------------------------------------------------------
static void text_window(FILE* out, const aggregate_t* a) {
    if (a->opts.has_from || a->opts.has_to)
        fprintf(out, "  window: %.3f ms .. %.3f ms\n", (double)a->start_ns / 1e6,
                (double)a->end_ns / 1e6);
    if (a->opts.filter)
        fprintf(out, "  filter: call sites with a function matching /%s/\n", a->opts.filter);
}

static void text_summary(FILE* out, report_ctx_t* c, const aggregate_t* a) {
    model_t* m = report_model(c);
    const ag_totals_t* t = &a->totals;
    char x[32], y[32], z[32], h[32];
    fprintf(out, "SUMMARY of %s (pid %llu)\n", m->exe ? m->exe : "?",
            (unsigned long long)m->pid);
    text_window(out, a);
    fprintf(out, "  allocations: %s, %s bytes (%s), from %s call sites\n",
            report_commas(x, sizeof x, t->allocations), report_commas(y, sizeof y, t->bytes),
            human(h, sizeof h, t->bytes), report_commas(z, sizeof z, t->sites));
    fprintf(out, "  frees: %s, %s bytes\n", report_commas(x, sizeof x, t->frees),
            report_commas(y, sizeof y, t->freed_bytes));
    fprintf(out, "  peak heap: %s bytes (%s) in %s blocks, at %.3f ms\n",
            report_commas(x, sizeof x, a->peak_bytes), human(h, sizeof h, a->peak_bytes),
            report_commas(y, sizeof y, a->peak_blocks), (double)a->peak_time_ns / 1e6);
    if (a->rss_peak)
        fprintf(out, "  peak RSS: %s bytes (%s)\n", report_commas(x, sizeof x, a->rss_peak),
                human(h, sizeof h, a->rss_peak));
    if (a->mapped_peak)
        fprintf(out, "  peak mapped (mmap): %s bytes (%s)\n", report_commas(x, sizeof x, a->mapped_peak),
                human(h, sizeof h, a->mapped_peak));
    fprintf(out, "  leaked (live at the end): %s bytes in %s blocks\n",
            report_commas(x, sizeof x, t->leaked_bytes), report_commas(y, sizeof y, t->leaked_blocks));
    for (int k = 0; k < HL_NKINDS; k++) {
        if (!t->leaks[k].blocks)
            continue;
        fprintf(out, "    %15s: %s bytes in %s blocks\n", kind_words(k),
                report_commas(x, sizeof x, t->leaks[k].bytes), report_commas(y, sizeof y, t->leaks[k].blocks));
    }
    fprintf(out, "  temporary allocations: %s (%.1f%% of allocations), %s bytes\n",
            report_commas(x, sizeof x, t->temporary), pct(t->temporary, t->allocations),
            report_commas(y, sizeof y, t->temporary_bytes));
    fputc('\n', out);
}

static void text_stack(FILE* out, report_ctx_t* c, uint32_t stack) {
    const report_frame_t* fr;
    int n = report_stack(c, stack, &fr);
    if (n == 0)
        fprintf(out, "      (no stack)\n");
    for (int i = 0; i < n; i++) {
        const report_frame_t* f = &fr[i];
        char buf[64];
        fprintf(out, "      %s %s", i == 0 ? "at" : "by", ag_frame_name(f, buf, sizeof buf));
        if (f->file)
            fprintf(out, " (%s:%u)", f->file, f->line);
        else if (f->module && f->function)
            fprintf(out, " (in %s)", f->module);
        if (f->is_inlined)
            fprintf(out, " [inlined]");
        fputc('\n', out);
    }
}

static void text_top(FILE* out, report_ctx_t* c, const aggregate_t* a, int top, int sort) {
    const ag_site_t** v;
    long n = ag_sorted_sites(a, sort, &v);
    if (n < 0)
        return;
    char w[6][32];
    fprintf(out, "TOP %d CALL SITES BY %s (%ld with any)\n", top, ag_metric_name(sort), n);
    text_window(out, a);
    for (long i = 0; i < n && i < top; i++) {
        const ag_site_t* s = v[i];
        fprintf(out,
                "#%ld  %s: %s  |  allocations %s, bytes %s, peak %s, leaked %s, temporary %s\n",
                i + 1, ag_metric_name(sort), report_commas(w[0], sizeof w[0], ag_site_metric(s, sort)),
                report_commas(w[1], sizeof w[1], s->allocations), report_commas(w[2], sizeof w[2], s->bytes),
                report_commas(w[3], sizeof w[3], s->peak_bytes),
                report_commas(w[4], sizeof w[4], s->leaked_bytes),
                report_commas(w[5], sizeof w[5], s->temporary));
        text_stack(out, c, s->stack);
    }
    if (n == 0)
        fprintf(out, "  (no call site has any)\n");
    fputc('\n', out);
    free(v);
}

static void text_histogram(FILE* out, const aggregate_t* a) {
    uint64_t max = 0;
    for (int k = 0; k < AG_HIST_BUCKETS; k++)
        if (a->hist[k].count > max)
            max = a->hist[k].count;
    char x[32], y[32], lo_s[32], hi_s[32];
    fprintf(out, "ALLOCATION SIZES (bytes)\n");
    text_window(out, a);
    fprintf(out, "  %12s  %12s  %12s  %15s\n", "from", "below", "count", "bytes");
    for (int k = 0; k < AG_HIST_BUCKETS; k++) {
        if (!a->hist[k].count)
            continue;
        uint64_t lo, hi;
        ag_hist_bounds(k, &lo, &hi);
        fprintf(out, "  %12s  %12s  %12s  %15s  ", report_commas(lo_s, sizeof lo_s, lo),
                k >= 64 ? "-" : report_commas(hi_s, sizeof hi_s, hi),
                report_commas(x, sizeof x, a->hist[k].count), report_commas(y, sizeof y, a->hist[k].bytes));
        bar(out, a->hist[k].count, max, 40);
        fputc('\n', out);
    }
    fputc('\n', out);
}

#define TEXT_TIMELINE_ROWS 40

static void text_timeline(FILE* out, report_ctx_t* c, const aggregate_t* a) {
    size_t n = a->ntimeline, per = (n + TEXT_TIMELINE_ROWS - 1) / TEXT_TIMELINE_ROWS;
    if (per == 0)
        per = 1;
    uint64_t max = 0;
    for (size_t i = 0; i < n; i++)
        if (a->timeline[i].heap_bytes > max)
            max = a->timeline[i].heap_bytes;
    char x[32], y[32], z[32], r[32];
    fprintf(out, "HEAP OVER TIME (highest of each interval)\n");
    text_window(out, a);
    fprintf(out, "  %12s  %15s  %10s  %15s  %15s\n", "ms", "heap bytes", "blocks", "mapped",
            "rss");
    for (size_t i = 0; i < n; i += per) {
        ag_point_t p = a->timeline[i];
        for (size_t j = i + 1; j < i + per && j < n; j++)
            ag_point_merge(&p, &a->timeline[j]);
        fprintf(out, "  %12.3f  %15s  %10s  %15s  %15s  ", (double)p.time_ns / 1e6,
                report_commas(x, sizeof x, p.heap_bytes), report_commas(y, sizeof y, p.heap_blocks),
                report_commas(z, sizeof z, p.mapped_bytes), report_commas(r, sizeof r, p.rss_bytes));
        bar(out, p.heap_bytes, max, 30);
        fputc('\n', out);
    }
    fprintf(out, "  peak: %s bytes in %s blocks at %.3f ms\n\n",
            report_commas(x, sizeof x, a->peak_bytes), report_commas(y, sizeof y, a->peak_blocks),
            (double)a->peak_time_ns / 1e6);
    report_stats_text(out, &report_model(c)->alloc_stats, a->start_ns, a->end_ns);
}

static void text_threads(FILE* out, const aggregate_t* a) {
    char w[5][32];
    fprintf(out, "THREADS\n");
    text_window(out, a);
    fprintf(out, "  %6s  %8s  %12s  %15s  %12s  %12s\n", "index", "tid", "allocations", "bytes",
            "frees", "temporary");
    for (size_t i = 0; i < a->nthreads; i++) {
        const ag_thread_t* t = &a->threads[i];
        if (!t->allocations && !t->frees && !t->tid)
            continue;
        fprintf(out, "  %6u  %8u  %12s  %15s  %12s  %12s\n", t->index, t->tid,
                report_commas(w[0], sizeof w[0], t->allocations), report_commas(w[1], sizeof w[1], t->bytes),
                report_commas(w[2], sizeof w[2], t->frees), report_commas(w[3], sizeof w[3], t->temporary));
    }
    fputc('\n', out);
}

static void text_growth(FILE* out, report_ctx_t* c, const aggregate_t* a, double min_rate) {
    ag_growth_t* g;
    long n = ag_growing_sites(a, min_rate, &g);
    if (n < 0)
        return;
    char w[AG_GROWTH_WINDOWS + 2][32];
    fprintf(out, "GROWING CALL SITES: live bytes rose in each of %d parts of the window", AG_GROWTH_WINDOWS);
    if (min_rate > 0)
        fprintf(out, ", by %s bytes/s or more", report_commas(w[0], sizeof w[0], (uint64_t)min_rate));
    fprintf(out, " (%ld)\n", n);
    text_window(out, a);
    for (long i = 0; i < n; i++) {
        fprintf(out, "#%ld  %s bytes/s  |  live bytes", i + 1,
                report_commas(w[0], sizeof w[0], (uint64_t)(g[i].bytes_per_s + 0.5)));
        for (int k = 0; k <= AG_GROWTH_WINDOWS; k++)
            fprintf(out, "%s%s", k ? " -> " : " ",
                    report_commas(w[k + 1], sizeof w[k + 1], g[i].live[k]));
        fputc('\n', out);
        text_stack(out, c, g[i].site->stack);
    }
    if (n == 0)
        fprintf(out, "  (no call site grew in every part)\n");
    fputc('\n', out);
    free(g);
}

void ag_views_text(FILE* out, report_ctx_t* c, const aggregate_t* a, const ag_view_opts_t* v) {
    if (v->summary)
        text_summary(out, c, a);
    if (v->top > 0)
        text_top(out, c, a, v->top, v->sort);
    if (v->histogram)
        text_histogram(out, a);
    if (v->timeline)
        text_timeline(out, c, a);
    if (v->threads)
        text_threads(out, a);
    if (v->growth)
        text_growth(out, c, a, v->growth_rate);
}

// ---------------------------------------------------------------------------------------------
// JSON
// ---------------------------------------------------------------------------------------------
#define U(x) ((unsigned long long)(x))

static void json_site(FILE* out, report_ctx_t* c, const ag_site_t* s) {
    fprintf(out,
            "{\"stack_id\": %u, \"allocations\": %llu, \"bytes\": %llu, \"frees\": %llu, "
            "\"peak_bytes\": %llu, \"peak_blocks\": %llu, \"leaked_bytes\": %llu, "
            "\"leaked_blocks\": %llu, \"temporary\": %llu, \"temporary_bytes\": %llu, "
            "\"stack\": ",
            s->stack, U(s->allocations), U(s->bytes), U(s->frees), U(s->peak_bytes),
            U(s->peak_blocks), U(s->leaked_bytes), U(s->leaked_blocks), U(s->temporary),
            U(s->temporary_bytes));
    report_json_stack(out, c, s->stack);
    fputc('}', out);
}

void ag_views_json(FILE* out, report_ctx_t* c, const aggregate_t* a, const ag_view_opts_t* v) {
    const ag_totals_t* t = &a->totals;
    if (v->summary) {
        fprintf(out,
                ",\n  \"summary\": {\"window\": {\"from_ns\": %lld, \"to_ns\": %lld}, \"filter\": ",
                (long long)a->start_ns, (long long)a->end_ns);
        report_json_string(out, a->opts.filter);
        fprintf(out,
                ", \"allocations\": %llu, \"bytes_allocated\": %llu, \"frees\": %llu, "
                "\"bytes_freed\": %llu, \"sites\": %llu, \"peak_heap_bytes\": %llu, "
                "\"peak_heap_blocks\": %llu, \"peak_time_ns\": %lld, \"rss_peak\": %llu, "
                "\"mapped_bytes_peak\": %llu, \"leaked_bytes\": %llu, \"leaked_blocks\": %llu, "
                "\"leaks\": {",
                U(t->allocations), U(t->bytes), U(t->frees), U(t->freed_bytes), U(t->sites),
                U(a->peak_bytes), U(a->peak_blocks), (long long)a->peak_time_ns, U(a->rss_peak),
                U(a->mapped_peak), U(t->leaked_bytes), U(t->leaked_blocks));
        for (int k = 0; k < HL_NKINDS; k++)
            fprintf(out, "%s\"%s\": {\"bytes\": %llu, \"blocks\": %llu}", k ? ", " : "",
                    hl_leak_kind_name(k), U(t->leaks[k].bytes), U(t->leaks[k].blocks));
        fprintf(out, "}, \"temporary_allocations\": %llu, \"temporary_bytes\": %llu}",
                U(t->temporary), U(t->temporary_bytes));
    }
    if (v->top > 0) {
        const ag_site_t** s;
        long n = ag_sorted_sites(a, v->sort, &s);
        fprintf(out, ",\n  \"sites_sort\": \"%s\",\n  \"sites\": [", ag_metric_name(v->sort));
        for (long i = 0; i < n && i < v->top; i++) {
            fputs(i ? ",\n    " : "\n    ", out);
            json_site(out, c, s[i]);
        }
        fputs("\n  ]", out);
        if (n >= 0) // with no site too: the array is allocated all the same
            free(s);
    }
    if (v->histogram) {
        fputs(",\n  \"histogram\": [", out);
        int first = 1;
        for (int k = 0; k < AG_HIST_BUCKETS; k++) {
            if (!a->hist[k].count)
                continue;
            uint64_t lo, hi;
            ag_hist_bounds(k, &lo, &hi);
            fprintf(out, "%s{\"min\": %llu, \"below\": %llu, \"count\": %llu, \"bytes\": %llu}",
                    first ? "" : ", ", U(lo), U(hi), U(a->hist[k].count), U(a->hist[k].bytes));
            first = 0;
        }
        fputc(']', out);
    }
    if (v->timeline) {
        fprintf(out,
                ",\n  \"timeline\": {\"bucket_ns\": %lld, \"peak\": {\"time_ns\": %lld, "
                "\"heap_bytes\": %llu, \"heap_blocks\": %llu}, \"points\": [",
                (long long)a->bucket_ns, (long long)a->peak_time_ns, U(a->peak_bytes),
                U(a->peak_blocks));
        for (size_t i = 0; i < a->ntimeline; i++) {
            const ag_point_t* p = &a->timeline[i];
            fprintf(out,
                    "%s{\"time_ns\": %lld, \"heap_bytes\": %llu, \"heap_blocks\": %llu, "
                    "\"mapped_bytes\": %llu, \"rss_bytes\": %llu}",
                    i ? ",\n    " : "\n    ", (long long)p->time_ns, U(p->heap_bytes),
                    U(p->heap_blocks), U(p->mapped_bytes), U(p->rss_bytes));
        }
        fputs("\n  ]}", out);
    }
    if (v->threads) {
        fputs(",\n  \"threads\": [", out);
        int first = 1;
        for (size_t i = 0; i < a->nthreads; i++) {
            const ag_thread_t* th = &a->threads[i];
            if (!th->allocations && !th->frees && !th->tid)
                continue;
            fprintf(out,
                    "%s{\"index\": %u, \"tid\": %u, \"allocations\": %llu, \"bytes\": %llu, "
                    "\"frees\": %llu, \"bytes_freed\": %llu, \"temporary\": %llu}",
                    first ? "\n    " : ",\n    ", th->index, th->tid, U(th->allocations),
                    U(th->bytes), U(th->frees), U(th->freed_bytes), U(th->temporary));
            first = 0;
        }
        fputs("\n  ]", out);
    }
    if (v->growth) {
        ag_growth_t* g;
        long n = ag_growing_sites(a, v->growth_rate, &g);
        fprintf(out, ",\n  \"growth\": {\"parts\": %d, \"min_bytes_per_s\": %.0f, \"sites\": [",
                AG_GROWTH_WINDOWS, v->growth_rate);
        for (long i = 0; i < n; i++) {
            fprintf(out, "%s{\"bytes_per_s\": %.0f, \"live_bytes\": [", i ? ",\n    " : "\n    ",
                    g[i].bytes_per_s);
            for (int k = 0; k <= AG_GROWTH_WINDOWS; k++)
                fprintf(out, "%s%llu", k ? ", " : "", U(g[i].live[k]));
            fputs("], \"site\": ", out);
            json_site(out, c, g[i].site);
            fputc('}', out);
        }
        fputs(n > 0 ? "\n  ]}" : "]}", out);
        free(g);
    }
}
