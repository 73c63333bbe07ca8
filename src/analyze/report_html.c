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
    fwrite(rest, 1, len - (size_t)(rest - t), out);
    return ferror(out) ? -1 : 0;
}

#define HTML_MAX_SITES 20000  // the page merges small frames anyway; this bounds the file

// "address_map": {"exit": [[addr, size, state], ...]}: the blocks of the last scan with its
// verdicts (at most AG_MAP_MAX, the lowest addresses). No map without a scan: the trace tells
// where blocks lay only in its verdicts, and the page says so when the key is missing.
static void json_address_map(FILE* out, const aggregate_t* a) {
    if (!a->has_exit_map)
        return;
    fputs(",\n  \"address_map\": {\"exit\": [", out);
    for (size_t i = 0; i < a->nexit_map; i++) {
        const ag_block_t* b = &a->exit_map[i];
        const char* state = b->kind == HL_LEAK_REACHABLE ? "live" : hl_leak_kind_name(b->kind);
        fprintf(out, "%s[%llu, %llu, \"%s\"]", i ? ", " : "", (unsigned long long)b->addr,
                (unsigned long long)b->size, state);
    }
    fputs("]}", out);
}

int report_html_trace(FILE* out, report_ctx_t* ctx, const report_opts_t* ro, const char* trace,
                      char* err, size_t errlen) {
    aggregate_t a;
    memset(&a, 0, sizeof a);
    ag_opts_t ao;
    memset(&ao, 0, sizeof ao);
    int rc = aggregate_build(&a, ctx, trace, &ao, err, errlen);
    if (rc != 0)
        return rc;
    char* buf = NULL;
    size_t len = 0;
    FILE* mem = open_memstream(&buf, &len);
    if (!mem) {
        aggregate_free(&a);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    rc = report_json(mem, ctx, ro);
    if (fflush(mem) != 0)
        rc = -EIO;
    // report_json's object, reopened before its closing brace for the views' keys
    size_t end = len;
    while (end > 0 && buf[end - 1] != '}')
        end--;
    if (rc == 0 && end > 0) {
        end--;
        while (end > 0 && (buf[end - 1] == '\n' || buf[end - 1] == ' '))
            end--;
        fseeko(mem, (off_t)end, SEEK_SET);
        ag_view_opts_t v = {.summary = 1, .histogram = 1, .timeline = 1, .threads = 1,
                            .top = HTML_MAX_SITES, .sort = AG_METRIC_BYTES};
        ag_views_json(mem, ctx, &a, &v);
        json_address_map(mem, &a);
        fputs("\n}\n", mem);
    } else if (rc == 0) {
        rc = -EINVAL;
    }
    if (fclose(mem) != 0 && rc == 0)
        rc = -EIO;
    aggregate_free(&a);
    if (rc == 0 && report_html(out, buf, len) != 0)
        rc = -EIO;
    if (rc != 0)
        snprintf(err, errlen, "cannot write the HTML report (%s)", strerror(-rc));
    free(buf);
    return rc;
}
