// SPDX-License-Identifier: MIT
// aggregate.h - a second streaming pass over a trace for the views people look at: the heap
// over time, per call site numbers (peak, leaked, temporary), an allocation size histogram and
// per-thread totals. Memory grows with the distinct stacks and allocation sites, never with the
// events or the live blocks.
#ifndef HL_AGGREGATE_H
#define HL_AGGREGATE_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "report.h"

#define AG_DEFAULT_BUCKETS 1000
#define AG_HIST_BUCKETS 65 // 0: size 0; k >= 1: sizes in [2^(k-1), 2^k)

typedef struct ag_opts_s {
    size_t max_buckets;    // timeline points at most (0: AG_DEFAULT_BUCKETS)
    int has_from, has_to;
    int64_t from_ns, to_ns; // window of events that count, inclusive
    const char* filter;    // POSIX extended regex on function names, or NULL
    int growth;            // the window cut in AG_GROWTH_WINDOWS for the growth view
} ag_opts_t;

// The growth view: the window is cut in this many equal parts, and a call site grows when its
// live bytes rose across every one of them (the "progressive leak" of a long-running server,
// not a site that allocated once and holds it).
#define AG_GROWTH_WINDOWS 4

// One timeline bucket: maxima over [time_ns, time_ns + bucket width).
typedef struct ag_point_s {
    int64_t time_ns;
    uint64_t heap_bytes, heap_blocks; // the bucket's highest heap, and the blocks then
    uint64_t mapped_bytes, rss_bytes; // maxima of the bucket
} ag_point_t;

// A later bucket folded into *into, which then covers both: the higher heap with its blocks,
// the higher mapping and RSS (into keeps its start).
static inline void ag_point_merge(ag_point_t* into, const ag_point_t* later) {
    if (later->heap_bytes > into->heap_bytes) {
        into->heap_bytes = later->heap_bytes;
        into->heap_blocks = later->heap_blocks;
    }
    if (later->mapped_bytes > into->mapped_bytes)
        into->mapped_bytes = later->mapped_bytes;
    if (later->rss_bytes > into->rss_bytes)
        into->rss_bytes = later->rss_bytes;
}

// A trace of a program with millions of call paths has as many sites (tree --recursive: 6.3
// million, one per allocation): every 8 bytes here are 50 MB of the page's pass. So the pass's
// scratch shares room with what only its end fills in, and the epoch with the filter's flag.
#define AG_EPOCH_BITS 31 // the stored epoch's width (aggregate.c: epoch_advance keeps it exact)

typedef struct ag_site_s {
    uint32_t stack;
    uint32_t is_kept : 1;              // passes --filter (always 1 without one)
    uint32_t epoch : AG_EPOCH_BITS;    // scratch: the peak epoch of the last change (its low bits)
    uint64_t allocations, bytes;       // allocated in the window
    uint64_t frees;
    uint64_t peak_bytes, peak_blocks;  // live at the peak
    uint64_t temporary, temporary_bytes;
    // During the pass, what the site has live (scratch); once it is over, what it leaked:
    // allocated in the window, live at the end (with a window: estimated, see aggregate.c).
    union {
        uint64_t live_bytes;
        uint64_t leaked_bytes;
    };
    union {
        uint64_t live_blocks;
        uint64_t leaked_blocks;
    };
} ag_site_t;

typedef struct ag_bucket_s {
    uint64_t count, bytes;
} ag_bucket_t;

typedef struct ag_thread_s {
    uint32_t index;
    uint32_t tid; // 0 when the trace never named it
    uint64_t allocations, bytes, frees, freed_bytes, temporary;
    int64_t last_alloc_ns; // scratch: its latest ALLOC (a temporary's allocation)
} ag_thread_t;

// A block of the address map: where the last scan found it, and its verdict (HL_LEAK_*).
typedef struct ag_block_s {
    uint64_t addr, size;
    int kind;
} ag_block_t;

#define AG_MAP_MAX 200000 // blocks of the address map kept (the lowest addresses)

typedef struct ag_totals_s {
    uint64_t allocations, bytes, frees, freed_bytes;
    uint64_t temporary, temporary_bytes;
    uint64_t leaked_bytes, leaked_blocks;
    md_kind_total_t leaks[HL_NKINDS];
    uint64_t sites; // kept call sites with an allocation in the window
} ag_totals_t;

typedef struct aggregate_s {
    ag_opts_t opts;
    int64_t start_ns, end_ns; // the window actually covered
    int64_t bucket_ns;        // timeline bucket width
    ag_point_t* timeline;
    size_t ntimeline;
    int64_t peak_time_ns; // exact: the first moment the (kept) heap reached its maximum
    uint64_t peak_bytes, peak_blocks;
    uint64_t mapped_peak, rss_peak;
    ag_site_t* sites; // the call sites that had any event, in order of first event
    size_t nsites, sites_cap;
    uint32_t* site_slot; // by stack id: 1 + index into sites, 0 for none
    size_t nstacks;
    ag_bucket_t hist[AG_HIST_BUCKETS];
    ag_thread_t* threads; // in order of their index (which may be sparse)
    size_t nthreads;
    ag_totals_t totals;
    int is_filtered;
    int has_exit_map;     // the trace has a scan: exit_map holds its verdicts' blocks
    ag_block_t* exit_map; // in the scan's order (address order), at most AG_MAP_MAX
    size_t nexit_map, exit_map_cap;
    uint64_t exit_map_total; // blocks the last scan judged, kept in exit_map or not
    // growth (opts.growth): each site's live bytes at the window's start and each part's end,
    // growth_live[k][site index] for the sites known then (later ones had none)
    uint64_t* growth_live[AG_GROWTH_WINDOWS + 1];
    size_t growth_n[AG_GROWTH_WINDOWS + 1];
    int growth_taken; // boundaries passed so far
    int64_t growth_start_ns; // the window's start, or the trace's first record when later
    size_t site_slot_cap;
    struct pass_s* stream; // aggregate_begin .. aggregate_end: the pass fed record by record
} aggregate_t;

// A call site whose live bytes rose across every part of the window: its growth in bytes per
// second over the whole window, and its live bytes at each boundary.
typedef struct ag_growth_s {
    const ag_site_t* site;
    double bytes_per_s;
    uint64_t live[AG_GROWTH_WINDOWS + 1];
} ag_growth_t;
// The growing sites, fastest first, those at min_rate bytes/s or more (*out: malloc'd, caller
// frees). Their count, or -1 when memory runs out.
long ag_growing_sites(const aggregate_t* a, double min_rate, ag_growth_t** out);

// Parse "123", "123ns", "1.5ms", "2s", "10us" into nanoseconds. Returns 0 or -EINVAL.
int ag_parse_time(const char* s, int64_t* out_ns);

// Is re a --filter the pass can use? 0, or -EINVAL with a one-line reason in err.
int ag_filter_check(const char* re, char* err, size_t errlen);

// Run the pass over the trace at path, already loaded into c's model. Returns 0, or -errno with
// a one-line reason in err (bad regex, unreadable file, out of memory).
int aggregate_build(aggregate_t* a, report_ctx_t* c, const char* path, const ag_opts_t* o,
                    char* err, size_t errlen);
void aggregate_free(aggregate_t* a);

// The same pass over the whole trace (no window, filter or growth) fed by the model's own
// reading, one pass instead of two: aggregate_begin before model_load_observed, which gives
// every record to aggregate_record (arg: a) after the model took it, and aggregate_end once the
// model is loaded. Everything is as aggregate_build makes it but the timeline: its bucket width
// is not known before the end, so it starts at AG_STREAM_BUCKET_NS and doubles (pairs of
// buckets merged: the same maxima) whenever the buckets would pass max_buckets; the page draws
// between half and all of them. 0, or -ENOMEM (aggregate_record: non-zero stops the reading).
#define AG_STREAM_BUCKET_NS 1000 // 1 us: finer than any trace's sampling
int aggregate_begin(aggregate_t* a, model_t* m, size_t max_buckets);
int aggregate_record(const rd_record_t* r, void* a);
int aggregate_end(aggregate_t* a, char* err, size_t errlen);
// The call site of a stack by its number (model_stack_number), or NULL when no event named it.
const ag_site_t* ag_site_for(const aggregate_t* a, uint32_t stack);
// The thread with this index, or NULL when the trace never named it.
const ag_thread_t* ag_thread_for(const aggregate_t* a, uint32_t index);

// Metrics a site can be ranked or drawn by.
enum ag_metric {
    AG_METRIC_ALLOCATIONS,
    AG_METRIC_BYTES,
    AG_METRIC_PEAK,
    AG_METRIC_LEAKED,
    AG_METRIC_TEMPORARY,
    AG_METRIC_COUNT
};
int ag_metric_parse(const char* s); // -1 when unknown
const char* ag_metric_name(int metric);
uint64_t ag_site_metric(const ag_site_t* s, int metric);
// Kept sites with a non-zero metric (or any activity when all is set), best first; returns the
// count, *out malloc'd (caller frees), or -ENOMEM.
long ag_sorted_sites(const aggregate_t* a, int metric, const ag_site_t*** out);
// The same, the first k only (in n log k), by every metric at once: out[metric] malloc'd
// (caller frees each), n[metric] their count. 0, or -ENOMEM (nothing to free then).
int ag_top_sites(const aggregate_t* a, size_t k, const ag_site_t** out[AG_METRIC_COUNT],
                 long n[AG_METRIC_COUNT]);

// Histogram bucket bounds: [lo, hi) in bytes.
void ag_hist_bounds(int k, uint64_t* lo, uint64_t* hi);

// --- the outputs (report_views.c, report_flame.c, report_pprof.c, report_massif.c) ----------
typedef struct ag_view_opts_s {
    int summary, histogram, timeline, threads;
    int top;     // call sites shown (0: none)
    int sort;    // AG_METRIC_*
    int growth;         // the growing call sites
    double growth_rate; // ... growing at least this fast (bytes per second)
} ag_view_opts_t;

void ag_views_text(FILE* out, report_ctx_t* c, const aggregate_t* a, const ag_view_opts_t* v);
// Writes ",\n  \"summary\": ..." keys (each preceded by a comma) for inclusion in a JSON object.
void ag_views_json(FILE* out, report_ctx_t* c, const aggregate_t* a, const ag_view_opts_t* v);

int ag_write_collapsed(FILE* out, report_ctx_t* c, const aggregate_t* a, int metric);
int ag_write_flamegraph(FILE* out, report_ctx_t* c, const aggregate_t* a, int metric,
                        const char* title);
int ag_write_pprof(FILE* out, report_ctx_t* c, const aggregate_t* a);
int ag_write_massif(FILE* out, report_ctx_t* c, const aggregate_t* a);

// Small helpers the writers share.
// A frame's display name: its function, else "module+0xADDR", else "0xADDR".
const char* ag_frame_name(const report_frame_t* f, char* buf, size_t cap);
uint32_t ag_crc32(uint32_t crc, const void* data, size_t len);
// gzip member with stored deflate blocks around data.
int ag_write_gzip_stored(FILE* out, const void* data, size_t len);

#endif
