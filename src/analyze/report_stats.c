// SPDX-License-Identifier: MIT
// report_stats.c - --allocator-stats in the reports: the timeline view's table and the lines at
// the heap's peak and at the end (what the process holds beyond its live blocks), the JSON
// report's "allocator_stats", and the page's chart (html/stats.html, put in before </body>).
#include <string.h>

#include "alloc_stats.h"
#include "report.h"

#include "part_stats.h" // generated from html/stats.html by the Makefile
#include "part_tags.h"  // ... and from html/tags.html

#define U(x) ((unsigned long long)(x))
#define STATS_TEXT_ROWS 40
#define NA "n/a"

static int has(const as_sample_t* x, int k) {
    return (x->available >> k) & 1;
}

// A value with thousands separators, or "n/a".
static const char* fig(char* buf, size_t cap, const as_sample_t* x, int k) {
    return has(x, k) ? report_commas(buf, cap, x->value[k]) : NA;
}

// RSS less the live heap: what the process holds that is not in a live block.
static int64_t beyond_heap(const as_sample_t* x) {
    return (int64_t)(x->value[HL_AS_VM_RSS] - x->heap_bytes);
}

static const char* signed_commas(char* buf, size_t cap, int64_t v) {
    if (v >= 0)
        return report_commas(buf, cap, (unsigned long long)v);
    buf[0] = '-';
    report_commas(buf + 1, cap - 1, 0ull - (unsigned long long)v); // INT64_MIN too
    return buf;
}

static void text_row(FILE* out, const as_sample_t* x) {
    char b[6][32];
    int has_system = has(x, HL_AS_ARENA) && has(x, HL_AS_MMAPPED);
    fprintf(out, "  %12.3f  %15s  %15s  %15s  %15s  %15s  %15s\n", (double)x->time_ns / 1e6,
            report_commas(b[0], sizeof b[0], x->heap_bytes),
            fig(b[1], sizeof b[1], x, HL_AS_IN_USE), fig(b[2], sizeof b[2], x, HL_AS_FREE),
            has_system
                ? report_commas(b[3], sizeof b[3], x->value[HL_AS_ARENA] + x->value[HL_AS_MMAPPED])
                : NA,
            fig(b[4], sizeof b[4], x, HL_AS_VM_RSS),
            has(x, HL_AS_VM_RSS) ? signed_commas(b[5], sizeof b[5], beyond_heap(x)) : NA);
}

// "RSS - live heap" at one moment, in bytes and as a share of RSS, and what the allocator said.
static void text_moment(FILE* out, const char* when, const as_sample_t* x, const as_arenas_t* a) {
    char b[6][32];
    if (!has(x, HL_AS_VM_RSS)) {
        fprintf(out, "  %s (%.3f ms): live heap %s bytes; RSS not available\n", when,
                (double)x->time_ns / 1e6, report_commas(b[0], sizeof b[0], x->heap_bytes));
        return;
    }
    int64_t beyond = beyond_heap(x);
    double share =
        x->value[HL_AS_VM_RSS] ? 100.0 * (double)beyond / (double)x->value[HL_AS_VM_RSS] : 0.0;
    fprintf(out,
            "  %s (%.3f ms): RSS %s - live heap %s = %s bytes (%.1f%% of RSS) not in live "
            "blocks: allocator caching and fragmentation, and the rest of the process (code, "
            "stacks, other mappings)\n",
            when, (double)x->time_ns / 1e6,
            report_commas(b[0], sizeof b[0], x->value[HL_AS_VM_RSS]),
            report_commas(b[1], sizeof b[1], x->heap_bytes),
            signed_commas(b[2], sizeof b[2], beyond), share);
    if (!has(x, HL_AS_IN_USE))
        return;
    fprintf(out,
            "    the allocator: %s in use (%s over the live heap: its chunk headers and "
            "rounding, heaplens's guards)",
            report_commas(b[0], sizeof b[0], x->value[HL_AS_IN_USE]),
            signed_commas(b[1], sizeof b[1], (int64_t)(x->value[HL_AS_IN_USE] - x->heap_bytes)));
    if (has(x, HL_AS_FREE))
        fprintf(out, ", %s free in its bins",
                report_commas(b[2], sizeof b[2], x->value[HL_AS_FREE]));
    if (has(x, HL_AS_KEEPCOST))
        fprintf(out, " (%s of it at the top, releasable by malloc_trim)",
                report_commas(b[3], sizeof b[3], x->value[HL_AS_KEEPCOST]));
    if (has(x, HL_AS_ARENA) && has(x, HL_AS_MMAPPED))
        fprintf(out, ", %s from the system (%s in arenas, %s in %s blocks mapped alone)",
                report_commas(b[4], sizeof b[4], x->value[HL_AS_ARENA] + x->value[HL_AS_MMAPPED]),
                report_commas(b[0], sizeof b[0], x->value[HL_AS_ARENA]),
                report_commas(b[1], sizeof b[1], x->value[HL_AS_MMAPPED]),
                report_commas(b[2], sizeof b[2], x->value[HL_AS_MMAP_COUNT]));
    fputc('\n', out);
    if (x->arenas > 1)
        for (uint32_t i = 0; i < a->listed; i++)
            fprintf(out, "    arena %u: %s bytes held (at most %s), %s free in %s chunks\n", i,
                    report_commas(b[0], sizeof b[0], a->v[i][HL_AS_ARENA_SYSTEM]),
                    report_commas(b[1], sizeof b[1], a->v[i][HL_AS_ARENA_MAX]),
                    report_commas(b[2], sizeof b[2], a->v[i][HL_AS_ARENA_FREE]),
                    report_commas(b[3], sizeof b[3], a->v[i][HL_AS_ARENA_FREE_BLOCKS]));
}

// The allocator's values no record had, named: "not available" rather than a row of zeros.
static void text_unavailable(FILE* out, const as_series_t* s) {
    uint32_t missing = HL_AS_ALLOCATOR_MASK & ~s->available;
    if (!missing)
        return;
    fprintf(out, "  not available from the allocator underneath (%s):",
            s->source == HL_AS_SRC_NONE ? "it is not glibc's malloc and has no mallinfo"
                                        : as_source_name(s->source));
    for (int k = 0; k < HL_AS_COUNT; k++)
        if (missing >> k & 1)
            fprintf(out, " %s", as_value_name(k));
    fputc('\n', out);
}

void report_stats_text(FILE* out, const as_series_t* s, int64_t from_ns, int64_t to_ns) {
    if (!s->records)
        return;
    size_t first = 0, end = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->samples[i].time_ns < from_ns)
            first = i + 1;
        if (s->samples[i].time_ns <= to_ns)
            end = i + 1;
    }
    size_t n = end > first ? end - first : 0, per = (n + STATS_TEXT_ROWS - 1) / STATS_TEXT_ROWS;
    fprintf(out, "ALLOCATOR AND PROCESS MEMORY (--allocator-stats: %llu samples; %s", U(s->records),
            s->source == HL_AS_SRC_NONE ? "no figures from the allocator"
                                        : as_source_name(s->source));
    if (s->last.arenas)
        fprintf(out, ", %u arena%s", s->last.arenas, s->last.arenas == 1 ? "" : "s");
    fputs(")\n", out);
    fprintf(out, "  %12s  %15s  %15s  %15s  %15s  %15s  %15s\n", "ms", "live heap", "in use",
            "free", "from system", "rss", "rss - heap");
    for (size_t i = first; per && i < end; i += per)
        text_row(out, &s->samples[i]);
    text_moment(out, "at the heap's peak", &s->peak, &s->peak_arenas);
    text_moment(out, "at the end", &s->last, &s->last_arenas);
    text_unavailable(out, s);
    if (s->failed)
        fputs("  (out of memory: some samples are missing from the table)\n", out);
    fputc('\n', out);
}

// ---------------------------------------------------------------------------------------------
// JSON
// ---------------------------------------------------------------------------------------------
static void json_sample(FILE* out, const as_sample_t* x) {
    fprintf(out, "{\"time_ns\": %lld, \"heap_bytes\": %llu", (long long)x->time_ns,
            U(x->heap_bytes));
    for (int k = 0; k < HL_AS_COUNT; k++) {
        fprintf(out, ", \"%s\": ", as_value_name(k));
        if (has(x, k))
            fprintf(out, "%llu", U(x->value[k]));
        else
            fputs("null", out);
    }
    fprintf(out, ", \"arenas\": %u", x->arenas);
}

static void json_moment(FILE* out, const as_sample_t* x, const as_arenas_t* a) {
    json_sample(out, x);
    fputs(", \"rss_minus_heap\": ", out);
    if (has(x, HL_AS_VM_RSS))
        fprintf(out, "%lld", (long long)beyond_heap(x));
    else
        fputs("null", out);
    fputs(", \"arena_list\": [", out);
    for (uint32_t i = 0; i < a->listed; i++)
        fprintf(out, "%s{\"system\": %llu, \"max\": %llu, \"free\": %llu, \"free_blocks\": %llu}",
                i ? ", " : "", U(a->v[i][HL_AS_ARENA_SYSTEM]), U(a->v[i][HL_AS_ARENA_MAX]),
                U(a->v[i][HL_AS_ARENA_FREE]), U(a->v[i][HL_AS_ARENA_FREE_BLOCKS]));
    fputs("]}", out);
}

void report_stats_json(FILE* out, const as_series_t* s) {
    if (!s->records) {
        fputs("  \"allocator_stats\": null,\n", out);
        return;
    }
    fputs("  \"allocator_stats\": {\"source\": ", out);
    fprintf(out, "\"%s\", \"records\": %llu, \"available\": {", as_source_name(s->source),
            U(s->records));
    for (int k = 0; k < HL_AS_COUNT; k++)
        fprintf(out, "%s\"%s\": %s", k ? ", " : "", as_value_name(k),
                s->available >> k & 1 ? "true" : "false");
    fputs("},\n    \"at_peak\": ", out);
    json_moment(out, &s->peak, &s->peak_arenas);
    fputs(",\n    \"at_end\": ", out);
    json_moment(out, &s->last, &s->last_arenas);
    fputs(",\n    \"samples\": [", out);
    for (size_t i = 0; i < s->n; i++) {
        fputs(i ? ",\n      " : "\n      ", out);
        json_sample(out, &s->samples[i]);
        fputc('}', out);
    }
    fputs("]},\n", out);
}

// ---------------------------------------------------------------------------------------------
// The page's parts of their own, each a section and a script that read the page's data: the
// allocator chart ("allocator_stats") and the allocations by tag ("api"). Each shows only when
// its data is there.
// ---------------------------------------------------------------------------------------------
void report_stats_html(FILE* out) {
    fwrite(hl_part_stats, 1, sizeof hl_part_stats - 1, out);
    fwrite(hl_part_tags, 1, sizeof hl_part_tags - 1, out);
}
