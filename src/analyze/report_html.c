// SPDX-License-Identifier: MIT
// report_html.c - the HTML report: the page template, compiled into the binary from
// src/analyze/html/report.html (the Makefile turns it into report_template.h, an array of its
// bytes), with the report's JSON put in place of the marker {{HEAPLENS_DATA}} inside
// <script type="application/json" id="data">. The page draws everything itself from that JSON.
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate.h"
#include "alloc_stats.h"
#include "json_frames.h"
#include "report.h"
#include "report_html.h"

#if defined(__has_include)
#if __has_include("report_template.h")
#include "report_template.h" // static const unsigned char hl_report_template[]; (+ a 0 byte)
#define HL_HAVE_TEMPLATE 1
#endif
#endif

#ifndef HL_HAVE_TEMPLATE
// Built without the generated header (the Makefile rule is missing): a bare page that still
// carries the data, so nothing that depends on --html breaks.
static const unsigned char hl_report_template[] =
    "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>heaplens report</title></head>"
    "<body><p>This heaplens was built without its report template; the data follows.</p>"
    "<pre id=\"raw\"></pre><script type=\"application/json\" id=\"data\">{{HEAPLENS_DATA}}"
    "</script><script>document.getElementById('raw').textContent="
    "JSON.stringify(JSON.parse(document.getElementById('data').textContent),null,1);</script>"
    "</body></html>\n";
#endif

#define MARKER "{{HEAPLENS_DATA}}"

const char* report_html_template(size_t* len) {
    const char* t = (const char*)hl_report_template;
    *len = strlen(t); // the generated array ends with a 0 byte
    return t;
}

// The JSON, made safe inside a <script> element. Outside strings JSON has no '<' at all, and
// inside strings "\/" and "\u003c" are the same characters as "/" and "<", so this changes
// nothing for JSON.parse while making "</script" and "<!--" impossible in the element's text.
static void write_json_escaped(FILE* out, const char* s, size_t n) {
    size_t from = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        if (s[i] != '<' || (s[i + 1] != '/' && s[i + 1] != '!'))
            continue;
        fwrite(s + from, 1, i - from, out);
        fputs(s[i + 1] == '/' ? "<\\/" : "\\u003c!", out);
        from = i + 2;
        i++;
    }
    fwrite(s + from, 1, n - from, out);
}

int report_html(FILE* out, const char* json_text, size_t json_len) {
    size_t len;
    const char* t = report_html_template(&len);
    const char* at = strstr(t, MARKER);
    if (!at) // a template without its marker: an empty page is worse than a clear failure
        return -1;
    fwrite(t, 1, (size_t)(at - t), out);
    if (json_text && json_len)
        write_json_escaped(out, json_text, json_len);
    else
        fputs("null", out);
    const char* rest = at + strlen(MARKER);
    const char* body_end = strstr(rest, "</body>"); // the allocator chart goes in before it
    if (body_end) {
        fwrite(rest, 1, (size_t)(body_end - rest), out);
        report_stats_html(out);
        rest = body_end;
    }
    fwrite(rest, 1, len - (size_t)(rest - t), out);
    return ferror(out) ? -1 : 0;
}

// What the page carries at most. A person reads the biggest sites and leaks, not the 200,000th;
// a browser opens a page of a few MB in a second, not one of 100 MB. Past these the page says
// what it left out and how much of the totals that was; `report --json` keeps everything.
#define HTML_SITES_PER_METRIC 500  // the top sites by each of the 5 metrics: at most 2500
#define HTML_MAX_LEAK_RECORDS 1000 // the biggest, in the order of the text report
#define HTML_MAX_ERRORS 500        // the page lists the first 500 (report.html)
#define HTML_MAX_MAP_BLOCKS 50000  // of the address map at exit, the lowest addresses

#define U(x) ((unsigned long long)(x))

static void json_site_metrics(FILE* out, const ag_site_t* s) {
    fprintf(out,
            "\"allocations\": %llu, \"bytes\": %llu, \"frees\": %llu, \"peak_bytes\": %llu, "
            "\"peak_blocks\": %llu, \"leaked_bytes\": %llu, \"leaked_blocks\": %llu, "
            "\"temporary\": %llu, \"temporary_bytes\": %llu",
            U(s->allocations), U(s->bytes), U(s->frees), U(s->peak_bytes), U(s->peak_blocks),
            U(s->leaked_bytes), U(s->leaked_blocks), U(s->temporary), U(s->temporary_bytes));
}

// "sites": the union of the top HTML_SITES_PER_METRIC by each metric (the flame graph and the
// top table can switch metric and still see the biggest), by bytes first; their stacks name
// frames of the "frames" array. What is left out goes to "cut": {"sites": {...}}, summed, so
// the page can still show every total (as one "cut" frame of the flame graph).
static int json_sites(FILE* out, report_ctx_t* c, const aggregate_t* a, json_frames_t* ft,
                      FILE* cut) {
    char* chosen = calloc(a->nsites + 1, 1);
    const ag_site_t** top[AG_METRIC_COUNT];
    long ntop[AG_METRIC_COUNT];
    if (!chosen || ag_top_sites(a, HTML_SITES_PER_METRIC, top, ntop) != 0) {
        free(chosen);
        return -ENOMEM;
    }
    for (int m = 0; m < AG_METRIC_COUNT; m++)
        for (long i = 0; i < ntop[m]; i++)
            chosen[top[m][i] - a->sites] = 1;
    const ag_site_t** by_bytes = top[AG_METRIC_BYTES];
    fprintf(out, ",\n  \"sites_sort\": \"%s\",\n  \"sites\": [", ag_metric_name(AG_METRIC_BYTES));
    size_t shown = 0;
    ag_site_t rest;
    memset(&rest, 0, sizeof rest);
    size_t nrest = 0;
    // sites with bytes, biggest first; then chosen ones without (leaked or temporary only
    // in a window cannot be, but a zero-byte site can have allocations); the same scan over
    // every site sums what is left out
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < (pass ? a->nsites : (size_t)ntop[AG_METRIC_BYTES]); i++) {
            const ag_site_t* s = pass ? &a->sites[i] : by_bytes[i];
            size_t k = (size_t)(s - a->sites);
            if (chosen[k] == 0 && pass && s->is_kept &&
                (s->allocations || s->frees || s->leaked_blocks)) {
                nrest++;
                rest.allocations += s->allocations;
                rest.bytes += s->bytes;
                rest.frees += s->frees;
                rest.peak_bytes += s->peak_bytes;
                rest.peak_blocks += s->peak_blocks;
                rest.leaked_bytes += s->leaked_bytes;
                rest.leaked_blocks += s->leaked_blocks;
                rest.temporary += s->temporary;
                rest.temporary_bytes += s->temporary_bytes;
            }
            if (chosen[k] != 1)
                continue;
            chosen[k] = 2; // written
            fputs(shown++ ? ",\n    " : "\n    ", out);
            fprintf(out, "{\"stack_id\": %u, ", s->stack);
            json_site_metrics(out, s);
            fputs(", \"stack\": ", out);
            json_frames_stack(out, ft, c, s->stack);
            fputc('}', out);
        }
    }
    fputs("\n  ]", out);
    if (nrest) {
        fprintf(cut, "%s\"sites\": {\"shown\": %zu, \"sites\": %zu, \"per_metric\": %d, ",
                ftell(cut) ? ", " : "", shown, nrest, HTML_SITES_PER_METRIC);
        json_site_metrics(cut, &rest);
        fputc('}', cut);
    }
    free(chosen);
    for (int m = 0; m < AG_METRIC_COUNT; m++)
        free(top[m]);
    return 0;
}

// "address_map": {"exit": [[addr, size, state], ...]}: the blocks of the last scan with its
// verdicts (the lowest addresses, at most HTML_MAX_MAP_BLOCKS). No map without a scan: the
// trace tells where blocks lay only in its verdicts, and the page says so when the key is
// missing.
static void json_address_map(FILE* out, const aggregate_t* a, FILE* cut) {
    if (!a->has_exit_map)
        return;
    size_t n = a->nexit_map < HTML_MAX_MAP_BLOCKS ? a->nexit_map : HTML_MAX_MAP_BLOCKS;
    fputs(",\n  \"address_map\": {\"exit\": [", out);
    for (size_t i = 0; i < n; i++) {
        const ag_block_t* b = &a->exit_map[i];
        const char* state = b->kind == HL_LEAK_REACHABLE ? "live" : hl_leak_kind_name(b->kind);
        fprintf(out, "%s[%llu, %llu, \"%s\"]", i ? ", " : "", U(b->addr), U(b->size), state);
    }
    fputs("]}", out);
    if (a->exit_map_total > n)
        fprintf(cut, "%s\"address_map\": {\"shown\": %zu, \"blocks\": %llu}",
                ftell(cut) ? ", " : "", n, U(a->exit_map_total - n));
}

// The page's data: report_json's object (leak records and errors capped), reopened before its
// closing brace for the views, the frame table and what was cut.
static int page_json(FILE* mem, char** buf, size_t* len, report_ctx_t* ctx,
                     const report_opts_t* ro, const aggregate_t* a) {
    json_frames_t* ft = json_frames_new(1);
    char* cutbuf = NULL;
    size_t cutlen = 0;
    FILE* cut = open_memstream(&cutbuf, &cutlen);
    if (!ft || !cut) {
        json_frames_free(ft);
        if (cut)
            fclose(cut);
        free(cutbuf);
        return -ENOMEM;
    }
    report_opts_t po = *ro;
    po.frames = ft;
    po.max_json_records = HTML_MAX_LEAK_RECORDS;
    po.max_json_errors = HTML_MAX_ERRORS;
    int rc = report_json(mem, ctx, &po);
    if (fflush(mem) != 0)
        rc = -EIO;
    size_t end = *len;
    while (end > 0 && (*buf)[end - 1] != '}')
        end--;
    if (rc == 0 && end > 0) {
        end--;
        while (end > 0 && ((*buf)[end - 1] == '\n' || (*buf)[end - 1] == ' '))
            end--;
        fseeko(mem, (off_t)end, SEEK_SET);
        ag_view_opts_t v = {.summary = 1, .histogram = 1, .timeline = 1, .threads = 1};
        ag_views_json(mem, ctx, a, &v);
        rc = json_sites(mem, ctx, a, ft, cut);
        json_address_map(mem, a, cut);
        fputs(",\n  \"frames\": ", mem);
        json_frames_write_table(mem, ft);
        fflush(cut);
        if (cutlen)
            fprintf(mem, ",\n  \"cut\": {%s}", cutbuf);
        fputs("\n}\n", mem);
    } else if (rc == 0) {
        rc = -EINVAL;
    }
    fclose(cut);
    free(cutbuf);
    json_frames_free(ft);
    return rc;
}

int report_html_trace(FILE* out, report_ctx_t* ctx, const report_opts_t* ro, const char* trace,
                      char* err, size_t errlen) {
    aggregate_t own;
    memset(&own, 0, sizeof own);
    const aggregate_t* a = ro->aggregate;
    if (!a) {
        ag_opts_t ao;
        memset(&ao, 0, sizeof ao);
        int rc = aggregate_build(&own, ctx, trace, &ao, err, errlen);
        if (rc != 0)
            return rc;
        a = &own;
    }
    char* buf = NULL;
    size_t len = 0;
    FILE* mem = open_memstream(&buf, &len);
    if (!mem) {
        aggregate_free(&own);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    int rc = page_json(mem, &buf, &len, ctx, ro, a);
    if (fclose(mem) != 0 && rc == 0)
        rc = -EIO;
    aggregate_free(&own);
    if (rc == 0 && report_html(out, buf, len) != 0)
        rc = -EIO;
    if (rc != 0)
        snprintf(err, errlen, "cannot write the HTML report (%s)", strerror(-rc));
    free(buf);
    return rc;
}
