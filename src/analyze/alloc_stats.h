// SPDX-License-Identifier: MIT
// alloc_stats.h - the allocator's and the process's figures over time (REC_ALLOC_STATS, from
// --allocator-stats), each beside the traced live heap of the same moment: gathered by the
// model's pass (alloc_stats.c), shown by report_stats.c in the timeline view, the JSON report
// and the page. Memory is bounded: at most AS_SAMPLES_MAX samples, evenly thinned.
#ifndef HL_ALLOC_STATS_H
#define HL_ALLOC_STATS_H

#include <stdint.h>
#include <stdio.h>

#include "../common/format.h"
#include "reader.h"

#define AS_SAMPLES_MAX 2048

typedef struct as_sample_s {
    int64_t time_ns;
    uint64_t heap_bytes; // the traced live heap then
    uint64_t value[HL_AS_COUNT];
    uint32_t available; // bit k: value[k] is a figure (else: not available)
    uint32_t arenas;    // the allocator's arenas (malloc_info), 0 when it does not say
} as_sample_t;

typedef struct as_arenas_s {
    uint32_t listed; // of the sample's `arenas`, at most HL_AS_ARENAS_MAX
    uint64_t v[HL_AS_ARENAS_MAX][HL_AS_ARENA_FIELDS];
} as_arenas_t;

typedef struct as_series_s {
    uint64_t records;     // REC_ALLOC_STATS records read
    int source;           // HL_AS_SRC_* of the latest
    uint32_t available;   // the values any record had
    as_sample_t* samples; // every stride-th record, in time order
    size_t n;
    uint64_t stride;
    // The record with the most live heap (the first such): "at the heap's peak"; and the last.
    as_sample_t peak, last;
    as_arenas_t peak_arenas, last_arenas;
    int failed; // out of memory: samples are missing (peak and last are not)
} as_series_t;

void as_note(as_series_t* s, const rd_record_t* r, uint64_t heap_bytes);
void as_free(as_series_t* s);
const char* as_source_name(int source);
const char* as_value_name(int k); // the JSON key of value k

// report_stats.c: the timeline view's table and the line at the peak; the JSON report's
// "allocator_stats" key (with its comma and newline); the page's parts of its own (the
// allocator chart, allocations by tag), put in before </body>.
void report_stats_text(FILE* out, const as_series_t* s, int64_t from_ns, int64_t to_ns);
void report_stats_json(FILE* out, const as_series_t* s);
void report_stats_html(FILE* out);

#endif
