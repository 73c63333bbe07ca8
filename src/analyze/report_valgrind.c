// SPDX-License-Identifier: MIT
// report_valgrind.c - memcheck's text and XML (protocol 4) from a heaplens model (see
// report_valgrind.h): its error kinds and words, loss records merged and ordered as memcheck
// does, its summaries, and a suppression for each error on request.
#define _GNU_SOURCE
#include "report_valgrind.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

typedef struct vg_stack_s {
    vg_frame_t* f;
    int n;
} vg_stack_t;

typedef struct vg_aux_s {
    char what[192];
    vg_stack_t stack; // n == 0: a line without a stack
} vg_aux_t;

// A heap error context: errors of one kind from one place, counted.
typedef struct vg_err_s {
    const char* kind;      // XML <kind>
    const char* supp_kind; // suppression kind: "Free", "Addr1"
    char what[192];
    vg_stack_t stack;
    vg_aux_t aux[2];
    int naux;
    uint64_t count;
    int supp; // the suppression that matched, -1: none
    unsigned unique;
} vg_err_t;

typedef struct vg_leak_s {
    int kind; // HL_LEAK_*
    uint64_t bytes, blocks, indirect_bytes, indirect_blocks;
    vg_stack_t stack;
    int supp;
    unsigned unique;
} vg_leak_t;

struct vg_report_s {
    report_ctx_t* c;
    model_t* m;
    vg_opts_t o;
    vg_err_t* errs;
    size_t nerrs;
    vg_leak_t* leaks; // memcheck's order
    size_t nleaks;
    md_kind_total_t kinds[HL_LEAK_COUNT], suppressed;
    uint64_t* supp_counts; // errors each suppression took
    md_kind_total_t* supp_leaked; // the leaked bytes and blocks each suppression took
    const char* agent_path;
};

// Frames memcheck compares to tell two heap errors apart (its Vg_MedRes).
#define VG_ERROR_RESOLUTION 4

// The allocator's own frame memcheck shows on top of a stack: its replacement function. Its
// realloc of NULL calls its malloc, the frame then on top; it replaces no reallocarray, which
// glibc makes a call of realloc.
static const struct {
    const char *fn, *mangled;
} alloc_frames[HL_FN_COUNT] = {
    [HL_FN_MALLOC] = {"malloc", NULL},
    [HL_FN_CALLOC] = {"calloc", NULL},
    [HL_FN_REALLOC] = {"realloc", NULL},
    [HL_FN_REALLOCARRAY] = {"realloc", NULL},
    [HL_FN_REALLOC_OF_NULL] = {"malloc", NULL},
    [HL_FN_REALLOCARRAY_OF_NULL] = {"malloc", NULL},
    [HL_FN_POSIX_MEMALIGN] = {"posix_memalign", NULL},
    [HL_FN_ALIGNED_ALLOC] = {"aligned_alloc", NULL},
    [HL_FN_MEMALIGN] = {"memalign", NULL},
    [HL_FN_VALLOC] = {"valloc", NULL},
    [HL_FN_PVALLOC] = {"pvalloc", NULL},
    [HL_FN_NEW] = {"operator new(unsigned long)", "_Znwm"},
    [HL_FN_NEW_ARRAY] = {"operator new[](unsigned long)", "_Znam"},
    [HL_FN_FREE] = {"free", NULL},
    [HL_FN_DELETE] = {"operator delete(void*)", "_ZdlPv"},
    [HL_FN_DELETE_ARRAY] = {"operator delete[](void*)", "_ZdaPv"},
};

static const char* leak_words[HL_LEAK_COUNT] = {"definitely lost", "indirectly lost",
                                                "possibly lost", "still reachable"};
static const char* leak_xml_kinds[HL_LEAK_COUNT] = {"Leak_DefinitelyLost", "Leak_IndirectlyLost",
                                                    "Leak_PossiblyLost", "Leak_StillReachable"};
static const char* leak_supp_words[HL_LEAK_COUNT] = {"definite", "indirect", "possible",
                                                     "reachable"};

// --- stacks -----------------------------------------------------------------------------------
// The start-up functions below main, as memcheck 3.19 tells them on Linux (by name: glibc's
// __libc_start_main_impl, which it names __libc_start_main@@GLIBC_2.34, is not one of them).
static int is_below_main(const char* fn) {
    static const char* const names[] = {"__libc_start_main", "__libc_start_call_main",
                                        "generic_start_main", "_start"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strcmp(fn, names[i]))
            return 1;
    // gcc's clones of them (__libc_start_main.isra.0)
    static const char clone_a[] = "__libc_start_main.", clone_b[] = "generic_start_main.";
    return !strncmp(fn, clone_a, sizeof clone_a - 1) || !strncmp(fn, clone_b, sizeof clone_b - 1);
}
static const char below_main[] = "(below main)";

// memcheck's --show-below-main=no on a stack's first frames: from the outermost in, it ends
// after the outermost main, or where no main is known (a stripped program) after the innermost
// start-up frame, which it names "(below main)" (so do the suppressions it writes, and files
// written for it match that name).
static void cut_below_main(vg_stack_t* s) {
    int keep = s->n;
    for (int i = s->n - 1; i >= 0; i--) {
        const char* fn = s->f[i].fn;
        int is_main = fn && !strcmp(fn, "main");
        if (is_main || (fn && is_below_main(fn)))
            keep = i + 1;
        if (is_main)
            break;
    }
    s->n = keep;
    vg_frame_t* last = keep > 0 ? &s->f[keep - 1] : NULL;
    if (last && last->fn && is_below_main(last->fn)) {
        last->fn = below_main;
        last->mangled = NULL;
    }
}

// Stack `id` as memcheck shows it: the allocator's function `fn` on top (when it has one), the
// program's frames from at most num_callers addresses (the allocator's one of them; the
// functions inlined at an address are shown beside it, as memcheck shows them), nothing below
// main. 0, or -1 without memory.
static int build_stack(vg_report_t* r, uint32_t id, int fn, vg_stack_t* out) {
    const report_frame_t* fr = NULL;
    int n = id ? report_stack(r->c, id, &fr) : 0;
    int cap = r->o.num_callers, addresses = 0;
    out->n = 0;
    out->f = calloc((size_t)n + 1, sizeof *out->f);
    if (!out->f)
        return -1;
    if (fn > 0 && fn < HL_FN_COUNT && alloc_frames[fn].fn && addresses < cap) {
        addresses++;
        out->f[out->n++] = (vg_frame_t){
            .fn = alloc_frames[fn].fn, .mangled = alloc_frames[fn].mangled, .obj = r->agent_path};
    }
    for (int i = 0; i < n; i++) {
        if (i == 0 || !fr[i - 1].is_inlined) { // the frame before is not inlined into this one
            if (addresses == cap)
                break;
            addresses++;
        }
        const md_module_t* md = model_module_of(r->m, fr[i].address);
        out->f[out->n++] = (vg_frame_t){.fn = fr[i].function,
                                        .obj = md ? md->path : NULL,
                                        .file = fr[i].file,
                                        .line = fr[i].line,
                                        // memcheck shows the call, a byte before the return
                                        .ip = fr[i].address ? fr[i].address - 1 : 0};
    }
    cut_below_main(out);
    return 0;
}

static int frames_equal(const vg_frame_t* a, const vg_frame_t* b) {
    return a->ip == b->ip && a->fn == b->fn && a->line == b->line;
}

static int stacks_equal(const vg_stack_t* a, const vg_stack_t* b, int depth) {
    int na = a->n < depth ? a->n : depth, nb = b->n < depth ? b->n : depth;
    if (na != nb)
        return 0;
    for (int i = 0; i < na; i++)
        if (!frames_equal(&a->f[i], &b->f[i]))
            return 0;
    return 1;
}

static int stack_cmp(const vg_stack_t* a, const vg_stack_t* b) {
    for (int i = 0; i < a->n && i < b->n; i++) {
        if (a->f[i].ip != b->f[i].ip)
            return a->f[i].ip < b->f[i].ip ? -1 : 1;
        if (a->f[i].fn != b->f[i].fn)
            return (uintptr_t)a->f[i].fn < (uintptr_t)b->f[i].fn ? -1 : 1;
        if (a->f[i].line != b->f[i].line)
            return a->f[i].line < b->f[i].line ? -1 : 1;
    }
    return a->n < b->n ? -1 : a->n > b->n;
}

static void stack_free(vg_stack_t* s) {
    free(s->f);
    s->f = NULL;
    s->n = 0;
}

// --- heap errors ------------------------------------------------------------------------------
static int is_cxx_release(int fn) {
    return fn == HL_FN_DELETE || fn == HL_FN_DELETE_ARRAY;
}

// Fills e from the model's error x (stacks built); 0, or -1 without memory.
static int describe_error(vg_report_t* r, const md_error_t* x, vg_err_t* e) {
    char size[32];
    report_commas(size, sizeof size, x->block_size);
    e->supp = -1;
    e->count = 1;
    e->kind = "InvalidFree";
    e->supp_kind = "Free";
    snprintf(e->what, sizeof e->what, "Invalid free() / delete / delete[] / realloc()");
    if (build_stack(r, x->stack, x->fn, &e->stack) != 0)
        return -1;
    vg_aux_t* a = e->aux;
    switch (x->kind) {
    case HL_ERR_DOUBLE_FREE:
    case HL_ERR_REALLOC_FREED:
        if (!x->has_block)
            break;
        snprintf(a->what, sizeof a->what,
                 "Address 0x%llx is 0 bytes inside a block of size %s free'd",
                 (unsigned long long)x->addr, size);
        // Which function released it first is not recorded: the family of this call.
        if (x->release_stack &&
            build_stack(r, x->release_stack, is_cxx_release(x->fn) ? x->fn : HL_FN_FREE,
                        &a->stack) != 0)
            return -1;
        a++;
        snprintf(a->what, sizeof a->what, "Block was alloc'd at");
        break;
    case HL_ERR_MISMATCHED_FREE:
        e->kind = "MismatchedFree";
        snprintf(e->what, sizeof e->what, "Mismatched free() / delete / delete []");
        if (x->has_block)
            snprintf(a->what, sizeof a->what,
                     "Address 0x%llx is 0 bytes inside a block of size %s alloc'd",
                     (unsigned long long)x->addr, size);
        break;
    case HL_ERR_OVERFLOW:
        // The write itself is not seen: the block's guard bytes were found changed when it was
        // released (the stack is the release's), or at exit (the allocation's stands first:
        // the protocol wants a stack and there is no other).
        e->kind = "InvalidWrite";
        e->supp_kind = "Addr1";
        snprintf(e->what, sizeof e->what,
                 "Invalid write of size 1 or more, after the end of a block (its guard bytes "
                 "were found written %s)",
                 x->stack ? "when it was released" : "at exit; the stack is its allocation's");
        if (!x->stack && x->has_block) {
            stack_free(&e->stack);
            if (build_stack(r, x->alloc_stack, x->alloc_fn, &e->stack) != 0)
                return -1;
        }
        if (x->has_block)
            snprintf(a->what, sizeof a->what,
                     "Address 0x%llx is 0 bytes after a block of size %s alloc'd",
                     (unsigned long long)(x->addr + x->block_size), size);
        break;
    case HL_ERR_DANGLING_POINTER:
        // memcheck has no such error; told in its words as close as they come
        e->kind = "InvalidRead";
        e->supp_kind = "Addr8";
        snprintf(e->what, sizeof e->what,
                 "A block allocated here holds, at exit, a pointer into a freed block");
        if (x->has_block && x->has_change)
            snprintf(a->what, sizeof a->what,
                     "Address 0x%llx is %lld bytes inside a block of size %s free'd",
                     (unsigned long long)(x->addr + (uint64_t)x->change_offset),
                     (long long)x->change_offset, size);
        break;
    case HL_ERR_READ_AFTER_FREE:
    case HL_ERR_READ_OVERFLOW:
    case HL_ERR_INVALID_ACCESS:
    case HL_ERR_READ_UNDERFLOW: {
        // A guard page's fault: the stack is the faulting instruction's, as memcheck's.
        e->kind = "InvalidRead";
        e->supp_kind = "Addr1";
        snprintf(e->what, sizeof e->what, "Invalid %s (a guard page faulted)",
                 x->kind == HL_ERR_INVALID_ACCESS ? "access" : "read");
        long long off = x->has_change ? (long long)x->change_offset : 0;
        unsigned long long at = (unsigned long long)(x->addr + (uint64_t)off);
        if (x->has_block && x->kind == HL_ERR_READ_UNDERFLOW)
            snprintf(a->what, sizeof a->what,
                     "Address 0x%llx is %lld bytes before a block of size %s alloc'd",
                     at, -off, size);
        else if (x->has_block && x->kind == HL_ERR_READ_OVERFLOW)
            snprintf(a->what, sizeof a->what,
                     "Address 0x%llx is %lld bytes after a block of size %s alloc'd",
                     at, off - (long long)x->block_size, size);
        else if (x->has_block)
            snprintf(a->what, sizeof a->what,
                     "Address 0x%llx is %lld bytes inside a block of size %s free'd",
                     at, off, size);
        else
            snprintf(a->what, sizeof a->what,
                     "Address 0x%llx is not stack'd, malloc'd or (recently) free'd", at);
        break;
    }
    case HL_ERR_UNDERFLOW:
    case HL_ERR_WRITE_AFTER_FREE:
        // Found changed later than written (at the release, when the block left the hoard, or
        // at exit): the block's allocation stands first when no call's stack was kept.
        e->kind = "InvalidWrite";
        e->supp_kind = "Addr1";
        snprintf(e->what, sizeof e->what, "Invalid write of size %llu, %s",
                 (unsigned long long)(x->has_change && x->change_length ? x->change_length : 1),
                 x->kind == HL_ERR_UNDERFLOW
                     ? "before the start of a block (its red zone was found written)"
                     : "to a freed block (found changed when it left the hoard or at exit)");
        if (!x->stack && x->has_block) {
            stack_free(&e->stack);
            if (build_stack(r, x->alloc_stack, x->alloc_fn, &e->stack) != 0)
                return -1;
        }
        if (x->has_block && x->has_change && x->change_offset < 0)
            snprintf(a->what, sizeof a->what,
                     "Address 0x%llx is %lld bytes before a block of size %s alloc'd",
                     (unsigned long long)(x->addr + (uint64_t)x->change_offset),
                     (long long)-x->change_offset, size);
        else if (x->has_block && x->has_change)
            snprintf(a->what, sizeof a->what,
                     "Address 0x%llx is %lld bytes inside a block of size %s free'd",
                     (unsigned long long)(x->addr + (uint64_t)x->change_offset),
                     (long long)x->change_offset, size);
        break;
    default: // HL_ERR_INVALID_FREE
        if (x->has_block)
            snprintf(a->what, sizeof a->what, "Address 0x%llx is inside a block of size %s alloc'd",
                     (unsigned long long)x->addr, size);
        else
            snprintf(a->what, sizeof a->what,
                     "Address 0x%llx is not stack'd, malloc'd or (recently) free'd",
                     (unsigned long long)x->addr);
        break;
    }
    if (x->has_block && build_stack(r, x->alloc_stack, x->alloc_fn, &a->stack) != 0)
        return -1;
    if (e->stack.n == 0) // no stack was recorded: one unknown frame, as the protocol wants one
        e->stack.f[e->stack.n++] = (vg_frame_t){.obj = r->agent_path};
    e->naux = a->what[0] ? (int)(a - e->aux) + 1 : (int)(a - e->aux);
    return 0;
}

static void err_free(vg_err_t* e) {
    stack_free(&e->stack);
    for (int i = 0; i < 2; i++)
        stack_free(&e->aux[i].stack);
}

static int gather_errors(vg_report_t* r) {
    model_t* m = r->m;
    r->errs = calloc(m->nerrors + 1, sizeof *r->errs);
    if (!r->errs)
        return -1;
    for (size_t i = 0; i < m->nerrors; i++) {
        vg_err_t e = {0};
        if (describe_error(r, &m->errors[i], &e) != 0) {
            err_free(&e);
            return -1;
        }
        vg_err_t* same = NULL;
        for (size_t k = 0; k < r->nerrs && !same; k++)
            if (r->errs[k].kind == e.kind && !strcmp(r->errs[k].what, e.what) &&
                stacks_equal(&r->errs[k].stack, &e.stack, VG_ERROR_RESOLUTION))
                same = &r->errs[k];
        if (same) {
            same->count++;
            err_free(&e);
            continue;
        }
        e.supp = vsupp_match(r->o.supp, e.supp_kind, -1, e.stack.f, e.stack.n);
        r->errs[r->nerrs++] = e;
    }
    for (size_t k = 0; k < r->nerrs; k++)
        if (r->errs[k].supp >= 0)
            r->supp_counts[r->errs[k].supp] += r->errs[k].count;
    return 0;
}

// --- loss records -----------------------------------------------------------------------------
static int cmp_leak_key(const void* pa, const void* pb) {
    const vg_leak_t *a = pa, *b = pb;
    if (a->kind != b->kind)
        return a->kind - b->kind;
    return stack_cmp(&a->stack, &b->stack);
}

// memcheck's order (mc_leakcheck.c): total bytes, then kind, then blocks.
static int cmp_leak_order(const void* pa, const void* pb) {
    const vg_leak_t *a = pa, *b = pb;
    uint64_t ta = a->bytes + a->indirect_bytes, tb = b->bytes + b->indirect_bytes;
    if (ta != tb)
        return ta < tb ? -1 : 1;
    if (a->kind != b->kind)
        return a->kind - b->kind;
    if (a->blocks != b->blocks)
        return a->blocks < b->blocks ? -1 : 1;
    return stack_cmp(&a->stack, &b->stack);
}

// The model's records with memcheck's stacks; records whose stacks agree in the frames memcheck
// keeps are one record, as in memcheck.
static int gather_leaks(vg_report_t* r) {
    model_t* m = r->m;
    report_leaks_t lk;
    if (report_leaks(r->c, NULL, &lk) != 0)
        return -1;
    r->leaks = calloc(lk.nrecords + 1, sizeof *r->leaks);
    if (!r->leaks)
        return -1;
    for (size_t i = 0; i < lk.nrecords; i++) {
        const md_leak_record_t* x = lk.records[i];
        if (x->kind >= HL_LEAK_COUNT)
            continue; // never scanned: no verdict to give
        vg_leak_t* l = &r->leaks[r->nleaks];
        int fn = x->stack < m->nstacks ? m->stacks[x->stack].alloc_fn : 0;
        if (build_stack(r, x->stack, fn ? fn : HL_FN_MALLOC, &l->stack) != 0)
            return -1;
        l->kind = x->kind;
        l->bytes = x->bytes;
        l->blocks = x->blocks;
        l->indirect_bytes = x->indirect_bytes;
        l->indirect_blocks = x->indirect_blocks;
        r->nleaks++;
    }
    qsort(r->leaks, r->nleaks, sizeof *r->leaks, cmp_leak_key);
    size_t out = 0;
    for (size_t i = 0; i < r->nleaks; i++) {
        vg_leak_t* l = &r->leaks[i];
        if (out && l->kind == r->leaks[out - 1].kind &&
            stack_cmp(&l->stack, &r->leaks[out - 1].stack) == 0) {
            vg_leak_t* into = &r->leaks[out - 1];
            into->bytes += l->bytes;
            into->blocks += l->blocks;
            into->indirect_bytes += l->indirect_bytes;
            into->indirect_blocks += l->indirect_blocks;
            stack_free(&l->stack);
            continue;
        }
        r->leaks[out++] = *l;
    }
    r->nleaks = out;
    qsort(r->leaks, r->nleaks, sizeof *r->leaks, cmp_leak_order);
    for (size_t i = 0; i < r->nleaks; i++) {
        vg_leak_t* l = &r->leaks[i];
        l->supp = vsupp_match(r->o.supp, "Leak", l->kind, l->stack.f, l->stack.n);
        md_kind_total_t* t = l->supp >= 0 ? &r->suppressed : &r->kinds[l->kind];
        t->bytes += l->bytes;
        t->blocks += l->blocks;
        if (l->supp >= 0 && r->o.leak_check == VG_LEAK_CHECK_FULL) {
            r->supp_counts[l->supp]++;
            r->supp_leaked[l->supp].bytes += l->bytes;
            r->supp_leaked[l->supp].blocks += l->blocks;
        }
    }
    return 0;
}

static int leak_is_shown(const vg_report_t* r, const vg_leak_t* l) {
    return r->o.leak_check == VG_LEAK_CHECK_FULL && l->supp < 0 &&
           (r->o.show_kinds & (1u << l->kind));
}

static int leak_is_error(const vg_report_t* r, const vg_leak_t* l) {
    return r->o.leak_check == VG_LEAK_CHECK_FULL && l->supp < 0 &&
           (r->o.error_kinds & (1u << l->kind));
}

// --- the report -------------------------------------------------------------------------------
static const char* find_agent_path(const model_t* m) {
    for (size_t i = 0; i < m->nmods; i++) {
        const char* p = m->mods[i].path;
        const char* slash = p ? strrchr(p, '/') : NULL;
        if (slash && !strcmp(slash + 1, "libheaplens.so"))
            return p;
    }
    return "libheaplens.so";
}

vg_report_t* vg_report_new(report_ctx_t* c, const vg_opts_t* o) {
    vg_report_t* r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->c = c;
    r->m = report_model(c);
    r->o = *o;
    if (r->o.num_callers < 1)
        r->o.num_callers = 1;
    r->agent_path = find_agent_path(r->m);
    r->supp_counts = calloc(vsupp_count(o->supp) + 1, sizeof *r->supp_counts);
    r->supp_leaked = calloc(vsupp_count(o->supp) + 1, sizeof *r->supp_leaked);
    if (!r->supp_counts || !r->supp_leaked || gather_errors(r) != 0 || gather_leaks(r) != 0) {
        vg_report_free(r);
        return NULL;
    }
    unsigned unique = 0;
    for (size_t i = 0; i < r->nerrs; i++)
        r->errs[i].unique = unique++;
    for (size_t i = 0; i < r->nleaks; i++)
        r->leaks[i].unique = unique++;
    return r;
}

void vg_report_free(vg_report_t* r) {
    if (!r)
        return;
    for (size_t i = 0; i < r->nerrs; i++)
        err_free(&r->errs[i]);
    for (size_t i = 0; i < r->nleaks; i++)
        stack_free(&r->leaks[i].stack);
    free(r->errs);
    free(r->leaks);
    free(r->supp_counts);
    free(r->supp_leaked);
    free(r);
}

uint64_t vg_report_errors(const vg_report_t* r) {
    uint64_t n = 0;
    for (size_t i = 0; i < r->nerrs; i++)
        if (r->errs[i].supp < 0)
            n += r->errs[i].count;
    for (size_t i = 0; i < r->nleaks; i++)
        n += (uint64_t)leak_is_error(r, &r->leaks[i]);
    return n;
}

// Error contexts and errors not suppressed, and suppressed ones.
static void error_tally(const vg_report_t* r, uint64_t* errors, uint64_t* contexts,
                        uint64_t* supp_errors, uint64_t* supp_contexts) {
    *errors = *contexts = *supp_errors = *supp_contexts = 0;
    for (size_t i = 0; i < r->nerrs; i++) {
        if (r->errs[i].supp < 0) {
            *errors += r->errs[i].count;
            ++*contexts;
        } else {
            *supp_errors += r->errs[i].count;
            ++*supp_contexts;
        }
    }
    for (size_t i = 0; i < r->nleaks; i++) {
        if (leak_is_error(r, &r->leaks[i])) {
            ++*errors;
            ++*contexts;
        } else if (r->o.leak_check == VG_LEAK_CHECK_FULL && r->leaks[i].supp >= 0 &&
                   (r->o.error_kinds & (1u << r->leaks[i].kind))) {
            // a suppressed leak counts where it would have been an error, as memcheck counts it
            ++*supp_errors;
            ++*supp_contexts;
        }
    }
}

static long report_pid(const vg_report_t* r) {
    return r->o.pid ? r->o.pid : (long)r->m->pid;
}

// --- text -------------------------------------------------------------------------------------
static const char* base_name(const char* p) {
    const char* slash = p ? strrchr(p, '/') : NULL;
    return slash ? slash + 1 : p;
}

static void text_stack(FILE* out, long pid, const vg_stack_t* s) {
    for (int i = 0; i < s->n; i++) {
        const vg_frame_t* f = &s->f[i];
        fprintf(out, "==%ld==    %s 0x%llX: %s", pid, i ? "by" : "at", f->ip,
                f->fn ? f->fn : "???");
        if (f->file)
            fprintf(out, " (%s:%u)", base_name(f->file), f->line);
        else if (f->obj)
            fprintf(out, " (in %s)", f->obj);
        fputc('\n', out);
    }
}

// The suppression that would hide an error with this stack, in the file format.
static void text_suppression(FILE* out, const char* kind, int leak_kind, const vg_stack_t* s) {
    fprintf(out, "{\n   <insert_a_suppression_name_here>\n   Memcheck:%s\n", kind);
    if (leak_kind >= 0)
        fprintf(out, "   match-leak-kinds: %s\n", leak_supp_words[leak_kind]);
    for (int i = 0; i < s->n; i++) {
        const vg_frame_t* f = &s->f[i];
        if (f->mangled || f->fn)
            fprintf(out, "   fun:%s\n", f->mangled ? f->mangled : f->fn);
        else if (f->obj)
            fprintf(out, "   obj:%s\n", f->obj);
        else
            fputs("   obj:*\n", out);
    }
    fputs("}\n", out);
}

static void text_error(FILE* out, const vg_report_t* r, const vg_err_t* e, int with_supp) {
    long pid = report_pid(r);
    fprintf(out, "==%ld== %s\n", pid, e->what);
    text_stack(out, pid, &e->stack);
    for (int i = 0; i < e->naux; i++) {
        fprintf(out, "==%ld==  %s\n", pid, e->aux[i].what);
        text_stack(out, pid, &e->aux[i].stack);
    }
    fprintf(out, "==%ld== \n", pid);
    if (with_supp)
        text_suppression(out, e->supp_kind, -1, &e->stack);
}

static void text_leak(FILE* out, const vg_report_t* r, const vg_leak_t* l, size_t i) {
    long pid = report_pid(r);
    char a[32], b[32], d[32];
    report_commas(b, sizeof b, l->blocks);
    if (l->indirect_bytes || l->indirect_blocks) {
        report_commas(a, sizeof a, l->bytes + l->indirect_bytes);
        report_commas(d, sizeof d, l->bytes);
        char ind[32];
        report_commas(ind, sizeof ind, l->indirect_bytes);
        fprintf(out,
                "==%ld== %s (%s direct, %s indirect) bytes in %s blocks are %s in loss record %zu "
                "of %zu\n",
                pid, a, d, ind, b, leak_words[l->kind], i + 1, r->nleaks);
    } else {
        report_commas(a, sizeof a, l->bytes);
        fprintf(out, "==%ld== %s bytes in %s blocks are %s in loss record %zu of %zu\n", pid, a, b,
                leak_words[l->kind], i + 1, r->nleaks);
    }
    text_stack(out, pid, &l->stack);
    fprintf(out, "==%ld== \n", pid);
    if (r->o.gen_suppressions)
        text_suppression(out, "Leak", l->kind, &l->stack);
}

static void text_preamble(FILE* out, const vg_report_t* r) {
    const model_t* m = r->m;
    long pid = report_pid(r);
    fprintf(out, "==%ld== Memcheck's report, from a heaplens trace\n", pid);
    fprintf(out, "==%ld== Using %s; rerun with -h for its options\n", pid,
            r->o.tool_version ? r->o.tool_version : "heaplens");
    fprintf(out, "==%ld== Command:", pid);
    for (size_t i = 0; i < m->argv_len; i += strlen(m->argv + i) + 1)
        fprintf(out, " %s", m->argv + i);
    if (!m->argv_len && m->exe)
        fprintf(out, " %s", m->exe);
    fprintf(out, "\n==%ld== \n", pid);
}

static void text_leak_summary(FILE* out, const vg_report_t* r) {
    long pid = report_pid(r);
    char a[32], b[32];
    fprintf(out, "==%ld== LEAK SUMMARY:\n", pid);
    for (int k = 0; k < HL_LEAK_COUNT; k++) {
        report_commas(a, sizeof a, r->kinds[k].bytes);
        report_commas(b, sizeof b, r->kinds[k].blocks);
        fprintf(out, "==%ld==    %15s: %s bytes in %s blocks\n", pid, leak_words[k], a, b);
    }
    report_commas(a, sizeof a, r->suppressed.bytes);
    report_commas(b, sizeof b, r->suppressed.blocks);
    fprintf(out, "==%ld==    %15s: %s bytes in %s blocks\n", pid, "suppressed", a, b);
    if (r->o.leak_check == VG_LEAK_CHECK_SUMMARY) {
        fprintf(out, "==%ld== Rerun with --leak-check=full to see details of leaked memory\n", pid);
    } else {
        if (r->kinds[HL_LEAK_REACHABLE].blocks && !(r->o.show_kinds & (1u << HL_LEAK_REACHABLE)))
            fprintf(out,
                    "==%ld== Reachable blocks (those to which a pointer was found) are not "
                    "shown.\n==%ld== To see them, rerun with: --leak-check=full "
                    "--show-leak-kinds=all\n",
                    pid, pid);
    }
    fprintf(out, "==%ld== \n", pid);
}

static void text_error_summary(FILE* out, const vg_report_t* r) {
    uint64_t e, c, se, sc;
    error_tally(r, &e, &c, &se, &sc);
    fprintf(out,
            "==%ld== ERROR SUMMARY: %llu errors from %llu contexts (suppressed: %llu from %llu)\n",
            report_pid(r), (unsigned long long)e, (unsigned long long)c, (unsigned long long)se,
            (unsigned long long)sc);
}

void vg_report_text(FILE* out, const vg_report_t* r) {
    const model_t* m = r->m;
    long pid = report_pid(r);
    int is_quiet = r->o.verbosity == 0;
    if (!is_quiet) {
        text_preamble(out, r);
        if (m->read.is_truncated || m->read.is_corrupt)
            fprintf(out,
                    "==%ld== The trace was cut short (%s): this report covers what was "
                    "written\n==%ld== \n",
                    pid, m->read.message, pid);
    }
    for (size_t i = 0; i < r->nerrs; i++)
        if (r->errs[i].supp < 0)
            text_error(out, r, &r->errs[i], r->o.gen_suppressions);
    if (r->o.exit_signal) {
        fprintf(out,
                "==%ld== \n==%ld== Process terminating with default action of signal %d (SIG%s)\n",
                pid, pid, r->o.exit_signal,
                sigabbrev_np(r->o.exit_signal) ? sigabbrev_np(r->o.exit_signal) : "?");
    }
    char a[32], b[32], d[32];
    if (!is_quiet) {
        report_commas(a, sizeof a, m->heap_bytes);
        report_commas(b, sizeof b, m->heap_blocks);
        fprintf(out, "==%ld== \n==%ld== HEAP SUMMARY:\n", pid, pid);
        fprintf(out, "==%ld==     in use at exit: %s bytes in %s blocks\n", pid, a, b);
        report_commas(a, sizeof a, m->allocations);
        report_commas(b, sizeof b, m->frees);
        report_commas(d, sizeof d, m->bytes_allocated);
        fprintf(out, "==%ld==   total heap usage: %s allocs, %s frees, %s bytes allocated\n", pid,
                a, b, d);
        fprintf(out, "==%ld== \n", pid);
    }
    if (!m->is_scanned && m->heap_blocks) {
        fprintf(out,
                "==%ld== The process ended without heaplens's leak scan: the blocks in use "
                "at exit were not classified\n==%ld== \n",
                pid, pid);
    } else if (r->o.leak_check != VG_LEAK_CHECK_NO) {
        if (!m->heap_blocks && r->nleaks == 0) {
            if (!is_quiet)
                fprintf(out,
                        "==%ld== All heap blocks were freed -- no leaks are possible\n"
                        "==%ld== \n",
                        pid, pid);
        } else {
            for (size_t i = 0; i < r->nleaks; i++)
                if (leak_is_shown(r, &r->leaks[i]))
                    text_leak(out, r, &r->leaks[i], i);
            if (!is_quiet)
                text_leak_summary(out, r);
        }
    } else if (!is_quiet) {
        fprintf(out,
                "==%ld== For a detailed leak analysis, rerun with: --leak-check=full\n"
                "==%ld== \n",
                pid, pid);
    }
    if (r->o.verbosity >= 2)
        for (size_t i = 0; i < vsupp_count(r->o.supp); i++) {
            if (!r->supp_counts[i])
                continue;
            fprintf(out, "--%ld-- used_suppression: %6llu %s %s", pid,
                    (unsigned long long)r->supp_counts[i], vsupp_name(r->o.supp, i),
                    vsupp_where(r->o.supp, i));
            if (r->supp_leaked[i].blocks) { // as memcheck: what a leak suppression hid
                char a[32], b[32];
                report_commas(a, sizeof a, r->supp_leaked[i].bytes);
                report_commas(b, sizeof b, r->supp_leaked[i].blocks);
                fprintf(out, " suppressed: %s bytes in %s blocks", a, b);
            }
            fputc('\n', out);
        }
    if (is_quiet)
        return;
    if (r->o.show_counts) {
        text_error_summary(out, r);
        size_t n = 0, k = 0;
        for (size_t i = 0; i < r->nerrs; i++)
            n += r->errs[i].supp < 0;
        for (size_t i = 0; i < r->nerrs; i++) {
            if (r->errs[i].supp >= 0)
                continue;
            fprintf(out, "==%ld== \n==%ld== %llu errors in context %zu of %zu:\n", pid, pid,
                    (unsigned long long)r->errs[i].count, ++k, n);
            text_error(out, r, &r->errs[i], 0);
        }
    } else {
        fprintf(out, "==%ld== For lists of detected and suppressed errors, rerun with: -s\n", pid);
    }
    text_error_summary(out, r);
}

// --- XML (protocol 4) ---------------------------------------------------------------------------
static void xml_text(FILE* out, const char* s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '&':
            fputs("&amp;", out);
            break;
        case '<':
            fputs("&lt;", out);
            break;
        case '>':
            fputs("&gt;", out);
            break;
        default:
            // Control characters are not allowed in XML 1.0.
            fputc((unsigned char)*s < 0x20 && *s != '\t' && *s != '\n' ? '?' : *s, out);
        }
    }
}

static void xml_elem(FILE* out, const char* indent, const char* tag, const char* text) {
    fprintf(out, "%s<%s>", indent, tag);
    xml_text(out, text);
    fprintf(out, "</%s>\n", tag);
}

static void xml_stack(FILE* out, const vg_stack_t* s) {
    fputs("  <stack>\n", out);
    for (int i = 0; i < s->n; i++) {
        const vg_frame_t* f = &s->f[i];
        fprintf(out, "    <frame>\n      <ip>0x%llX</ip>\n", f->ip);
        if (f->obj)
            xml_elem(out, "      ", "obj", f->obj);
        if (f->fn)
            xml_elem(out, "      ", "fn", f->fn);
        if (f->file) {
            const char* slash = strrchr(f->file, '/');
            if (slash) {
                fputs("      <dir>", out);
                for (const char* p = f->file; p < slash; p++)
                    xml_text(out, (char[2]){*p, 0});
                fputs("</dir>\n", out);
            }
            xml_elem(out, "      ", "file", slash ? slash + 1 : f->file);
            fprintf(out, "      <line>%u</line>\n", f->line);
        }
        fputs("    </frame>\n", out);
    }
    fputs("  </stack>\n", out);
}

static void xml_suppression(FILE* out, const char* kind, int leak_kind, const vg_stack_t* s) {
    fprintf(out,
            "  <suppression>\n    <sname>insert_a_suppression_name_here</sname>\n"
            "    <skind>Memcheck:%s</skind>\n",
            kind);
    if (leak_kind >= 0)
        fprintf(out, "    <skaux>match-leak-kinds: %s</skaux>\n", leak_supp_words[leak_kind]);
    for (int i = 0; i < s->n; i++) {
        const vg_frame_t* f = &s->f[i];
        fputs("    <sframe> ", out);
        if (f->mangled || f->fn) {
            fputs("<fun>", out);
            xml_text(out, f->mangled ? f->mangled : f->fn);
            fputs("</fun>", out);
        } else {
            fputs("<obj>", out);
            xml_text(out, f->obj ? f->obj : "*");
            fputs("</obj>", out);
        }
        fputs(" </sframe>\n", out);
    }
    fputs("    <rawtext>\n<![CDATA[\n", out);
    // The raw text is the file's form; "]]>" cannot occur in it (no frame name holds it).
    text_suppression(out, kind, leak_kind, s);
    fputs("]]>\n    </rawtext>\n  </suppression>\n", out);
}

static void xml_status(FILE* out, const char* state, int64_t ns) {
    if (ns < 0)
        ns = 0;
    long long ms = ns / 1000000;
    fprintf(out,
            "<status>\n  <state>%s</state>\n  <time>%02lld:%02lld:%02lld:%02lld.%03lld "
            "</time>\n</status>\n\n",
            state, ms / 86400000, ms / 3600000 % 24, ms / 60000 % 60, ms / 1000 % 60, ms % 1000);
}

static void xml_preamble(FILE* out, const vg_report_t* r) {
    const model_t* m = r->m;
    fputs("<?xml version=\"1.0\"?>\n\n<valgrindoutput>\n\n<protocolversion>4</protocolversion>\n"
          "<protocoltool>memcheck</protocoltool>\n\n<preamble>\n",
          out);
    xml_elem(out, "  ", "line", "Memcheck's report, from a heaplens trace");
    char line[256];
    snprintf(line, sizeof line, "Using %s", r->o.tool_version ? r->o.tool_version : "heaplens");
    xml_elem(out, "  ", "line", line);
    fputs("  <line>Command:", out);
    for (size_t i = 0; i < m->argv_len; i += strlen(m->argv + i) + 1) {
        fputc(' ', out);
        xml_text(out, m->argv + i);
    }
    fputs("</line>\n</preamble>\n\n", out);
    fprintf(out, "<pid>%ld</pid>\n<ppid>%llu</ppid>\n<tool>memcheck</tool>\n\n<args>\n  <vargv>\n",
            report_pid(r), (unsigned long long)m->ppid);
    for (int i = 0; i < r->o.nvargv; i++)
        xml_elem(out, "    ", i ? "arg" : "exe", r->o.vargv[i]);
    fputs("  </vargv>\n  <argv>\n", out);
    xml_elem(out, "    ", "exe", m->exe ? m->exe : "");
    size_t first = m->argv_len ? strlen(m->argv) + 1 : 0; // argv[0] is the exe above
    for (size_t i = first; i < m->argv_len; i += strlen(m->argv + i) + 1)
        xml_elem(out, "    ", "arg", m->argv + i);
    fputs("  </argv>\n</args>\n\n", out);
}

static void xml_error(FILE* out, const vg_report_t* r, const vg_err_t* e) {
    fprintf(out, "<error>\n  <unique>0x%x</unique>\n  <tid>1</tid>\n  <kind>%s</kind>\n", e->unique,
            e->kind);
    xml_elem(out, "  ", "what", e->what);
    xml_stack(out, &e->stack);
    for (int i = 0; i < e->naux; i++) {
        xml_elem(out, "  ", "auxwhat", e->aux[i].what);
        if (e->aux[i].stack.n)
            xml_stack(out, &e->aux[i].stack);
    }
    if (r->o.gen_suppressions)
        xml_suppression(out, e->supp_kind, -1, &e->stack);
    fputs("</error>\n\n", out);
}

static void xml_leak(FILE* out, const vg_report_t* r, const vg_leak_t* l, size_t i) {
    char text[256];
    char a[32], b[32], d[32], ind[32];
    report_commas(a, sizeof a, l->bytes + l->indirect_bytes);
    report_commas(b, sizeof b, l->blocks);
    report_commas(d, sizeof d, l->bytes);
    report_commas(ind, sizeof ind, l->indirect_bytes);
    if (l->indirect_bytes || l->indirect_blocks)
        snprintf(text, sizeof text,
                 "%s (%s direct, %s indirect) bytes in %s blocks are %s in loss record %zu of %zu",
                 a, d, ind, b, leak_words[l->kind], i + 1, r->nleaks);
    else
        snprintf(text, sizeof text, "%s bytes in %s blocks are %s in loss record %zu of %zu", a, b,
                 leak_words[l->kind], i + 1, r->nleaks);
    fprintf(out, "<error>\n  <unique>0x%x</unique>\n  <tid>1</tid>\n  <kind>%s</kind>\n  <xwhat>\n",
            l->unique, leak_xml_kinds[l->kind]);
    xml_elem(out, "    ", "text", text);
    fprintf(
        out,
        "    <leakedbytes>%llu</leakedbytes>\n    <leakedblocks>%llu</leakedblocks>\n  </xwhat>\n",
        (unsigned long long)(l->bytes + l->indirect_bytes), (unsigned long long)l->blocks);
    xml_stack(out, &l->stack);
    if (r->o.gen_suppressions)
        xml_suppression(out, "Leak", l->kind, &l->stack);
    fputs("</error>\n\n", out);
}

void vg_report_xml(FILE* out, const vg_report_t* r) {
    const model_t* m = r->m;
    xml_preamble(out, r);
    xml_status(out, "RUNNING", 0);
    for (size_t i = 0; i < r->nerrs; i++)
        if (r->errs[i].supp < 0)
            xml_error(out, r, &r->errs[i]);
    xml_status(out, "FINISHED", m->has_end ? m->end_time_ns : m->last_time_ns);
    for (size_t i = 0; i < r->nleaks; i++)
        if (leak_is_shown(r, &r->leaks[i]))
            xml_leak(out, r, &r->leaks[i], i);
    fputs("<errorcounts>\n", out);
    for (size_t i = 0; i < r->nerrs; i++)
        if (r->errs[i].supp < 0)
            fprintf(out,
                    "  <pair>\n    <count>%llu</count>\n    <unique>0x%x</unique>\n  </pair>\n",
                    (unsigned long long)r->errs[i].count, r->errs[i].unique);
    fputs("</errorcounts>\n\n<suppcounts>\n", out);
    for (size_t i = 0; i < vsupp_count(r->o.supp); i++) {
        if (!r->supp_counts[i])
            continue;
        fprintf(out, "  <pair>\n    <count>%llu</count>\n", (unsigned long long)r->supp_counts[i]);
        xml_elem(out, "    ", "name", vsupp_name(r->o.supp, i));
        fputs("  </pair>\n", out);
    }
    fputs("</suppcounts>\n\n</valgrindoutput>\n\n", out);
}
