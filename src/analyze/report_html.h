// SPDX-License-Identifier: MIT
// report_html.h - the self-contained HTML page of a report (and of a diff): the page template
// (src/analyze/html/report.html, compiled in) with a JSON document embedded in it.
#ifndef HL_REPORT_HTML_H
#define HL_REPORT_HTML_H

#include <stddef.h>
#include <stdio.h>

// Writes the page with json_text (json_len bytes, the output of report_json or of the diff's
// JSON writer) as its data. "</" and "<!" in the JSON become "<\/" and "\u003c!" (the same JSON
// once parsed), so no string in it can end the script element. Returns 0, or -1 when writing
// failed.
int report_html(FILE* out, const char* json_text, size_t json_len);

typedef struct report_ctx_s report_ctx_t;
typedef struct report_opts_s report_opts_t;

// The whole page for a loaded trace: report_json's object plus every view of a second pass over
// the trace (aggregate.h: summary, sites, histogram, timeline, threads; ro->aggregate when the
// caller made that pass already) and the address map of the blocks the last scan judged,
// embedded in the page. Capped to what a person reads (report_html.c): what is left out is
// summed in "cut", "leak_records_cut" and "errors_cut", and stacks name frames of "frames".
// trace is the file the model came from. Returns 0, or -errno (err: a one-line reason) when the
// pass or the writing failed.
int report_html_trace(FILE* out, report_ctx_t* ctx, const report_opts_t* ro, const char* trace,
                      char* err, size_t errlen);

// The template itself (for tests): its bytes and length.
const char* report_html_template(size_t* len);

#endif
