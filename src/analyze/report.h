// SPDX-License-Identifier: MIT
// report.h - the reports a model turns into: the human one (memcheck's vocabulary, every line
// marked "==heaplens==") and the JSON contract of shared/acceptance/README.md, extended.
#ifndef HL_REPORT_H
#define HL_REPORT_H

#include <stdio.h>

#include "model.h"
#include "symbols.h"

typedef struct suppressions_s suppressions_t;

typedef struct report_child_s {
    long pid;
    const char* trace;
} report_child_t;

typedef struct report_opts_s {
    unsigned show_kinds;     // bit per HL_LEAK_* / HL_KIND_UNSCANNED shown as records in text
    int max_records;         // text: records shown; JSON has all
    const suppressions_t* supp;
    const char* trace_path;
    const report_child_t* children;
    size_t nchildren;
    int exit_status;         // from waitpid, -1 unknown
    int exit_signal;         // 0 none
    int is_live;             // text: the process runs on (heaplens shell): the heap is "now"
    // JSON only. Stacks written through this table (json_frames.h) when set; each report
    // otherwise makes its own, inline. The HTML page's data passes one that writes indices.
    struct json_frames_s* frames;
    size_t max_json_records; // leak records written, 0: all (the rest summed in leak_records_cut)
    size_t max_json_errors;  // heap errors written, 0: all (the rest counted in errors_cut)
    // HTML only: a pass already made over the whole trace (no window, no filter), or NULL.
    const struct aggregate_s* aggregate;
} report_opts_t;

// Symbolized frames of a stack, built once per stack and cached in the report context.
typedef struct report_frame_s {
    const char* function; // may be NULL
    const char* file;     // may be NULL
    unsigned line;
    const char* module;
    unsigned long long address;
    int is_inlined;
} report_frame_t;

typedef struct report_ctx_s report_ctx_t;

report_ctx_t* report_ctx_new(model_t* m, const char* sysroot);
// The same with a symbolizer made before (the modules the model names may be registered in it
// already, as their sym_handle says); the context owns it, and frees it on failure too.
report_ctx_t* report_ctx_new_with(model_t* m, symbolizer_t* sym);
// Separate debug information under DIR (symbolizer_add_debug_dir): 0, or -errno.
int report_ctx_add_debug_dir(report_ctx_t* c, const char* dir);
void report_ctx_free(report_ctx_t* c);
model_t* report_model(report_ctx_t* c);
// Frames of stack id (count returned, *frames owned by the context).
int report_stack(report_ctx_t* c, uint32_t stack, const report_frame_t** frames);
// The frames one return address of a stack stands for (more than one where calls were
// inlined, innermost first; one without a name where it cannot be named): into out, which has
// room for REPORT_IP_FRAMES_MAX. Returns their count. report_stack's frames are these, address
// after address, so a writer that keeps what it made of each address (json_frames.c) writes a
// stack without report_stack.
#define REPORT_IP_FRAMES_MAX 16
int report_ip_frames(report_ctx_t* c, uint64_t ip, report_frame_t* out);

// Leak totals and records after suppressions; records in model order.
typedef struct report_leaks_s {
    md_kind_total_t kinds[HL_NKINDS];
    md_kind_total_t suppressed;
    const md_leak_record_t** records;
    size_t nrecords;
} report_leaks_t;
int report_leaks(report_ctx_t* c, const suppressions_t* supp, report_leaks_t* out);

void report_text(FILE* out, report_ctx_t* c, const report_opts_t* o);
// A stack as the text report prints it (memcheck's "at 0x...: fn (file:line)", "by ..."), each
// line after indent.
void report_text_stack(FILE* out, report_ctx_t* c, uint32_t stack, const char* indent);
// 1234567 -> "1,234,567" in out; returns out.
const char* report_commas(char* out, size_t cap, unsigned long long v);
int report_json(FILE* out, report_ctx_t* c, const report_opts_t* o);
// JSON pieces every writer shares: a quoted, escaped string (null for NULL), and a stack as an
// array of frames {function, file, line, module, address, inlined}.
void report_json_string(FILE* out, const char* s);
void report_json_stack(FILE* out, report_ctx_t* c, uint32_t stack);
void report_json_argv(FILE* out, const model_t* m); // the command line as an array of strings

// "leak:PATTERN" lines (LeakSanitizer's format). Returns NULL and sets *err on failure.
suppressions_t* suppressions_load(const char* path, char* err, size_t errlen);
void suppressions_free(suppressions_t* s);
int suppressions_match(const suppressions_t* s, const report_frame_t* frames, int n);

#endif
