// SPDX-License-Identifier: MIT
// report_json.c - the machine report. Its core is the contract in shared/acceptance/README.md
// (totals, leaks, leak_records, errors); the rest says what a tool reading it needs to know:
// the process, how it ended, whether the scan ran, calls per function, child traces.
#include <string.h>

#include "json_frames.h"
#include "report.h"
#include "utf8.h"

// Runs of bytes that need no escape go out in one write: names and paths are mostly such runs.
// The stream is locked once per string (callers may hold it already: the lock is recursive).
void report_json_string(FILE* out, const char* s) {
    if (!s) {
        fputs("null", out);
        return;
    }
    flockfile(out);
    putc_unlocked('"', out);
    const unsigned char* p = (const unsigned char*)s;
    const unsigned char* run = p;
    for (size_t left = strlen(s); left > 0;) {
        if (*p >= 0x20 && *p < 0x7f && *p != '"' && *p != '\\') {
            p++;
            left--;
            continue;
        }
        size_t n = utf8_seq_len(p, left);
        if (n > 1) { // a whole UTF-8 sequence stays in the run
            p += n;
            left -= n;
            continue;
        }
        fwrite_unlocked(run, 1, (size_t)(p - run), out);
        if (n == 0)
            fprintf(out, "\\\\x%02X", *p); // not UTF-8 (utf8.h): the text \xHH
        else if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else
            fprintf(out, "\\u%04x", *p);
        p++;
        left--;
        run = p;
    }
    fwrite_unlocked(run, 1, (size_t)(p - run), out);
    putc_unlocked('"', out);
    funlockfile(out);
}

void report_json_stack(FILE* out, report_ctx_t* c, uint32_t stack) {
    json_frames_stack(out, NULL, c, stack);
}

static const char* end_how(const model_t* m) {
    if (m->has_end)
        return m->end_how == HL_END_SIGNAL   ? "signal"
               : m->end_how == HL_END_DETACH ? "detach"
               : m->end_how == HL_END_STOP   ? "stop"
                                             : "exit";
    return m->exec_path ? "exec" : "unknown";
}

void report_json_argv(FILE* out, const model_t* m) {
    fputc('[', out);
    for (size_t i = 0, first = 1; i < m->argv_len; i += strlen(m->argv + i) + 1, first = 0) {
        if (!first)
            fputs(", ", out);
        report_json_string(out, m->argv + i);
    }
    fputc(']', out);
}

// What the program said through the heaplens API, when it used it: its allocations by tag
// (bytes allocated under each; what they still hold is not in the trace), pauses and marks.
static void report_json_notes(FILE* out, const md_notes_t* n) {
    if (!n->pauses && !n->marks && !n->ntags && !n->ignores)
        return;
    fprintf(out, "  \"api\": {\"pauses\": %llu, \"marks\": %llu, \"ignores\": %llu, \"tags\": [",
            (unsigned long long)n->pauses, (unsigned long long)n->marks,
            (unsigned long long)n->ignores);
    for (size_t i = 0; i < n->ntags; i++)
        fprintf(out, "%s\n    {\"type\": %u, \"location\": %u, \"allocations\": %llu, "
                     "\"bytes_allocated\": %llu}",
                i ? "," : "", n->tags[i].type, n->tags[i].location,
                (unsigned long long)n->tags[i].allocations, (unsigned long long)n->tags[i].bytes);
    fprintf(out, "%s], \"other_tags\": {\"allocations\": %llu, \"bytes_allocated\": %llu}},\n",
            n->ntags ? "\n  " : "", (unsigned long long)n->other.allocations,
            (unsigned long long)n->other.bytes);
}

int report_json(FILE* out, report_ctx_t* c, const report_opts_t* o) {
    model_t* m = report_model(c);
    json_frames_t* own = o->frames ? NULL : json_frames_new(0);
    json_frames_t* ft = o->frames ? o->frames : own;
    fputs("{\n  \"process\": {\"pid\": ", out);
    fprintf(out, "%llu, \"ppid\": %llu, \"exe\": ", (unsigned long long)m->pid,
            (unsigned long long)m->ppid);
    report_json_string(out, m->exe);
    fputs(", \"argv\": ", out);
    report_json_argv(out, m);
    fprintf(out, ", \"fork_child\": %s, \"word_size\": %u, \"byte_order\": \"%s\"},\n",
            m->is_fork_child ? "true" : "false", m->read.word_size,
            m->read.is_big_endian ? "big" : "little");
    fprintf(out, "  \"end\": {\"how\": \"%s\", \"value\": %llu, \"time_ns\": %lld",
            end_how(m), (unsigned long long)m->end_value,
            (long long)(m->has_end ? m->end_time_ns : m->last_time_ns));
    fputs("},\n", out);
    if (o->exit_status >= 0 || o->exit_signal)
        fprintf(out, "  \"exit\": {\"status\": %d, \"signal\": %d},\n", o->exit_status,
                o->exit_signal);
    fprintf(out, "  \"scanned\": %s,\n", m->is_scanned ? "true" : "false");
    // An allocator the agent could not see whole (the program's own) leaves events out too.
    const char* heap_traced = m->info_flags & HL_INFO_HEAP_UNTRACED  ? "none"
                              : m->info_flags & HL_INFO_HEAP_PARTIAL ? "partial"
                                                                     : "all";
    fprintf(out, "  \"heap_traced\": \"%s\",\n", heap_traced);
    if (m->is_scan_short)
        fputs("  \"scan_failed\": \"no memory\",\n", out);
    fprintf(out, "  \"trace_complete\": %s,\n",
            model_is_complete(m) && !strcmp(heap_traced, "all") ? "true" : "false");
    fprintf(out,
            "  \"totals\": {\"allocations\": %llu, \"frees\": %llu, \"bytes_allocated\": %llu, "
            "\"peak_heap_bytes\": %llu, \"peak_heap_blocks\": %llu, \"peak_time_ns\": %lld, "
            "\"in_use_bytes\": %llu, \"in_use_blocks\": %llu, \"mmaps\": %llu, \"munmaps\": %llu, "
            "\"mapped_bytes_peak\": %llu, \"rss_peak\": %llu, \"threads\": %zu},\n",
            (unsigned long long)m->allocations, (unsigned long long)m->frees,
            (unsigned long long)m->bytes_allocated, (unsigned long long)m->peak_bytes,
            (unsigned long long)m->peak_blocks, (long long)m->peak_time_ns,
            (unsigned long long)m->heap_bytes, (unsigned long long)m->heap_blocks,
            (unsigned long long)m->mmaps, (unsigned long long)m->munmaps,
            (unsigned long long)m->mapped_peak, (unsigned long long)m->rss_peak,
            (size_t)m->threads_seen);
    fputs("  \"calls\": {", out);
    for (int f = 1, first = 1; f < HL_FN_COUNT; f++) {
        if (f == HL_FN_MREMAP || hl_fn_counted(f) != f)
            continue; // not a call of its own (a realloc of NULL counts as realloc)
        fprintf(out, "%s\"%s\": %llu", first ? "" : ", ", hl_fn_name(f),
                (unsigned long long)m->calls[f]);
        first = 0;
    }
    fputs("},\n", out);

    report_json_notes(out, &m->notes);

    report_leaks_t lk;
    report_leaks(c, o->supp, &lk);
    fputs("  \"leaks\": {", out);
    for (int k = 0; k < HL_NKINDS; k++)
        fprintf(out, "%s\"%s\": {\"bytes\": %llu, \"blocks\": %llu}", k ? ", " : "",
                hl_leak_kind_name(k), (unsigned long long)lk.kinds[k].bytes,
                (unsigned long long)lk.kinds[k].blocks);
    fprintf(out, ", \"suppressed\": {\"bytes\": %llu, \"blocks\": %llu}},\n",
            (unsigned long long)lk.suppressed.bytes, (unsigned long long)lk.suppressed.blocks);
    fputs("  \"leak_records\": [", out);
    size_t nrec = lk.nrecords;
    if (o->max_json_records && nrec > o->max_json_records)
        nrec = o->max_json_records;
    for (size_t i = 0; i < nrec; i++) {
        const md_leak_record_t* r = lk.records[i];
        fprintf(out,
                "%s\n    {\"kind\": \"%s\", \"bytes\": %llu, \"blocks\": %llu, "
                "\"indirect_bytes\": %llu, \"indirect_blocks\": %llu, \"stack\": ",
                i ? "," : "", hl_leak_kind_name(r->kind), (unsigned long long)r->bytes,
                (unsigned long long)r->blocks, (unsigned long long)r->indirect_bytes,
                (unsigned long long)r->indirect_blocks);
        json_frames_stack(out, ft, c, r->stack);
        fputc('}', out);
    }
    fputs("\n  ],\n", out);
    if (nrec < lk.nrecords) { // records come biggest first within a kind: the cut is the tail
        md_kind_total_t cut = {0};
        for (size_t i = nrec; i < lk.nrecords; i++) {
            cut.bytes += lk.records[i]->bytes + lk.records[i]->indirect_bytes;
            cut.blocks += lk.records[i]->blocks + lk.records[i]->indirect_blocks;
        }
        fprintf(out,
                "  \"leak_records_cut\": {\"shown\": %zu, \"records\": %zu, \"bytes\": %llu, "
                "\"blocks\": %llu},\n",
                nrec, lk.nrecords - nrec, (unsigned long long)cut.bytes,
                (unsigned long long)cut.blocks);
    }
    fputs("  \"errors\": [", out);
    size_t nerr = m->nerrors;
    if (o->max_json_errors && nerr > o->max_json_errors)
        nerr = o->max_json_errors;
    for (size_t i = 0; i < nerr; i++) {
        const md_error_t* e = &m->errors[i];
        fprintf(out, "%s\n    {\"kind\": \"%s\", \"call\": \"%s\", \"address\": \"0x%llx\", \"stack\": ",
                i ? "," : "", hl_error_kind_name(e->kind), hl_fn_name(e->fn),
                (unsigned long long)e->addr);
        json_frames_stack(out, ft, c, e->stack);
        if (e->has_block) {
            fprintf(out, ", \"block_size\": %llu, \"alloc_call\": \"%s\", \"alloc_stack\": ",
                    (unsigned long long)e->block_size, hl_fn_name(e->alloc_fn));
            json_frames_stack(out, ft, c, e->alloc_stack);
            if (e->release_stack) {
                fputs(", \"release_stack\": ", out);
                json_frames_stack(out, ft, c, e->release_stack);
            }
        }
        if (e->has_change) {
            fprintf(out, ", \"offset\": %lld, \"changed_bytes\": %llu, \"seen\": \"",
                    (long long)e->change_offset, (unsigned long long)e->change_length);
            for (uint32_t k = 0; k < e->change_n; k++)
                fprintf(out, "%02x", e->seen[k]);
            fputs("\", \"expected\": \"", out);
            for (uint32_t k = 0; k < e->change_n; k++)
                fprintf(out, "%02x", e->expected[k]);
            fputc('"', out);
        }
        fputc('}', out);
    }
    fputs("\n  ],\n", out);
    if (nerr < m->nerrors)
        fprintf(out, "  \"errors_cut\": {\"shown\": %zu, \"errors\": %zu},\n", nerr,
                m->nerrors - nerr);
    report_stats_json(out, &m->alloc_stats);
    fputs("  \"children\": [", out);
    for (size_t i = 0; i < o->nchildren; i++) {
        fprintf(out, "%s{\"pid\": %ld, \"trace\": ", i ? ", " : "", o->children[i].pid);
        report_json_string(out, o->children[i].trace);
        fputc('}', out);
    }
    fputs("],\n  \"trace\": ", out);
    report_json_string(out, o->trace_path);
    fputs("\n}\n", out);
    json_frames_free(own);
    return ferror(out) ? -1 : 0;
}
