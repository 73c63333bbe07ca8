// SPDX-License-Identifier: MIT
// report_valgrind.h - memcheck's own reports from a heaplens model, for the tools that read
// them (CTest, IDEs, CI scripts): its text (==PID== lines, loss records, summaries) and its XML
// (protocol 4, Valgrind's docs/internals/xml-output-protocol4.txt), with suppressions in
// Valgrind's format (vsupp.c). Stacks are memcheck's: the allocator's own function on top,
// nothing below main, at most --num-callers frames.
#ifndef HL_REPORT_VALGRIND_H
#define HL_REPORT_VALGRIND_H

#include <stdint.h>
#include <stdio.h>

#include "report.h"

// A frame as memcheck shows it and its suppressions see it.
typedef struct vg_frame_s {
    const char* fn;      // demangled name, NULL when unknown ("???")
    const char* mangled; // linkage name when known (the allocator's frame on top), else NULL
    const char* obj;     // the module's path, NULL when unknown
    const char* file;    // source path, NULL when unknown
    unsigned line;
    unsigned long long ip;
} vg_frame_t;

// --- vsupp.c: suppression files in Valgrind's format ------------------------------------------
// { NAME  TOOL:KIND  [match-leak-kinds: LIST | a Param's line]  fun:/obj:/src: patterns or ... }
// Patterns take * and ?; "..." stands for any number of frames; matching starts at the top frame
// and the stack may go on beyond the last pattern. Entries for other tools are kept but never
// match. A fun: pattern matches the demangled name, or a mangled one (_Z...) demangled.
typedef struct vsupp_s vsupp_t;

// Reads one file into s (a new set when s is NULL; files add up). Returns the set, or NULL with
// err set ("FILE:LINE: why") and s left as it was.
vsupp_t* vsupp_load(vsupp_t* s, const char* path, char* err, size_t errlen);
void vsupp_free(vsupp_t* s);
// The first suppression for memcheck error kind `kind` ("Leak", "Free", "Addr1", ...; for
// "Leak", leak_kind is the HL_LEAK_* of the record) that matches the frames (top first), or -1.
int vsupp_match(const vsupp_t* s, const char* kind, int leak_kind, const vg_frame_t* frames, int n);
size_t vsupp_count(const vsupp_t* s);
const char* vsupp_name(const vsupp_t* s, size_t i);
// "FILE:LINE" of suppression i's name line (for -v's used_suppression lines).
const char* vsupp_where(const vsupp_t* s, size_t i);

// --- report_valgrind.c --------------------------------------------------------------------------
enum { VG_LEAK_CHECK_NO, VG_LEAK_CHECK_SUMMARY, VG_LEAK_CHECK_FULL };

typedef struct vg_opts_s {
    int leak_check;       // VG_LEAK_CHECK_*
    unsigned show_kinds;  // bit per HL_LEAK_*: loss records shown
    unsigned error_kinds; // bit per HL_LEAK_*: loss records counted as errors (full check only)
    int num_callers;      // frames per stack, the allocator's included
    int gen_suppressions; // print a suppression for each error shown
    int verbosity;        // 0: -q (errors only), 1: default, 2: -v
    int show_counts;      // -s: the errors' list again after the summary
    const vsupp_t* supp;
    long pid;        // the process's pid, for ==PID== (0: the trace's)
    int exit_status; // -1: killed (exit_signal) or unknown
    int exit_signal;
    const char* tool_version; // "heaplens X.Y"
    char* const* vargv;       // heaplens's own command line, for <vargv>
    int nvargv;
} vg_opts_t;

typedef struct vg_report_s vg_report_t;

// Gathers the errors and loss records of the context's model, suppressions applied. NULL when
// memory runs out. The report reads c (and its model) until freed.
vg_report_t* vg_report_new(report_ctx_t* c, const vg_opts_t* o);
void vg_report_free(vg_report_t* r);
// Errors as memcheck counts them for --error-exitcode: heap errors, and with a full leak check
// the loss records of the kinds o->error_kinds names; suppressed ones not counted.
uint64_t vg_report_errors(const vg_report_t* r);
void vg_report_text(FILE* out, const vg_report_t* r);
void vg_report_xml(FILE* out, const vg_report_t* r);

#endif
