// SPDX-License-Identifier: MIT
// report_text.c - the report a person reads at the end of `heaplens run`: memcheck's words and
// layout, every line marked so it cannot be mistaken for the program's own output.
#include <string.h>

#include "report.h"

#define P "==heaplens== "

const char* report_commas(char* out, size_t cap, unsigned long long v) {
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%llu", v), o = 0;
    for (int i = 0; i < n && (size_t)o + 2 < cap; i++) {
        if (i && (n - i) % 3 == 0)
            out[o++] = ',';
        out[o++] = tmp[i];
    }
    out[o] = 0;
    return out;
}

void report_text_stack(FILE* out, report_ctx_t* c, uint32_t stack, const char* indent) {
    const report_frame_t* fr;
    int n = report_stack(c, stack, &fr);
    if (n == 0) {
        fprintf(out, "%s(no stack)\n", indent);
        return;
    }
    for (int i = 0; i < n; i++) {
        const report_frame_t* f = &fr[i];
        fprintf(out, "%s%s 0x%llx: ", indent, i == 0 ? "at" : "by", f->address);
        if (f->function)
            fprintf(out, "%s", f->function);
        else
            fprintf(out, "???");
        if (f->file)
            fprintf(out, " (%s:%u)", f->file, f->line);
        else if (f->module)
            fprintf(out, " (in %s)", f->module);
        if (f->is_inlined)
            fprintf(out, " [inlined]");
        fputc('\n', out);
    }
}

static void print_stack(FILE* out, report_ctx_t* c, uint32_t stack) {
    report_text_stack(out, c, stack, P "   ");
}

// What the program said through the heaplens API: its pauses, and its allocations by tag.
#define TEXT_TAGS_MAX 20 // tags listed; --json lists them all
static void print_notes(FILE* out, const md_notes_t* n) {
    char a[32], b[32];
    if (n->pauses)
        fprintf(out, P "            paused: %llu times by the program (what it allocated then is "
                       "not in these figures)\n",
                (unsigned long long)n->pauses);
    for (size_t i = 0; i < n->ntags && i < TEXT_TAGS_MAX; i++) {
        report_commas(a, sizeof a, n->tags[i].allocations);
        report_commas(b, sizeof b, n->tags[i].bytes);
        fprintf(out, P "    tag %u/%u: %s allocs, %s bytes allocated\n", n->tags[i].type,
                n->tags[i].location, a, b);
    }
    if (n->ntags > TEXT_TAGS_MAX)
        fprintf(out, P "  (%zu more tags in --json)\n", n->ntags - TEXT_TAGS_MAX);
}

static const char* kind_words(int kind) {
    static const char* w[] = {"definitely lost", "indirectly lost", "possibly lost",
                              "still reachable", "not scanned"};
    return w[kind];
}

static const char* error_words(int kind) {
    switch (kind) {
    case HL_ERR_DOUBLE_FREE:
        return "Double free";
    case HL_ERR_INVALID_FREE:
        return "Invalid free (not the start of a heap block)";
    case HL_ERR_MISMATCHED_FREE:
        return "Mismatched free() / delete / delete []";
    case HL_ERR_OVERFLOW:
        return "Heap block overrun (guard bytes after the block were written)";
    case HL_ERR_REALLOC_FREED:
        return "realloc() of a freed block";
    case HL_ERR_UNDERFLOW:
        return "Heap block underrun (red zone bytes before the block were written)";
    case HL_ERR_WRITE_AFTER_FREE:
        return "Invalid write to a freed block (found changed when it left the hoard or at exit)";
    case HL_ERR_READ_AFTER_FREE:
        return "Invalid read of a freed block (guard page)";
    case HL_ERR_READ_OVERFLOW:
        return "Invalid read past the end of a block (guard page)";
    case HL_ERR_INVALID_ACCESS:
        return "Invalid access to a guard page where no block is";
    case HL_ERR_READ_UNDERFLOW:
        return "Invalid read before the start of a block (guard page)";
    case HL_ERR_DANGLING_POINTER:
        return "Dangling pointer to a freed block, held at exit in a block allocated";
    default:
        return "Heap error";
    }
}

// Where the changed bytes were, in memcheck's words ("N bytes after a block of size S"), and what
// they were against what the agent left there.
static void print_change(FILE* out, const md_error_t* e) {
    char size[32];
    report_commas(size, sizeof size, e->block_size);
    uint64_t addr = e->addr + (uint64_t)e->change_offset;
    if (e->change_offset < 0)
        fprintf(out, P " Address 0x%llx is %lld bytes before a block of size %s\n",
                (unsigned long long)addr, (long long)-e->change_offset, size);
    else if ((uint64_t)e->change_offset >= e->block_size)
        fprintf(out, P " Address 0x%llx is %llu bytes after a block of size %s\n",
                (unsigned long long)addr,
                (unsigned long long)((uint64_t)e->change_offset - e->block_size), size);
    else
        fprintf(out, P " Address 0x%llx is %lld bytes inside a block of size %s\n",
                (unsigned long long)addr, (long long)e->change_offset, size);
    if (e->kind == HL_ERR_DANGLING_POINTER || !e->change_length)
        return; // a pointer, or a fault: where, not what changed
    fprintf(out, P " %llu byte%s changed from offset %lld:", (unsigned long long)e->change_length,
            e->change_length == 1 ? "" : "s", (long long)e->change_offset);
    for (uint32_t k = 0; k < e->change_n; k++)
        fprintf(out, " %02x", e->seen[k]);
    fprintf(out, "%s (were", e->change_n < e->change_length ? " ..." : "");
    for (uint32_t k = 0; k < e->change_n; k++)
        fprintf(out, " %02x", e->expected[k]);
    fprintf(out, "%s)\n", e->change_n < e->change_length ? " ..." : "");
}

void report_text(FILE* out, report_ctx_t* c, const report_opts_t* o) {
    model_t* m = report_model(c);
    char a[32], b[32], d[32];
    const char* exe = m->exe ? m->exe : "?";
    fprintf(out, P "\n");
    if (o->exit_signal)
        fprintf(out, P "%s (pid %llu) was killed by signal %d\n", exe, (unsigned long long)m->pid,
                o->exit_signal);
    else if (o->exit_status >= 0)
        fprintf(out, P "%s (pid %llu) exited with status %d\n", exe, (unsigned long long)m->pid,
                o->exit_status);
    if (m->read.is_truncated || m->read.is_corrupt)
        fprintf(out, P "trace cut short (%s): the report covers what was written\n",
                m->read.message);
    else if (!model_is_complete(m) && !o->is_live)
        fprintf(out, P "%s\n", model_incomplete_reason(m));
    if (m->info_flags & HL_INFO_HEAP_UNTRACED)
        fprintf(out, P "heap NOT traced: the program defines its own allocator and no call to it "
                       "could be routed to heaplens\n");
    else if (m->info_flags & HL_INFO_HEAP_PARTIAL)
        fprintf(out, P "heap partly traced: the program defines its own allocator; calls from "
                       "shared libraries are seen, calls inside the program itself are not (blocks "
                       "it releases itself count as in use)\n");

    // Errors first, as memcheck prints them as they happen.
    for (size_t i = 0; i < m->nerrors; i++) {
        const md_error_t* e = &m->errors[i];
        // A guard page's fault has no call: the stack is the faulting instruction's.
        int is_fault = e->fn == 0 && e->stack && e->has_change && !e->change_length;
        if (is_fault && e->kind == HL_ERR_OVERFLOW)
            fprintf(out, P "Invalid write past the end of a block (guard page)\n");
        else if (is_fault && e->kind == HL_ERR_UNDERFLOW)
            fprintf(out, P "Invalid write before the start of a block (guard page)\n");
        else if (is_fault && e->kind == HL_ERR_WRITE_AFTER_FREE)
            fprintf(out, P "Invalid write to a freed block (guard page)\n");
        else if (e->fn == 0)
            fprintf(out, P "%s\n", error_words(e->kind));
        else
            fprintf(out, P "%s: %s(0x%llx)\n", error_words(e->kind), hl_fn_name(e->fn),
                    (unsigned long long)e->addr);
        print_stack(out, c, e->stack);
        if (e->has_change)
            print_change(out, e);
        if (e->has_block) {
            report_commas(a, sizeof a, e->block_size);
            fprintf(out, P " Address 0x%llx is the start of a block of size %s %s by %s:\n",
                    (unsigned long long)e->addr, a,
                    e->kind == HL_ERR_OVERFLOW || e->kind == HL_ERR_MISMATCHED_FREE ||
                            e->kind == HL_ERR_UNDERFLOW || e->kind == HL_ERR_READ_OVERFLOW ||
                            e->kind == HL_ERR_READ_UNDERFLOW
                        ? "alloc'd"
                        : "free'd, alloc'd",
                    hl_fn_name(e->alloc_fn));
            print_stack(out, c, e->alloc_stack);
            if (e->release_stack) {
                fprintf(out, P " and released by:\n");
                print_stack(out, c, e->release_stack);
            }
        }
        fprintf(out, P "\n");
    }

    report_commas(a, sizeof a, m->heap_bytes);
    report_commas(b, sizeof b, m->heap_blocks);
    fprintf(out, P "HEAP SUMMARY:\n");
    fprintf(out, P "    in use %s: %s bytes in %s blocks\n",
            o->is_live                                      ? "now"
            : m->has_end && m->end_how == HL_END_DETACH ? "at detach"
            : m->has_end && m->end_how == HL_END_STOP   ? "at stop"
                                                            : "at exit",
            a, b);
    report_commas(a, sizeof a, m->allocations);
    report_commas(b, sizeof b, m->frees);
    report_commas(d, sizeof d, m->bytes_allocated);
    fprintf(out, P "  total heap usage: %s allocs, %s frees, %s bytes allocated\n", a, b, d);
    report_commas(a, sizeof a, m->peak_bytes);
    report_commas(b, sizeof b, m->peak_blocks);
    fprintf(out, P "         peak heap: %s bytes in %s blocks, at %.3f ms\n", a, b,
            (double)m->peak_time_ns / 1e6);
    if (m->mmaps) {
        report_commas(a, sizeof a, m->mapped_peak);
        fprintf(out, P "          mappings: %llu mmap, %llu munmap, peak %s bytes mapped\n",
                (unsigned long long)m->mmaps, (unsigned long long)m->munmaps, a);
    }
    print_notes(out, &m->notes);
    fprintf(out, P "\n");

    report_leaks_t lk;
    report_leaks(c, o->supp, &lk);
    int shown = 0, total_shown = 0;
    for (size_t i = 0; i < lk.nrecords; i++)
        if (o->show_kinds & (1u << lk.records[i]->kind))
            total_shown++;
    for (size_t i = 0; i < lk.nrecords && shown < o->max_records; i++) {
        const md_leak_record_t* r = lk.records[i];
        if (!(o->show_kinds & (1u << r->kind)))
            continue;
        shown++;
        report_commas(a, sizeof a, r->bytes);
        report_commas(b, sizeof b, r->blocks);
        if (r->indirect_bytes) {
            report_commas(d, sizeof d, r->bytes + r->indirect_bytes);
            char e[32];
            report_commas(e, sizeof e, r->indirect_bytes);
            fprintf(out, P "%s (%s direct, %s indirect) bytes in %s blocks are %s in loss record %d of %d\n",
                    d, a, e, b, kind_words(r->kind), shown, total_shown);
        } else {
            fprintf(out, P "%s bytes in %s blocks are %s in loss record %d of %d\n", a, b,
                    kind_words(r->kind), shown, total_shown);
        }
        print_stack(out, c, r->stack);
        fprintf(out, P "\n");
    }
    if (total_shown > shown)
        fprintf(out, P "(%d more loss records: heaplens report --json TRACE lists them all)\n" P "\n",
                total_shown - shown);

    if (m->is_scanned) {
        fprintf(out, P "LEAK SUMMARY:\n");
        for (int k = 0; k < HL_LEAK_COUNT; k++) {
            report_commas(a, sizeof a, lk.kinds[k].bytes);
            report_commas(b, sizeof b, lk.kinds[k].blocks);
            fprintf(out, P "   %15s: %s bytes in %s blocks\n", kind_words(k), a, b);
        }
        report_commas(a, sizeof a, lk.suppressed.bytes);
        report_commas(b, sizeof b, lk.suppressed.blocks);
        fprintf(out, P "   %15s: %s bytes in %s blocks\n", "suppressed", a, b);
        if (!(m->scan_flags & HL_SCAN_ALL_THREADS))
            fprintf(out, P "   (some threads could not be stopped for the scan: their registers "
                           "were not roots)\n");
    } else {
        report_commas(a, sizeof a, lk.kinds[HL_KIND_UNSCANNED].bytes);
        report_commas(b, sizeof b, lk.kinds[HL_KIND_UNSCANNED].blocks);
        fprintf(out, P "LEAK SUMMARY: not scanned (%s)\n",
                m->is_scan_short ? "the agent had no memory left for the scan"
                                 : "the process ended without running the scan");
        fprintf(out, P "   still allocated at the end: %s bytes in %s blocks\n", a, b);
    }
    fprintf(out, P "ERROR SUMMARY: %zu errors\n", m->nerrors);
    if (o->trace_path)
        fprintf(out, P "trace: %s\n", o->trace_path);
    for (size_t i = 0; i < o->nchildren; i++)
        fprintf(out, P "child process %ld traced too: heaplens report %s\n", o->children[i].pid,
                o->children[i].trace);
}
