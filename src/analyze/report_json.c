// SPDX-License-Identifier: MIT
// report_json.c - the machine report. Its core is the contract in shared/acceptance/README.md
// (totals, leaks, leak_records, errors); the rest says what a tool reading it needs to know:
// the process, how it ended, whether the scan ran, calls per function, child traces.
#include <string.h>

#include "report.h"
#include "utf8.h"

void report_json_string(FILE* out, const char* s) {
    if (!s) {
        fputs("null", out);
        return;
    }
    fputc('"', out);
    const unsigned char* p = (const unsigned char*)s;
    for (size_t left = strlen(s); left > 0;) {
        size_t n = utf8_seq_len(p, left);
        if (n > 1) {
            fwrite(p, 1, n, out);
        } else if (n == 0) {
            fprintf(out, "\\\\x%02X", *p); // not UTF-8 (utf8.h): the text \xHH
            n = 1;
        } else if (*p == '"' || *p == '\\') {
            fprintf(out, "\\%c", *p);
        } else if (*p < 0x20 || *p == 0x7f) {
            fprintf(out, "\\u%04x", *p);
        } else {
            fputc(*p, out);
        }
        p += n;
        left -= n;
    }
    fputc('"', out);
}

void report_json_stack(FILE* out, report_ctx_t* c, uint32_t stack) {
    const report_frame_t* fr;
    int n = report_stack(c, stack, &fr);
    fputc('[', out);
    for (int i = 0; i < n; i++) {
        const report_frame_t* f = &fr[i];
        fprintf(out, "%s{\"function\": ", i ? ", " : "");
        report_json_string(out, f->function);
        fputs(", \"file\": ", out);
        report_json_string(out, f->file);
        fprintf(out, ", \"line\": %u, \"module\": ", f->line);
        report_json_string(out, f->module);
        fprintf(out, ", \"address\": \"0x%llx\", \"inlined\": %s}", f->address,
                f->is_inlined ? "true" : "false");
    }
    fputc(']', out);
}

static const char* end_how(const model_t* m) {
    if (m->has_end)
        return m->end_how == HL_END_SIGNAL ? "signal" : "exit";
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

int report_json(FILE* out, report_ctx_t* c, const report_opts_t* o) {
    model_t* m = report_model(c);
    fputs("{\n  \"process\": {\"pid\": ", out);
    fprintf(out, "%llu, \"ppid\": %llu, \"exe\": ", (unsigned long long)m->pid,
            (unsigned long long)m->ppid);
    report_json_string(out, m->exe);
    fputs(", \"argv\": ", out);
    report_json_argv(out, m);
    fprintf(out, ", \"fork_child\": %s},\n", m->is_fork_child ? "true" : "false");
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
        if (f == HL_FN_MREMAP)
            continue;
        fprintf(out, "%s\"%s\": %llu", first ? "" : ", ", hl_fn_name(f),
                (unsigned long long)m->calls[f]);
        first = 0;
    }
    fputs("},\n", out);

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
    for (size_t i = 0; i < lk.nrecords; i++) {
        const md_leak_record_t* r = lk.records[i];
        fprintf(out,
                "%s\n    {\"kind\": \"%s\", \"bytes\": %llu, \"blocks\": %llu, "
                "\"indirect_bytes\": %llu, \"indirect_blocks\": %llu, \"stack\": ",
                i ? "," : "", hl_leak_kind_name(r->kind), (unsigned long long)r->bytes,
                (unsigned long long)r->blocks, (unsigned long long)r->indirect_bytes,
                (unsigned long long)r->indirect_blocks);
        report_json_stack(out, c, r->stack);
        fputc('}', out);
    }
    fputs("\n  ],\n  \"errors\": [", out);
    for (size_t i = 0; i < m->nerrors; i++) {
        const md_error_t* e = &m->errors[i];
        fprintf(out, "%s\n    {\"kind\": \"%s\", \"call\": \"%s\", \"address\": \"0x%llx\", \"stack\": ",
                i ? "," : "", hl_error_kind_name(e->kind), hl_fn_name(e->fn),
                (unsigned long long)e->addr);
        report_json_stack(out, c, e->stack);
        if (e->has_block) {
            fprintf(out, ", \"block_size\": %llu, \"alloc_call\": \"%s\", \"alloc_stack\": ",
                    (unsigned long long)e->block_size, hl_fn_name(e->alloc_fn));
            report_json_stack(out, c, e->alloc_stack);
            if (e->release_stack) {
                fputs(", \"release_stack\": ", out);
                report_json_stack(out, c, e->release_stack);
            }
        }
        fputc('}', out);
    }
    fputs("\n  ],\n  \"children\": [", out);
    for (size_t i = 0; i < o->nchildren; i++) {
        fprintf(out, "%s{\"pid\": %ld, \"trace\": ", i ? ", " : "", o->children[i].pid);
        report_json_string(out, o->children[i].trace);
        fputc('}', out);
    }
    fputs("],\n  \"trace\": ", out);
    report_json_string(out, o->trace_path);
    fputs("\n}\n", out);
    return ferror(out) ? -1 : 0;
}
