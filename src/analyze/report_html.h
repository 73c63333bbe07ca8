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

// The template itself (for tests): its bytes and length.
const char* report_html_template(size_t* len);

#endif
