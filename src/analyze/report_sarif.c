// SPDX-License-Identifier: MIT
// report_sarif.c - SARIF 2.1.0 (see report_sarif.h). A result's location is where the program's
// own code made the call: the innermost frame with a source line outside the system's
// libraries; its code flows are the stacks, outermost call first as SARIF orders them.
#define _GNU_SOURCE
#include "report_sarif.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#define SARIF_SCHEMA "https://json.schemastore.org/sarif-2.1.0.json"
#define SRCROOT "SRCROOT" // the base of relative URIs: the directory the report was made in

typedef struct sarif_rule_s {
    const char* id;
    const char* name;
    const char* level;
    const char* text;
} sarif_rule_t;

// Leak kinds first (by HL_LEAK_* and HL_KIND_UNSCANNED), then heap errors (by HL_ERR_* - 1).
static const sarif_rule_t rules[] = {
    {"heaplens/definitely-lost", "DefinitelyLost", "error",
     "A heap block was leaked: no pointer to it was left anywhere the program can reach."},
    {"heaplens/indirectly-lost", "IndirectlyLost", "error",
     "A heap block was leaked: only other leaked blocks point to it."},
    {"heaplens/possibly-lost", "PossiblyLost", "warning",
     "A heap block may have been leaked: only pointers into its middle were found."},
    {"heaplens/still-reachable", "StillReachable", "note",
     "A heap block was never freed, though a pointer to it was still reachable at exit."},
    {"heaplens/unscanned", "Unscanned", "note",
     "A heap block was still allocated when the process ended without its leak scan."},
    {"heaplens/double-free", "DoubleFree", "error", "A heap block was released twice."},
    {"heaplens/invalid-free", "InvalidFree", "error",
     "A pointer that is not the start of a heap block was released."},
    {"heaplens/mismatched-free", "MismatchedFree", "error",
     "A heap block was released by the wrong function (free, delete or delete[])."},
    {"heaplens/overflow", "HeapOverflow", "error",
     "Bytes just after a heap block were written (its guard bytes had changed)."},
    {"heaplens/realloc-freed", "ReallocFreed", "error",
     "realloc was given a heap block that had already been released."},
    {"heaplens/underflow", "HeapUnderflow", "error",
     "Bytes just before a heap block were written (its red zone had changed)."},
    {"heaplens/write-after-free", "WriteAfterFree", "error",
     "A released heap block, held back from reuse, was written after its release."},
    {"heaplens/dangling-pointer", "DanglingPointer", "warning",
     "A heap block still in use at exit holds a pointer into a released block."},
    {"heaplens/read-after-free", "ReadAfterFree", "error",
     "A released heap block was read (its guard page faulted)."},
    {"heaplens/read-overflow", "ReadOverflow", "error",
     "Bytes past the end of a heap block were read (its guard page faulted)."},
    {"heaplens/invalid-access", "InvalidAccess", "error",
     "Memory of a guard page where no heap block is was accessed."},
    {"heaplens/read-underflow", "ReadUnderflow", "error",
     "Bytes before the start of a heap block were read (its guard page faulted)."},
};
#define NRULES (sizeof rules / sizeof *rules)

static int rule_of_error(int kind) {
    return kind >= HL_ERR_DOUBLE_FREE && kind < HL_ERR_COUNT ? HL_NKINDS + kind - 1
                                                             : HL_NKINDS + HL_ERR_INVALID_FREE - 1;
}

typedef struct sarif_s {
    FILE* out;
    report_ctx_t* c;
    char cwd[PATH_MAX];
    size_t cwd_len;
    int nresults;
} sarif_t;

// --- URIs and locations -------------------------------------------------------------------------
static void uri_chars(FILE* out, const char* s) {
    for (const unsigned char* p = (const unsigned char*)s; *p; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            strchr("/-._~", *p))
            fputc(*p, out);
        else
            fprintf(out, "%%%02X", *p);
    }
}

// "artifactLocation": a path under the report's directory relative to SRCROOT, others absolute.
static void artifact(sarif_t* w, const char* path) {
    FILE* out = w->out;
    fputs("\"artifactLocation\": {\"uri\": \"", out);
    if (path[0] == '/' && w->cwd_len && !strncmp(path, w->cwd, w->cwd_len) &&
        path[w->cwd_len] == '/') {
        uri_chars(out, path + w->cwd_len + 1);
        fputs("\", \"uriBaseId\": \"" SRCROOT "\"}", out);
    } else if (path[0] == '/') {
        fputs("file://", out);
        uri_chars(out, path);
        fputs("\"}", out);
    } else {
        uri_chars(out, path); // relative to where it was compiled: the best guess is here
        fputs("\", \"uriBaseId\": \"" SRCROOT "\"}", out);
    }
}

static int is_system_module(const char* path) {
    static const char* dirs[] = {"/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/", "/usr/libexec/"};
    if (!path)
        return 0;
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++)
        if (!strncmp(path, dirs[i], strlen(dirs[i])))
            return 1;
    return 0;
}

// The frame a result points at: the innermost in the program's own sources (-1: none).
static int own_frame(sarif_t* w, const report_frame_t* fr, int n) {
    model_t* m = report_model(w->c);
    for (int i = 0; i < n; i++) {
        const md_module_t* md = model_module_of(m, fr[i].address);
        if (fr[i].file && fr[i].line && !is_system_module(md ? md->path : NULL))
            return i;
    }
    return -1;
}

// A location object for frame f; physical (file and line) only when it is worth a link: not in
// the system's libraries, whose sources are not where the report is read.
static void location(sarif_t* w, const report_frame_t* f, const char* message) {
    FILE* out = w->out;
    const md_module_t* md = model_module_of(report_model(w->c), f->address);
    int is_physical = f->file && !is_system_module(md ? md->path : NULL);
    fputc('{', out);
    if (is_physical) {
        fputs("\"physicalLocation\": {", out);
        artifact(w, f->file);
        if (f->line)
            fprintf(out, ", \"region\": {\"startLine\": %u}", f->line);
        fputs("}", out);
    }
    if (f->function) {
        fprintf(out, "%s\"logicalLocations\": [{\"name\": ", is_physical ? ", " : "");
        report_json_string(out, f->function);
        fputs(", \"kind\": \"function\"}]", out);
    }
    if (message) {
        fprintf(out, "%s\"message\": {\"text\": ", is_physical || f->function ? ", " : "");
        report_json_string(out, message);
        fputc('}', out);
    }
    fputc('}', out);
}

// One codeFlow: the stack's frames, outermost first.
static void code_flow(sarif_t* w, uint32_t stack, const char* what) {
    FILE* out = w->out;
    const report_frame_t* fr;
    int n = report_stack(w->c, stack, &fr);
    fputs("{\"message\": {\"text\": ", out);
    report_json_string(out, what);
    fputs("}, \"threadFlows\": [{\"locations\": [", out);
    for (int i = n - 1; i >= 0; i--) {
        char text[512];
        const md_module_t* md = model_module_of(report_model(w->c), fr[i].address);
        const char* mod = md && md->path ? strrchr(md->path, '/') : NULL;
        snprintf(text, sizeof text, "%s%s (%s, 0x%llx)", fr[i].function ? fr[i].function : "??",
                 fr[i].is_inlined ? " [inlined]" : "", mod ? mod + 1 : "?", fr[i].address);
        fprintf(out, "%s{\"nestingLevel\": %d, \"location\": ", i == n - 1 ? "" : ", ", n - 1 - i);
        location(w, &fr[i], text);
        fputc('}', out);
    }
    if (n == 0)
        fputs("{\"location\": {\"message\": {\"text\": \"no stack was recorded\"}}}", out);
    fputs("]}]}", out);
}

// FNV-1a over the rule and the stack's functions and lines: the same defect has the same
// fingerprint from run to run (addresses move with ASLR, names and lines do not).
static uint64_t fingerprint(report_ctx_t* c, const char* rule, uint32_t stack) {
    uint64_t h = 0xcbf29ce484222325ull;
    const report_frame_t* fr;
    int n = report_stack(c, stack, &fr);
    char buf[64];
    for (const char* p = rule; *p; p++)
        h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    for (int i = 0; i < n; i++) {
        for (const char* p = fr[i].function ? fr[i].function : "?"; *p; p++)
            h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
        snprintf(buf, sizeof buf, ":%u;", fr[i].line);
        for (const char* p = buf; *p; p++)
            h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    }
    return h;
}

// The start of a result: rule, level, message, the primary location and the fingerprint.
static void result_head(sarif_t* w, int rule, const char* message, uint32_t stack) {
    FILE* out = w->out;
    fprintf(out,
            "%s\n        {\"ruleId\": \"%s\", \"ruleIndex\": %d, \"level\": \"%s\", "
            "\"message\": {\"text\": ",
            w->nresults++ ? "," : "", rules[rule].id, rule, rules[rule].level);
    report_json_string(out, message);
    fputs("},\n         \"locations\": [", out);
    const report_frame_t* fr;
    int n = report_stack(w->c, stack, &fr);
    int at = own_frame(w, fr, n);
    const char* exe = report_model(w->c)->exe;
    if (at >= 0) {
        location(w, &fr[at], NULL);
    } else if (exe) {
        // Nothing of the program's own sources on the stack: the executable stands for it.
        fputs("{\"physicalLocation\": {", out);
        artifact(w, exe);
        fputs("}}", out);
    }
    fprintf(out,
            "],\n         \"partialFingerprints\": {\"stackHash/v1\": \"%016llx\"},\n"
            "         \"codeFlows\": [",
            (unsigned long long)fingerprint(w->c, rules[rule].id, stack));
}

// --- results ----------------------------------------------------------------------------------
static const char* innermost_function(report_ctx_t* c, uint32_t stack) {
    const report_frame_t* fr;
    int n = report_stack(c, stack, &fr);
    for (int i = 0; i < n; i++)
        if (fr[i].function)
            return fr[i].function;
    return "an unknown function";
}

static void leak_result(sarif_t* w, const md_leak_record_t* r) {
    model_t* m = report_model(w->c);
    static const char* words[HL_NKINDS] = {"definitely lost", "indirectly lost", "possibly lost",
                                           "still reachable", "not freed (no leak scan ran)"};
    char msg[512], more[160] = "";
    if (r->indirect_bytes)
        snprintf(more, sizeof more, " (%llu bytes in %llu more blocks are lost through them)",
                 (unsigned long long)r->indirect_bytes, (unsigned long long)r->indirect_blocks);
    int fn = r->stack < m->nstacks ? m->stacks[r->stack].alloc_fn : 0;
    snprintf(msg, sizeof msg, "%llu bytes in %llu blocks are %s%s: allocated by %s in %s.",
             (unsigned long long)r->bytes, (unsigned long long)r->blocks, words[r->kind], more,
             fn ? hl_fn_name(fn) : "the allocator", innermost_function(w->c, r->stack));
    result_head(w, r->kind, msg, r->stack);
    code_flow(w, r->stack, "where the blocks were allocated");
    fputs("]}", w->out);
}

static void error_result(sarif_t* w, const md_error_t* e) {
    static const char* words[HL_ERR_COUNT] = {
        [HL_ERR_DOUBLE_FREE] = "released a block that was already released",
        [HL_ERR_INVALID_FREE] = "released a pointer that is not the start of a heap block",
        [HL_ERR_MISMATCHED_FREE] = "released a block with the wrong function",
        [HL_ERR_OVERFLOW] = "released a block whose bytes just after the end were written",
        [HL_ERR_REALLOC_FREED] = "reallocated a block that was already released",
        [HL_ERR_UNDERFLOW] = "released a block whose bytes just before the start were written",
        [HL_ERR_WRITE_AFTER_FREE] = "wrote to a block after it was released",
        [HL_ERR_DANGLING_POINTER] = "holds a pointer into a released block",
        [HL_ERR_READ_AFTER_FREE] = "read a block after it was released",
        [HL_ERR_READ_OVERFLOW] = "read past the end of a block",
        [HL_ERR_INVALID_ACCESS] = "accessed a guard page where no block is",
        [HL_ERR_READ_UNDERFLOW] = "read before the start of a block",
    };
    int rule = rule_of_error(e->kind);
    const char* what = e->kind > 0 && e->kind < HL_ERR_COUNT ? words[e->kind] : "heap error";
    char msg[512], block[160] = "";
    if (e->has_block)
        snprintf(block, sizeof block, " (a block of %llu bytes from %s)",
                 (unsigned long long)e->block_size, hl_fn_name(e->alloc_fn));
    if (e->fn == 0 && e->stack) // a guard page's fault: the instruction, no call
        snprintf(msg, sizeof msg, "%s %s%s (a guard page faulted).",
                 innermost_function(w->c, e->stack), what, block);
    else if (e->kind == HL_ERR_WRITE_AFTER_FREE)
        snprintf(msg, sizeof msg,
                 "A block of %llu bytes from %s was written after it was released (found when "
                 "it left the hoard or at exit).",
                 (unsigned long long)e->block_size, hl_fn_name(e->alloc_fn));
    else if ((e->kind == HL_ERR_OVERFLOW || e->kind == HL_ERR_UNDERFLOW) && !e->stack)
        snprintf(msg, sizeof msg,
                 "Bytes %s a block of %llu bytes from %s were written (found "
                 "at exit).",
                 e->kind == HL_ERR_OVERFLOW ? "after" : "before",
                 (unsigned long long)e->block_size, hl_fn_name(e->alloc_fn));
    else
        snprintf(msg, sizeof msg, "%s(0x%llx) in %s %s%s.", hl_fn_name(e->fn),
                 (unsigned long long)e->addr, innermost_function(w->c, e->stack), what, block);
    // With no stack of the call (an overflow found at exit), the allocation is the place.
    uint32_t primary = e->stack ? e->stack : e->alloc_stack;
    result_head(w, rule, msg, primary);
    code_flow(w, e->stack ? e->stack : primary,
              e->stack ? "the call" : "where the block was allocated");
    if (e->has_block && e->alloc_stack && e->stack) {
        fputs(", ", w->out);
        code_flow(w, e->alloc_stack, "where the block was allocated");
    }
    if (e->release_stack) {
        fputs(", ", w->out);
        code_flow(w, e->release_stack, "where the block was released before");
    }
    fputs("]}", w->out);
}

int report_sarif(FILE* out, report_ctx_t* c, const report_opts_t* o, const char* tool_version) {
    sarif_t w = {.out = out, .c = c};
    if (getcwd(w.cwd, sizeof w.cwd))
        w.cwd_len = strlen(w.cwd);
    if (w.cwd_len == 1)
        w.cwd_len = 0; // "/": every path would be relative to it; keep them absolute
    model_t* m = report_model(c);
    fputs("{\n  \"$schema\": \"" SARIF_SCHEMA "\",\n  \"version\": \"2.1.0\",\n  \"runs\": [{\n"
          "    \"tool\": {\"driver\": {\"name\": \"heaplens\", \"version\": ",
          out);
    report_json_string(out, tool_version);
    fputs(",\n      \"rules\": [", out);
    for (size_t i = 0; i < NRULES; i++) {
        fprintf(out,
                "%s\n        {\"id\": \"%s\", \"name\": \"%s\", \"shortDescription\": {\"text\": ",
                i ? "," : "", rules[i].id, rules[i].name);
        report_json_string(out, rules[i].text);
        fprintf(out, "}, \"defaultConfiguration\": {\"level\": \"%s\"}}", rules[i].level);
    }
    fputs("]}},\n    \"originalUriBaseIds\": {\"" SRCROOT "\": {\"uri\": \"file://", out);
    uri_chars(out, w.cwd_len ? w.cwd : "/");
    fputs(w.cwd_len ? "/\"}},\n" : "\"}},\n", out);
    fputs("    \"invocations\": [{\"executionSuccessful\": true", out);
    if (o->exit_status >= 0)
        fprintf(out, ", \"exitCode\": %d", o->exit_status);
    else if (o->exit_signal)
        fprintf(out, ", \"exitSignalNumber\": %d", o->exit_signal);
    if (m->exe) {
        fputs(", \"executableLocation\": {\"uri\": \"file://", out);
        uri_chars(out, m->exe);
        fputs("\"}", out);
    }
    fputs("}],\n    \"results\": [", out);
    for (size_t i = 0; i < m->nerrors; i++)
        error_result(&w, &m->errors[i]);
    report_leaks_t lk;
    if (report_leaks(c, o->supp, &lk) == 0)
        for (size_t i = 0; i < lk.nrecords; i++)
            if (o->show_kinds & (1u << lk.records[i]->kind))
                leak_result(&w, lk.records[i]);
    fputs("\n    ]\n  }]\n}\n", out);
    return ferror(out) ? -1 : 0;
}
