// SPDX-License-Identifier: MIT
// unwind.c - the backtrace of the current call. Programs are usually built -O2 without frame
// pointers, so frames are walked with their CFI (.eh_frame). Interpreting CFI is slow, so each
// thread caches, per return address, the few numbers a step needs (where the CFA is, where the
// return address and the saved %rbp are): a frame seen before costs one table probe. An
// address whose CFI is beyond this simple form (signal frames, unusual expressions) sends the
// whole call to libgcc's general unwinder, which carries no TLS and so leaves the program's
// thread layout as it was. Frames inside libheaplens.so (built with frame pointers) are
// skipped by following %rbp.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/single_threaded.h>
#include <unwind.h>

#include "../common/compiler.h"
#include "log.h"
#include "modules.h"
#include "options.h"
#include "os.h"
#include "stacks.h"
#include "thread.h"
#include "unwind.h"

// ---------------------------------------------------------------------------------------------
// The general path
// ---------------------------------------------------------------------------------------------
typedef struct collect_s {
    uintptr_t* ips;
    int n, max, skipping;
} collect_t;

static _Unwind_Reason_Code on_frame(struct _Unwind_Context* ctx, void* arg) {
    collect_t* c = arg;
    uintptr_t ip = (uintptr_t)_Unwind_GetIP(ctx);
    if (!ip)
        return _URC_END_OF_STACK;
    if (c->skipping && modules_own_text(ip))
        return _URC_NO_REASON;
    c->skipping = 0;
    c->ips[c->n++] = ip;
    return c->n >= c->max ? _URC_END_OF_STACK : _URC_NO_REASON;
}

static HL_NOINLINE int unwind_general(uintptr_t* ips, int max) {
    collect_t c = {ips, 0, max, 1};
    _Unwind_Backtrace(on_frame, &c);
    return c.n;
}

// ---------------------------------------------------------------------------------------------
// The program's frame under the agent's, for the scan: its stack pointer and the registers the
// frames below it must preserve for it (libgcc's unwinder restores them through every frame's
// CFI, a signal frame included). What lies deeper on the stack is the agent's (or, for an exit,
// libc's and the loader's exit path): dead frames full of stale copies of pointers.
// ---------------------------------------------------------------------------------------------
#if defined(__x86_64__)
static const int callee_saved[] = {3, 6, 12, 13, 14, 15}; // rbx rbp r12-r15, DWARF numbers
#elif defined(__aarch64__)
static const int callee_saved[] = {19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30}; // x19-x30
#endif
#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(HL_ARRAY_LEN(callee_saved) <= HL_FRAME_REGS, "hl_frame_t holds them all");
#endif

typedef struct seek_s {
    int flags;
    int is_past_signal; // HL_FRAME_PAST_SIGNAL: the interrupted frame has been reached
    uintptr_t libc_lo, libc_hi, ld_lo, ld_hi;
    hl_frame_t* out;
} seek_t;

// The extent of the object holding addr (libc, the loader), without a lock.
static void object_of(const void* addr, uintptr_t* lo, uintptr_t* hi) {
    *lo = *hi = 0;
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
    struct dl_find_object fo;
    if (_dl_find_object((void*)addr, &fo) == 0) {
        *lo = (uintptr_t)fo.dlfo_map_start;
        *hi = (uintptr_t)fo.dlfo_map_end;
    }
#else
    (void)addr;
#endif
}

// One frame, innermost first. libgcc's CFA of a frame's context is the frame's own stack
// pointer (its callee's CFA); a signal frame's is the interrupted stack pointer.
static _Unwind_Reason_Code on_seek(struct _Unwind_Context* ctx, void* arg) {
    seek_t* s = arg;
    int is_signal = 0;
    uintptr_t ip = (uintptr_t)_Unwind_GetIPInfo(ctx, &is_signal);
    if (!ip)
        return _URC_END_OF_STACK;
    if ((s->flags & HL_FRAME_PAST_SIGNAL) && !s->is_past_signal) {
        if (!is_signal)
            return _URC_NO_REASON; // the handler's frames
        s->is_past_signal = 1;
    }
    hl_frame_t* f = s->out;
    f->sp = (uintptr_t)_Unwind_GetCFA(ctx);
    f->ip = ip;
    f->is_signal = is_signal;
    uintptr_t pc = is_signal ? ip : ip - 1; // a return address points past its call
    if (modules_own_text(pc))
        return _URC_NO_REASON;
    if ((s->flags & HL_FRAME_PAST_LIBC) &&
        ((pc >= s->libc_lo && pc < s->libc_hi) || (pc >= s->ld_lo && pc < s->ld_hi)))
        return _URC_NO_REASON;
    f->nregs = 0;
#if defined(__x86_64__) || defined(__aarch64__)
    for (size_t i = 0; i < HL_ARRAY_LEN(callee_saved); i++)
        f->regs[f->nregs++] = (uintptr_t)_Unwind_GetGR(ctx, callee_saved[i]);
#endif
    f->is_program = 1;
    return _URC_END_OF_STACK;
}

int unwind_program_frame(int flags, hl_frame_t* out) {
    memset(out, 0, sizeof *out);
    seek_t s = {.flags = flags, .out = out};
    if (flags & HL_FRAME_PAST_LIBC) {
        object_of((const void*)&exit, &s.libc_lo, &s.libc_hi);
        object_of((const void*)&_r_debug, &s.ld_lo, &s.ld_hi);
    }
    _Unwind_Backtrace(on_seek, &s);
    return out->is_program ? 0 : -1;
}

#if defined(__x86_64__)
// ---------------------------------------------------------------------------------------------
// Step rules, one per return address:
//   CFA     = %rsp + off | %rbp + off | *(%rbp + off)
//   RA      = *(CFA + ra_off)
//   new rbp = unchanged | *(CFA + rbp_off) | *(%rbp + rbp_off)
// ---------------------------------------------------------------------------------------------
enum { CFA_RSP = 0, CFA_RBP = 1, CFA_DEREF_RBP = 2 };
enum { RBP_SAME = 0, RBP_AT_CFA = 1, RBP_AT_RBP = 2 };
enum { RULE_VALID = 1, RULE_END = 2, RULE_HARD = 4 };

// mode packs (flags, rbp kind, cfa kind) into one byte, so the usual frame is told by one
// comparison: a valid rule with the CFA at %rsp + off.
typedef struct rule_s {
    int32_t cfa_off;
    int16_t rbp_off;
    int8_t ra_off;
    uint8_t mode; // RULE_* << 4 | RBP_* << 2 | CFA_*
} rule_t;

#define RULE_MODE(flags, rbp_kind, cfa_kind) ((uint8_t)((flags) << 4 | (rbp_kind) << 2 | (cfa_kind)))
#define RULE_FLAGS(r) ((r).mode >> 4)
#define RULE_CFA(r) ((r).mode & 3)
#define RULE_RBP(r) (((r).mode >> 2) & 3)

typedef struct cache_entry_s {
    uintptr_t ip;
    rule_t rule;
} cache_entry_t;

// Four ways a set (one cache line), the one used last first: a compiler's walks pass through some
// 10,000 return addresses, and with one way a slot two thirds of them were worked out again after
// another took their slot (cc1 -g -O2 on an 8,800-line file: 32,000 rules worked out for 9,600
// addresses; 10,400 with four).
#define HL_RULE_CACHE 16384 // entries per thread at most: 256 KiB
#define HL_RULE_WAYS 4
// The cache starts at HL_RULE_CACHE_FIRST entries and grows HL_RULE_CACHE_GROWTH times at a
// step, up to HL_RULE_CACHE, once it has worked out rules for half as many addresses as it
// holds since it last grew (rule_grow). Rules land on the table's pages at random: a program
// that walks a few hundred return addresses (sleep, ls, a shell, a compiler's driver) made
// every page of a 256 KiB table present. With the small first table their peak RSS is 130-250
// KB less (cxx's 0.3 MB less), and cc1, which grows it to the largest, runs 0.8% more
// instructions in the agent under cachegrind (the rules worked out again while the table was
// smaller, and the table's size read with it).
#define HL_RULE_CACHE_FIRST 1024 // 16 KiB
#define HL_RULE_CACHE_GROWTH 4

// libgcc finds the FDE covering an address (through the loader's eh_frame_hdr tables).
struct dwarf_eh_bases {
    void* tbase;
    void* dbase;
    void* func;
};
extern const void* _Unwind_Find_FDE(void* pc, struct dwarf_eh_bases* bases);

static uint64_t uleb(const uint8_t** p, const uint8_t* end) {
    uint64_t v = 0;
    for (unsigned shift = 0; *p < end && shift < 64; shift += 7) {
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            break;
    }
    return v;
}

static int64_t sleb(const uint8_t** p, const uint8_t* end) {
    int64_t v = 0;
    unsigned shift = 0;
    uint8_t b = 0;
    while (*p < end && shift < 64) {
        b = *(*p)++;
        v |= (int64_t)(b & 0x7f) << shift;
        shift += 7;
        if (!(b & 0x80))
            break;
    }
    if (shift < 64 && (b & 0x40))
        v |= -((int64_t)1 << shift);
    return v;
}

// A pointer in .eh_frame's encoding (DW_EH_PE_*). Returns -1 for encodings not met in practice.
static int read_encoded(const uint8_t** p, const uint8_t* end, uint8_t enc,
                        const struct dwarf_eh_bases* bases, uint64_t* out) {
    if (enc == 0xff) // omit
        return -1;
    const uint8_t* at = *p;
    uint64_t v;
    switch (enc & 0x0f) {
    case 0x00: memcpy(&v, at, 8); *p += 8; break;
    case 0x01: v = uleb(p, end); break;
    case 0x02: { uint16_t x; memcpy(&x, at, 2); v = x; *p += 2; break; }
    case 0x03: { uint32_t x; memcpy(&x, at, 4); v = x; *p += 4; break; }
    case 0x04: memcpy(&v, at, 8); *p += 8; break;
    case 0x09: v = (uint64_t)sleb(p, end); break;
    case 0x0a: { int16_t x; memcpy(&x, at, 2); v = (uint64_t)(int64_t)x; *p += 2; break; }
    case 0x0b: { int32_t x; memcpy(&x, at, 4); v = (uint64_t)(int64_t)x; *p += 4; break; }
    case 0x0c: memcpy(&v, at, 8); *p += 8; break;
    default: return -1;
    }
    switch (enc & 0x70) {
    case 0x00: break;
    case 0x10: v += (uint64_t)(uintptr_t)at; break;
    case 0x20: v += (uint64_t)(uintptr_t)bases->tbase; break;
    case 0x30: v += (uint64_t)(uintptr_t)bases->dbase; break;
    default: return -1;
    }
    if (enc & 0x80)
        v = *(const uint64_t*)(uintptr_t)v;
    *out = v;
    return 0;
}

#define HL_CFA_STACK 8 // remember_state levels followed

typedef struct row_s {
    int cfa_kind, rbp_kind;
    int64_t cfa_off, rbp_off, ra_off;
    int ra_known, is_end, is_hard;
} row_t;

// Runs CFA instructions [p, end) while the location stays <= target; returns the first
// instruction not run.
static const uint8_t* run_cfa(const uint8_t* p, const uint8_t* end, uint64_t* loc,
                              uint64_t target, uint64_t code_align, int64_t data_align,
                              const struct dwarf_eh_bases* bases, row_t* row,
                              const row_t* initial, row_t* stack, int* depth) {
    while (p < end && *loc <= target && !row->is_hard) {
        uint8_t op = *p++;
        uint8_t hi = op & 0xc0, lo = op & 0x3f;
        if (hi == 0x40) {
            *loc += lo * code_align;
            continue;
        }
        if (hi == 0x80) {
            int64_t off = (int64_t)uleb(&p, end) * data_align;
            if (lo == 6) { row->rbp_kind = RBP_AT_CFA; row->rbp_off = off; }
            if (lo == 16) { row->ra_off = off; row->ra_known = 1; }
            continue;
        }
        if (hi == 0xc0) {
            if (lo == 6) { row->rbp_kind = initial->rbp_kind; row->rbp_off = initial->rbp_off; }
            if (lo == 16) { row->ra_off = initial->ra_off; row->ra_known = initial->ra_known; }
            continue;
        }
        uint64_t reg, u;
        int64_t s;
        switch (op) {
        case 0x00: break;                                               // nop
        case 0x01: if (read_encoded(&p, end, 0x00, bases, loc)) row->is_hard = 1; break;
        case 0x02: *loc += *p++ * code_align; break;                    // advance_loc1
        case 0x03: { uint16_t d; memcpy(&d, p, 2); p += 2; *loc += d * code_align; break; }
        case 0x04: { uint32_t d; memcpy(&d, p, 4); p += 4; *loc += d * code_align; break; }
        case 0x05:                                                      // offset_extended
        case 0x11:                                                      // offset_extended_sf
            reg = uleb(&p, end);
            s = op == 0x05 ? (int64_t)uleb(&p, end) * data_align : sleb(&p, end) * data_align;
            if (reg == 6) { row->rbp_kind = RBP_AT_CFA; row->rbp_off = s; }
            if (reg == 16) { row->ra_off = s; row->ra_known = 1; }
            break;
        case 0x06: case 0x08:                                           // restore_ext, same_value
            reg = uleb(&p, end);
            if (reg == 6) { row->rbp_kind = op == 0x08 ? RBP_SAME : initial->rbp_kind; row->rbp_off = initial->rbp_off; }
            break;
        case 0x07:                                                      // undefined
            reg = uleb(&p, end);
            if (reg == 16) row->is_end = 1;
            break;
        case 0x09:                                                      // register
            reg = uleb(&p, end);
            uleb(&p, end);
            if (reg == 6 || reg == 16) row->is_hard = 1;
            break;
        case 0x0a:                                                      // remember_state
            if (*depth >= HL_CFA_STACK) { row->is_hard = 1; break; }
            stack[(*depth)++] = *row;
            break;
        case 0x0b:                                                      // restore_state
            if (*depth <= 0) { row->is_hard = 1; break; }
            *row = stack[--(*depth)];
            break;
        case 0x0c: case 0x12:                                           // def_cfa, def_cfa_sf
            reg = uleb(&p, end);
            s = op == 0x0c ? (int64_t)uleb(&p, end) : sleb(&p, end) * data_align;
            row->cfa_off = s;
            if (reg == 7) row->cfa_kind = CFA_RSP;
            else if (reg == 6) row->cfa_kind = CFA_RBP;
            else row->is_hard = 1;
            break;
        case 0x0d:                                                      // def_cfa_register
            reg = uleb(&p, end);
            if (row->cfa_kind == CFA_DEREF_RBP) row->is_hard = 1;
            if (reg == 7) row->cfa_kind = CFA_RSP;
            else if (reg == 6) row->cfa_kind = CFA_RBP;
            else row->is_hard = 1;
            break;
        case 0x0e: row->cfa_off = (int64_t)uleb(&p, end); break;        // def_cfa_offset
        case 0x13: row->cfa_off = sleb(&p, end) * data_align; break;    // def_cfa_offset_sf
        case 0x0f: {                                                    // def_cfa_expression
            u = uleb(&p, end);
            const uint8_t* e = p + u;
            // gcc's realigned frames: DW_OP_breg6 k; DW_OP_deref
            if (u >= 3 && p[0] == 0x76) {
                const uint8_t* q = p + 1;
                int64_t k = sleb(&q, e);
                if (q + 1 == e && *q == 0x06) {
                    row->cfa_kind = CFA_DEREF_RBP;
                    row->cfa_off = k;
                    p = e;
                    break;
                }
            }
            row->is_hard = 1;
            p = e;
            break;
        }
        case 0x10: case 0x16: {                                         // expression, val_expression
            reg = uleb(&p, end);
            u = uleb(&p, end);
            const uint8_t* e = p + u;
            if (reg == 6 && op == 0x10 && u >= 2 && p[0] == 0x76) {
                const uint8_t* q = p + 1;
                int64_t k = sleb(&q, e);
                if (q == e) {
                    row->rbp_kind = RBP_AT_RBP;
                    row->rbp_off = k;
                    p = e;
                    break;
                }
            }
            if (reg == 6 || reg == 16) row->is_hard = 1;
            p = e;
            break;
        }
        case 0x14: case 0x15:                                           // val_offset(_sf)
            reg = uleb(&p, end);
            if (op == 0x14) uleb(&p, end); else sleb(&p, end);
            if (reg == 6 || reg == 16) row->is_hard = 1;
            break;
        case 0x2e: uleb(&p, end); break;                                // GNU_args_size
        case 0x2f:                                                      // GNU_neg_offset_ext
            reg = uleb(&p, end);
            s = -(int64_t)uleb(&p, end) * data_align;
            if (reg == 6) { row->rbp_kind = RBP_AT_CFA; row->rbp_off = s; }
            if (reg == 16) { row->ra_off = s; row->ra_known = 1; }
            break;
        default: row->is_hard = 1; break;
        }
    }
    return p;
}

// Where the instructions of an FDE were run to last: the rule for a later address in the same
// function goes on from there instead of from the function's start. A large function's FDE
// holds thousands of instructions (cc1 -O2 of a one-line file worked out 3,900 rules by 830,000
// of them, 2 ms: its start-up functions are long, and a run through them meets their call sites
// in address order). A few functions at a time: a walk works out rules for the frames of
// several, one after the other.
#define HL_FDE_RESUME 4
typedef struct fde_resume_s {
    const uint8_t* fde; // NULL: nothing kept
    const uint8_t* p;   // the first instruction not run
    uint64_t loc;       // the location it applies from
    uint64_t target;    // the last address run to
    row_t row, initial;
    row_t stack[HL_CFA_STACK];
    int depth;
} fde_resume_t;

typedef struct fde_resumes_s {
    fde_resume_t at[HL_FDE_RESUME];
    unsigned next; // the one replaced next
} fde_resumes_t;

// The rule for the frame whose return address (or, for a signal frame, ip) is `ip`; resumes
// (NULL: none) keeps where FDEs were run to.
static rule_t compute_rule(uintptr_t ip, fde_resumes_t* resumes) {
    rule_t bad = {.mode = RULE_MODE(RULE_HARD, 0, 0)};
    struct dwarf_eh_bases bases;
    const uint8_t* fde = _Unwind_Find_FDE((void*)(ip - 1), &bases);
    if (!fde)
        return (rule_t){.mode = RULE_MODE(RULE_END, 0, 0)};
    uint32_t flen, cie_ptr;
    memcpy(&flen, fde, 4);
    if (flen == 0xffffffffu)
        return bad;
    const uint8_t* fend = fde + 4 + flen;
    memcpy(&cie_ptr, fde + 4, 4);
    const uint8_t* cie = fde + 4 - cie_ptr;
    uint32_t clen;
    memcpy(&clen, cie, 4);
    const uint8_t* cend = cie + 4 + clen;
    const uint8_t* p = cie + 8;
    uint8_t version = *p++;
    const char* aug = (const char*)p;
    p += strlen(aug) + 1;
    if (aug[0] == 'e' && aug[1] == 'h')
        p += 8;
    uint64_t code_align = uleb(&p, cend);
    int64_t data_align = sleb(&p, cend);
    uint64_t ra_reg = version == 1 ? *p++ : uleb(&p, cend);
    if (ra_reg != 16)
        return bad;
    uint8_t fde_enc = 0x00;
    const uint8_t* cie_instr = p;
    if (aug[0] == 'z') {
        uint64_t alen = uleb(&p, cend);
        cie_instr = p + alen;
        for (const char* a = aug + 1; *a; a++) {
            if (*a == 'R') {
                fde_enc = *p++;
            } else if (*a == 'L') {
                p++;
            } else if (*a == 'P') {
                uint8_t enc = *p++;
                uint64_t dummy;
                if (read_encoded(&p, cend, enc & 0x7f, &bases, &dummy))
                    return bad;
            } else if (*a == 'S') {
                return bad; // a signal frame: the general unwinder knows its layout
            } else if (*a != 'B') {
                return bad;
            }
        }
    }
    const uint8_t* q = fde + 8;
    uint64_t pc_begin, pc_range;
    if (read_encoded(&q, fend, fde_enc, &bases, &pc_begin) ||
        read_encoded(&q, fend, fde_enc & 0x0f, &bases, &pc_range))
        return bad;
    if (aug[0] == 'z') {
        uint64_t alen = uleb(&q, fend);
        q += alen;
    }
    uint64_t target = ip - 1;
    fde_resume_t* r = NULL;
    for (int k = 0; resumes && k < HL_FDE_RESUME; k++)
        if (resumes->at[k].fde == fde && resumes->at[k].target <= target)
            r = &resumes->at[k];
    fde_resume_t fresh;
    if (!r) {
        r = resumes ? &resumes->at[resumes->next++ % HL_FDE_RESUME] : &fresh;
        r->row = (row_t){.cfa_kind = CFA_RSP, .rbp_kind = RBP_SAME};
        r->depth = 0;
        r->loc = pc_begin;
        run_cfa(cie_instr, cend, &r->loc, UINT64_MAX, code_align, data_align, &bases, &r->row,
                &r->row, r->stack, &r->depth);
        r->initial = r->row;
        r->loc = pc_begin;
        r->p = q;
        r->fde = fde;
    }
    r->target = target;
    r->p = run_cfa(r->p, fend, &r->loc, target, code_align, data_align, &bases, &r->row,
                   &r->initial, r->stack, &r->depth);
    row_t row = r->row;
    if (row.is_hard || !row.ra_known || row.cfa_off > INT32_MAX || row.cfa_off < INT32_MIN ||
        row.ra_off < -128 || row.ra_off > 127 || row.rbp_off < INT16_MIN || row.rbp_off > INT16_MAX)
        return row.is_end ? (rule_t){.mode = RULE_MODE(RULE_END, 0, 0)} : bad;
    if (row.is_end)
        return (rule_t){.mode = RULE_MODE(RULE_END, 0, 0)};
    return (rule_t){.cfa_off = (int32_t)row.cfa_off, .rbp_off = (int16_t)row.rbp_off,
                    .ra_off = (int8_t)row.ra_off,
                    .mode = RULE_MODE(RULE_VALID, row.rbp_kind, row.cfa_kind)};
}

// The last stack this thread took, with where each return address was read. Consecutive
// allocations from one place (a loop) share their whole stack: if the stack pointer and every
// saved return address are still the same, so is the backtrace, and no rule is consulted.
// The arrays hold one entry per frame up to the state's depth (state_make): a thread's walks
// take memory for the depth asked, not for HL_MAX_DEPTH frames each (26 KiB a walk, 1.9 MiB a
// thread, most of it made present by walks of a few frames: each of their arrays, 2 KiB for
// the most of them and two or more to a page, had its first entries written).
typedef struct walk_check_s {
    uintptr_t addr, val;
    int frame;
} walk_check_t;

typedef struct last_stack_s {
    int n;
    int is_complete;               // the walk reached the outermost frame (not the depth limit)
    int reused_at, reused_from;    // frames [reused_at, n) were copied from last's [reused_from..]
                                   // (reused_from -1: nothing was copied)
    int is_resumed;                // frames copied from a walk cut short, then walked on
    uint32_t id;
    // A frame whose CFA comes from %rbp (alloca, a variable-length array, code built with frame
    // pointers) is only the same frame again if %rbp is, and so are the words %rbp and the CFA
    // were read from: one stack pointer and return address can come with two frame sizes.
    // Only the %rbp values some CFA depends on count: a frame that saves %rbp as an ordinary
    // register (libstdc++ built without frame pointers) holds data there, which changes.
    int rbp_last; // the outermost frame with anything below to check (-1: none)
    int nchecks;  // entries of checks
    uintptr_t* ips;
    uintptr_t* slots;  // slots[k]: the address ips[k + 1] was read from
    uintptr_t* sps;    // sps[k]: the stack pointer in frame k
    uint32_t* nodes;   // nodes[k]: the interned stack of frames k..n-1
    uintptr_t* rbps;   // rbps[k]: %rbp in frame k
    uint8_t* needs;    // needs[k]: a CFA depends on rbps[k]
    uint8_t* kinds;    // kinds[k]: how frame k used %rbp (FRAME_*), while walked
    // rreads and creads hold something only for the frames a walk walked itself (checks has
    // what counts of them); for frames copied from an earlier walk they are left as they were.
    uintptr_t* rreads; // rreads[k]: where frame k read rbps[k + 1], when a later CFA needs it
                       // (0: no such read)
    uintptr_t* creads; // creads[k]: where sps[k + 1] (the CFA) was read (0: not)
    // The words read that count (the rreads and creads above), in frame order: what a reuse
    // checks, without a look at the frames that read none. Two a frame at most.
    walk_check_t* checks;
} last_stack_t;

enum { FRAME_CFA_RBP = 1, FRAME_RBP_SAME = 2, FRAME_RBP_AT_RBP = 4, FRAME_READ_RBP = 8,
       FRAME_READ_CFA = 16 };

// Per kind of capture (allocations, releases: loops alternate them) the last 32 walks, found
// again by where they start: a program allocating from a handful of places in turn (a parser,
// a query engine) finds each place's stack among them without walking it again (sqlite3
// inserting rows cycles through more than 8 such places: 32 made it 10% faster than 8).
#define HL_RECENT 32
#define HL_RECENT_INDEX 256
// Walks found by the same (ip, sp) of frame 0, the one found or made last first: programs that
// allocate through one wrapper (sqlite3's sqlite3MemMalloc) reach it from many places at the
// same depth, and with one walk a key sqlite3 walked again 28% of its allocations and 29% of its
// releases (5% and 2% with four).
#define HL_RECENT_WAYS 4
#define HL_WAYS_REWARD 32  // a find past the first way: worth that many looks in vain
#define HL_WAYS_RETRY 256  // captures between looks past the first way while they do not pay

typedef struct walk_key_s {
    uintptr_t sp, ip;     // frame 0
    uintptr_t slot;       // where its caller's return address was read (0: no caller)
    uintptr_t caller;     // what was read there
} walk_key_t;

typedef struct recent_s {
    last_stack_t walks[HL_RECENT];
    uint8_t index[HL_RECENT_INDEX][HL_RECENT_WAYS]; // hash of (ip, sp) of frame 0 -> walk + 1
    // Each walk's frame 0 and its first saved return address (where, and what it held), side by
    // side: a way is passed over without a look into its walk (7 KiB apart, each a cache miss)
    // unless these still hold. slot 0: the walk has one frame (nothing to look at).
    walk_key_t key[HL_RECENT];
    // Whether ways past the first pay: raised by a find there, lowered by a capture that looked
    // there in vain. A recursion meets the same frame 0 with other callers each time, and there
    // only the first way is looked at (and all of them every HL_WAYS_RETRY-th capture).
    uint8_t ways_score;
    int latest; // the walk taken last
    unsigned generation; // recent_generation when these were walked
    unsigned latest_seq; // the thread's capture count when latest was taken or found
} recent_t;

// What a thread remembers between captures holds until this moves. A new trace may unwind to
// another depth (a `depth` command): the walks before it are not reused after it. Code was
// unloaded: a rule cached for one of its addresses would be applied to whatever code is loaded
// there next. At its next capture each thread forgets its walks and gives back its rules' pages
// (they read as empty again): one generation for both, one load on the capture's path.
static _Atomic unsigned recent_generation;

void unwind_forget_recent(void) {
    atomic_fetch_add(&recent_generation, 1);
}

// The loader counts the objects it has removed (dl_iterate_phdr's dlpi_subs): only a change of
// that count is an unloading (a dlclose of an object still in use, or one never unloaded, is
// not).
static _Atomic unsigned long long subs_seen;

static int loader_subs(struct dl_phdr_info* info, size_t size, void* arg) {
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs)
        *(unsigned long long*)arg = info->dlpi_subs;
    return 1; // the first object tells
}

void unwind_code_unloaded(void) {
    unsigned long long subs = 0;
    dl_iterate_phdr(loader_subs, &subs);
    // The generation moves before the count is published: a thread that sees the new count
    // (and so moves nothing itself) already sees the new generation.
    if (atomic_load(&subs_seen) != subs) {
        unwind_forget_recent();
        atomic_store(&subs_seen, subs);
    }
}

typedef struct unwind_state_s {
    cache_entry_t first_rules[HL_RULE_CACHE_FIRST]; // the rules' first table (page-aligned)
    fde_resumes_t resumes; // what the rules were worked out from (forgotten with them)
    recent_t recent[2];
    last_stack_t* check;   // unwind_check's walk anew (made at its first use)
    // Beside what every capture reads (seq, generation): one cache line for all of them.
    // The rules' table (first_rules, or one rule_grow made: page-aligned) | its sets less one,
    // one word: a state shared with a clone(CLONE_VM) child never pairs a table with another's
    // size, which would index past its end.
    uintptr_t rule_table;
    uint32_t rule_misses; // rules worked out since the table was made
    unsigned seq;        // captures so far, of either kind
    unsigned generation; // recent_generation when the rules were worked out
    int depth;           // frames each walk has room for
    int is_populated;    // past HL_STATE_POPULATE_AT: made present, or left to fault in
    // Made present then (single-threaded): its walks follow a group at a time as they are
    // taken (walks_make_present), a larger rule table when it is made (rule_grow).
    uint8_t is_made_present;
    uint8_t walk_groups[2]; // by kind: a bit per group of walks made present
    unsigned populate_from; // seq when this process began counting towards that (a fork child)
} unwind_state_t;

#define RULE_TABLE_ALIGN ((uintptr_t)4096) // page-aligned: the low bits hold the sets less one
_Static_assert(HL_RULE_CACHE / HL_RULE_WAYS <= RULE_TABLE_ALIGN, "the sets' mask fits the tag");
static inline uintptr_t rule_table_of(cache_entry_t* table, uint32_t sets) {
    return (uintptr_t)table | (sets - 1);
}
static inline cache_entry_t* rule_table_at(uintptr_t t) {
    return (cache_entry_t*)(t & ~(RULE_TABLE_ALIGN - 1));
}
static inline uint32_t rule_table_mask(uintptr_t t) {
    return (uint32_t)(t & (RULE_TABLE_ALIGN - 1));
}
static inline uint32_t rule_table_sets(uintptr_t t) {
    return rule_table_mask(t) + 1;
}
static inline size_t rule_table_bytes(uintptr_t t) {
    return (size_t)rule_table_sets(t) * HL_RULE_WAYS * sizeof(cache_entry_t);
}

// The thread of a single-threaded process that has walked this many stacks goes on to touch
// nearly all of its state (rules land on pages at random, new walks take the slots in turn):
// the rest is made present in one call then, instead of a fault a page (about 160 in every
// short compiler process, a third of what tracing adds to its page faults, 0.1-0.2 ms), for up
// to 0.25 MiB more of a small program's memory (the rules' first table with the walks; a larger
// table is made present when it is made). The threads of a threaded program keep only the pages
// they touch: 32 threads allocating a thousand times each were a third slower with theirs made
// present, and took 3 MiB more.
#define HL_STATE_POPULATE_AT 8

// One walk's arrays, for `depth` frames (walk_lay_out's order), to a cache line.
static size_t walk_bytes(int depth) {
    size_t d = (size_t)depth;
    size_t bytes = d * (6 * sizeof(uintptr_t) + sizeof(uint32_t) + 2) + 2 * d * sizeof(walk_check_t);
    return (bytes + 63) & ~(size_t)63;
}

// One walk's arrays, one after the other: at depth 64 they take 6.5 KiB, of which a walk of a
// few frames writes the first lines of each.
static void walk_lay_out(last_stack_t* w, char* at, int depth) {
    size_t d = (size_t)depth;
    w->ips = (uintptr_t*)at;
    w->slots = w->ips + d;
    w->sps = w->slots + d;
    w->rbps = w->sps + d;
    w->rreads = w->rbps + d;
    w->creads = w->rreads + d;
    w->checks = (walk_check_t*)(w->creads + d);
    w->nodes = (uint32_t*)(w->checks + 2 * d);
    w->needs = (uint8_t*)(w->nodes + d);
    w->kinds = w->needs + d;
}

// A state's mapping, its walks included.
static size_t state_bytes(int depth) {
    return sizeof(unwind_state_t) + 2 * HL_RECENT * walk_bytes(depth);
}

// An empty state's fields, over zeroed memory of state_bytes(depth). Its depth tells a state
// laid out (non-zero) from a fork child's zeroed copy.
static void state_lay_out(unwind_state_t* st, int depth) {
    size_t each = walk_bytes(depth);
    st->rule_table = rule_table_of(st->first_rules, HL_RULE_CACHE_FIRST / HL_RULE_WAYS);
    unsigned generation = atomic_load_explicit(&recent_generation, memory_order_relaxed);
    st->generation = generation; // nothing to forget yet
    char* at = (char*)(st + 1);
    for (int kind = 0; kind < 2; kind++) {
        st->recent[kind].generation = generation;
        for (int k = 0; k < HL_RECENT; k++, at += each)
            walk_lay_out(&st->recent[kind].walks[k], at, depth);
    }
    st->depth = depth;
}

// A state whose walks have room for `depth` frames; NULL when there is no memory for it. A fork
// child does not inherit it (os_wipe_on_fork): it reads as zeros there, depth 0 among them, and
// is laid out again at the child's first capture (state_remake). The parent's pages stay
// writable through the fork, and the child walks its own few stacks anew.
static unwind_state_t* state_make(int depth) {
    unwind_state_t* st = os_map(state_bytes(depth));
    if (!st)
        return NULL;
    os_wipe_on_fork(st, state_bytes(depth));
    state_lay_out(st, depth);
    return st;
}

// Way w moves to the front, the ones before it one down.
static inline void recent_to_front(uint8_t* ways, int w) {
    uint8_t k = ways[w];
    for (; w > 0; w--)
        ways[w] = ways[w - 1];
    ways[0] = k;
}

// Walk k (slot + 1) to the front of its key's ways: from where it was, when it was there (its
// slot held an earlier walk of the same key), else from the last way, which drops out.
static inline void recent_note(uint8_t* ways, uint8_t k) {
    int w = HL_RECENT_WAYS - 1;
    for (int v = 0; v < HL_RECENT_WAYS - 1; v++)
        if (ways[v] == k) {
            w = v;
            break;
        }
    ways[w] = k;
    recent_to_front(ways, w);
}

static inline uint64_t frame_hash(uintptr_t ip, uintptr_t sp) {
    return (uint64_t)(ip ^ (sp << 7)) * 0x9E3779B97F4A7C15ull;
}
static inline uint32_t recent_slot(uintptr_t ip, uintptr_t sp) {
    return (uint32_t)(frame_hash(ip, sp) >> 56); // HL_RECENT_INDEX = 256
}

// What unwind_check (check_walk, below) walked again, of it what went on past a cut walk, and
// what differed; and the walks past a cut one that met a frame needing %rbp (walked again whole).
static _Atomic unsigned long checks_made, checks_resumed, checks_differed, walks_again;

// A fork child counts its own captures towards HL_STATE_POPULATE_AT, not its parent's: a parent
// whose captures were all found again (a loop) never walked after its first ones and left its
// state to the child, which made all of it present at its first walk, then ran a command (a
// shell's child: 0.1 ms of page clearing for a malloc and three frees before its exec).
void unwind_after_fork(hl_thread_t* t) {
    // unwind_check counts the child's own walks.
    atomic_store(&checks_made, 0);
    atomic_store(&checks_resumed, 0);
    atomic_store(&checks_differed, 0);
    atomic_store(&walks_again, 0);
    unwind_state_t* st = t->unwind_cache;
    if (st && st->depth && !st->is_populated) // depth 0: wiped by the fork, counting from 0
        st->populate_from = st->seq;
}

// Once, at the first walk after HL_STATE_POPULATE_AT captures: the state made present if the
// process runs single-threaded then, else left to fault in for good. Its walks' arrays are made
// present a group at a time as the walks come to them (walks_make_present): a short program
// takes a few of the 64 slots (sleep: 120 KB less made present at depth 32).
static HL_NOINLINE HL_COLD void state_populate(unwind_state_t* st) {
    st->is_populated = 1;
    if (__libc_single_threaded) {
        st->is_made_present = 1;
        os_populate(st, sizeof *st); // the rules' first table and the walks' records
    }
}

// Walk slot `slot` of kind `which`, and the others of its group: their arrays made present.
#define HL_WALK_GROUP 8 // walks: 26 KiB at depth 32, 52 KiB at 64
_Static_assert(HL_RECENT / HL_WALK_GROUP <= 8, "a bit per group in a byte");
static HL_NOINLINE HL_COLD void walks_make_present(unwind_state_t* st, int which, int slot) {
    int group = slot / HL_WALK_GROUP;
    st->walk_groups[which] |= (uint8_t)(1u << group);
    if (__libc_single_threaded) // the group's walks lie one after the other
        os_populate(st->recent[which].walks[group * HL_WALK_GROUP].ips,
                    HL_WALK_GROUP * walk_bytes(st->depth));
}

// The first state is made for the depth in force; one asked for more frames later (a `depth`
// command) is made again for the deepest walk, once, and starts empty (its walks and rules are
// worked out again). The old one stays mapped: a thread state may be shared (clone(CLONE_VM)
// children past the agent's 64 count as their parent), and the other thread may be walking in it.
static HL_NOINLINE HL_COLD unwind_state_t* state_remake(hl_thread_t* t, int depth) {
    unwind_state_t* st = t->unwind_cache;
    if (st && st->depth == 0 && t->unwind_depth >= depth) { // wiped by a fork (state_make)
        state_lay_out(st, t->unwind_depth);
        return st;
    }
    st = state_make(st ? HL_MAX_DEPTH : depth);
    if (st) {
        t->unwind_cache = st;
        t->unwind_depth = st->depth;
    }
    return st;
}

// This thread's state, with room for walks of `depth` frames (NULL: no memory for it).
static inline unwind_state_t* thread_state(hl_thread_t* t, int depth) {
    unwind_state_t* st = t->unwind_cache;
    if (hl_likely(st != NULL && st->depth >= depth))
        return st;
    return state_remake(t, depth);
}

// Walks out of the agent's own frames (built with frame pointers): the first frame of the
// program, as (ip, sp, rbp).
static inline int leave_agent(uintptr_t* ip_out, uintptr_t* sp_out, uintptr_t* rbp_out) {
    uintptr_t* fp = __builtin_frame_address(0);
    uintptr_t ip = (uintptr_t)__builtin_return_address(0);
    uintptr_t sp = (uintptr_t)(fp + 2);
    uintptr_t rbp = fp[0];
    for (int guard = 0; modules_own_text(ip) && guard < 32; guard++) {
        fp = (uintptr_t*)rbp;
        if (!fp)
            return -1;
        ip = fp[1];
        sp = (uintptr_t)(fp + 2);
        rbp = fp[0];
    }
    *ip_out = ip;
    *sp_out = sp;
    *rbp_out = rbp;
    return 0;
}

// Each saved return address from frame j on still holds the value the walk read there.
static inline int tail_slots_still_valid(const last_stack_t* last, int j) {
    const uintptr_t* slots = last->slots;
    const uintptr_t* callers = last->ips + 1;
    int end = last->n - 1, k = j;
    uintptr_t diff = 0;
    // Branch-free, two at a time: almost every call finds them all equal.
    for (; k + 1 < end; k += 2)
        diff |= (*(const uintptr_t*)slots[k] ^ callers[k]) |
                (*(const uintptr_t*)slots[k + 1] ^ callers[k + 1]);
    if (k < end)
        diff |= *(const uintptr_t*)slots[k] ^ callers[k];
    return diff == 0;
}

// The same for a walk with something read for %rbp's sake at or above j: %rbp in frame j must
// be rbp still if a CFA depends on it, and every word read that a CFA depends on must hold what
// was read (a frame built with a frame pointer reads its caller's %rbp beside its return
// address: one line).
static inline int tail_rbp_still_valid(const last_stack_t* last, int j, uintptr_t rbp) {
    if (last->needs[j] && last->rbps[j] != rbp)
        return 0;
    uintptr_t diff = 0;
    for (int i = last->nchecks - 1; i >= 0 && last->checks[i].frame >= j; i--)
        diff |= *(const uintptr_t*)last->checks[i].addr ^ last->checks[i].val;
    return diff == 0 && tail_slots_still_valid(last, j);
}

// Do the outer frames of `last` still stand from frame j on, %rbp there being rbp?
static inline int tail_still_valid(const last_stack_t* last, int j, uintptr_t rbp) {
    if (hl_likely(last->rbp_last < j))
        return tail_slots_still_valid(last, j);
    return tail_rbp_still_valid(last, j, rbp);
}

// tail_still_valid for a walk that more likely fails it (a second way of a key: same place, same
// depth, often other callers): from the innermost, out at the first frame that changed.
static inline int tail_still_same(const last_stack_t* last, uintptr_t rbp) {
    if (hl_unlikely(last->rbp_last >= 0))
        return tail_rbp_still_valid(last, 0, rbp);
    for (int k = 0; k < last->n - 1; k++)
        if (*(const uintptr_t*)last->slots[k] != last->ips[k + 1])
            return 0;
    return 1;
}

// The checks of tail's frames from j on, after the c checks w has, moved to w's frames from
// `walked` on, up to its outermost frame (`frames` - 1) if the walk was cut there; the count.
static int tail_checks(last_stack_t* w, int c, int walked, int frames, const last_stack_t* tail,
                       int j) {
    int i = tail->nchecks;
    while (i > 0 && tail->checks[i - 1].frame >= j)
        i--;
    for (; i < tail->nchecks; i++) {
        int k = tail->checks[i].frame - j + walked;
        if (k >= frames - 1) // the outermost frame here (the walk was cut): nothing above
            break;
        w->checks[c] = tail->checks[i];
        w->checks[c++].frame = k;
    }
    return c;
}

// After a walk: which %rbp values its CFAs depend on, from the outermost frame in. Frames
// [0, walked) were walked; the ones above came from frames [j, ...) of the walk `tail` with their
// own flags, the first of them needing %rbp when need_above, the outermost check among them at
// rbp_last. The walked frames' checks are made from what they read; the copied frames' are
// tail's own, moved to their new place (their words and values are the same), so a capture
// that reuses the outer frames of a stack with a frame pointer near its root costs the frames
// it walked, not the whole depth.
static void settle_rbp(last_stack_t* w, int walked, int frames, int need_above, int rbp_last,
                       const last_stack_t* tail, int j) {
    int need_next = need_above;
    for (int k = walked - 1; k >= 0; k--) {
        uint8_t kind = w->kinds[k];
        int reads = (kind & FRAME_READ_RBP) && need_next;
        if (!reads) // frame k read no %rbp, or none that feeds a CFA
            w->rreads[k] = 0;
        if (!(kind & FRAME_READ_CFA))
            w->creads[k] = 0;
        int need = (kind & FRAME_CFA_RBP) ||
                   ((kind & (FRAME_RBP_SAME | FRAME_RBP_AT_RBP)) && need_next);
        w->needs[k] = (uint8_t)need;
        if (rbp_last < 0 && (need || reads || (kind & FRAME_READ_CFA)))
            rbp_last = k;
        need_next = need;
    }
    w->rbp_last = rbp_last;
    int c = 0;
    int own = tail ? walked : frames - 1;
    for (int k = 0; k <= rbp_last && k < own; k++) {
        // (The outermost frame with a check reads nothing that counts: rbps[k + 1] is there.)
        if (w->rreads[k]) {
            w->checks[c].addr = w->rreads[k];
            w->checks[c].val = w->rbps[k + 1];
            w->checks[c++].frame = k;
        }
        if (w->creads[k]) {
            w->checks[c].addr = w->creads[k];
            w->checks[c].val = w->sps[k + 1];
            w->checks[c++].frame = k;
        }
    }
    w->nchecks = tail ? tail_checks(w, c, walked, frames, tail, j) : c;
}

// settle_rbp for a walk whose walked frames depend on no %rbp, nor does the first frame copied
// from tail: none of them has anything to check, and the copied frames keep theirs (a stack with
// a frame pointer near its root, as most of gcc's: its every walk copies such frames).
static void settle_rbp_copied(last_stack_t* w, int walked, int frames, int rbp_last,
                              const last_stack_t* tail, int j) {
    memset(w->needs, 0, (size_t)walked);
    w->rbp_last = rbp_last;
    w->nchecks = tail_checks(w, 0, walked, frames, tail, j);
}

// The largest table any thread's rules grew to (unwind_check's report says it).
static _Atomic unsigned rule_entries_max = HL_RULE_CACHE_FIRST;

static inline cache_entry_t* rule_set(cache_entry_t* rules, uint32_t set_mask, uintptr_t ip) {
    return &rules[(((ip >> 2) ^ (ip >> 13)) & set_mask) * HL_RULE_WAYS];
}

// The rules' table made HL_RULE_CACHE_GROWTH times larger, what it held moved in (each set's
// ways in their order, the one used last first). The old table is given back but stays mapped:
// a state may be shared by a clone(CLONE_VM) child walking in it, which then only misses there.
// Without the memory, the table stays as it is.
static HL_NOINLINE HL_COLD void rule_grow(unwind_state_t* st) {
    uintptr_t table = st->rule_table;
    uint32_t sets = rule_table_sets(table), more = sets * HL_RULE_CACHE_GROWTH;
    size_t bytes = (size_t)more * HL_RULE_WAYS * sizeof(cache_entry_t);
    // A process single-threaded, whose state was made present, would touch every page of the
    // new table too (rules land at random): made present in one call.
    cache_entry_t* fresh = st->is_made_present && __libc_single_threaded ? os_map_dense(bytes)
                                                                           : os_map(bytes);
    if (!fresh)
        return;
    os_wipe_on_fork(fresh, bytes); // as its state is: a fork child starts from first_rules
    cache_entry_t* old = rule_table_at(table);
    for (uint32_t k = 0; k < sets; k++)
        for (int w = HL_RULE_WAYS - 1; w >= 0; w--) { // the last used goes in last: first way
            cache_entry_t e = old[k * HL_RULE_WAYS + (uint32_t)w];
            if (!e.ip)
                continue;
            cache_entry_t* set = rule_set(fresh, more - 1, e.ip);
            memmove(&set[1], &set[0], (HL_RULE_WAYS - 1) * sizeof *set);
            set[0] = e;
        }
    st->rule_table = rule_table_of(fresh, more);
    st->rule_misses = 0;
    unsigned entries = more * HL_RULE_WAYS, was = atomic_load(&rule_entries_max);
    while (entries > was && !atomic_compare_exchange_weak(&rule_entries_max, &was, entries))
        ;
    if (old != st->first_rules)
        os_discard(old, rule_table_bytes(table));
}

static HL_NOINLINE HL_COLD rule_t rule_miss(unwind_state_t* st, cache_entry_t* set,
                                             uintptr_t ip) {
    rule_t r = compute_rule(ip, &st->resumes);
    memmove(&set[1], &set[0], (HL_RULE_WAYS - 1) * sizeof *set);
    set[0] = (cache_entry_t){ip, r};
    uint32_t entries = rule_table_sets(st->rule_table) * HL_RULE_WAYS;
    if (++st->rule_misses > entries / 2 && entries < HL_RULE_CACHE)
        rule_grow(st);
    return r;
}

static HL_NOINLINE rule_t rule_later_way(unwind_state_t* st, cache_entry_t* set, uintptr_t ip) {
    for (int w = 1; w < HL_RULE_WAYS; w++) {
        if (set[w].ip == ip) {
            cache_entry_t hit = set[w];
            memmove(&set[1], &set[0], (size_t)w * sizeof *set);
            set[0] = hit;
            return hit.rule;
        }
    }
    return rule_miss(st, set, ip);
}

// The rule for ip from its set (a set's ways share a cache line), or worked out into it.
static inline rule_t rule_of(unwind_state_t* st, uintptr_t ip) {
    uintptr_t table = st->rule_table;
    cache_entry_t* set = rule_set(rule_table_at(table), rule_table_mask(table), ip);
    if (hl_likely(set[0].ip == ip))
        return set[0].rule;
    return rule_later_way(st, set, ip);
}

// Frames [j, j + take) of `last` into a walk's arrays from the frame they go to: their
// addresses, slots and stack pointers.
HL_INLINE void copy_frames(uintptr_t* ips, uintptr_t* slots, uintptr_t* sps,
                           const last_stack_t* last, int j, int take) {
    memcpy(ips, &last->ips[j], (size_t)take * sizeof(uintptr_t));
    memcpy(slots, &last->slots[j], (size_t)take * sizeof(uintptr_t));
    memcpy(sps, &last->sps[j], (size_t)take * sizeof(uintptr_t));
}

// walk() met frame j of `last` at its frame n, last's frames from j on still stand, and `take`
// of them were copied: they end the walk, with their nodes and what they took from %rbp up to
// the last that counts. Returns the frame count.
static int end_with_tail(last_stack_t* out, int n, const last_stack_t* last, int j, int take,
                         int any_rbp) {
    int last_n = last->n;
    memcpy(&out->nodes[n], &last->nodes[j], (size_t)take * sizeof(uint32_t));
    int above = -1;
    if (hl_unlikely(last->rbp_last >= j)) {
        int upto = last->rbp_last < j + take ? last->rbp_last : j + take - 1;
        size_t m = (size_t)(upto - j + 1);
        memcpy(&out->rbps[n], &last->rbps[j], m * sizeof(uintptr_t));
        memcpy(&out->needs[n], &last->needs[j], m);
        above = n + (upto - j);
    }
    int need_above = above >= 0 && last->needs[j];
    if (hl_unlikely(any_rbp || need_above))
        settle_rbp(out, n, n + take, need_above, above, above >= 0 ? last : NULL, j);
    else if (hl_unlikely(above >= 0))
        settle_rbp_copied(out, n, n + take, above, last, j);
    out->is_complete = last->is_complete && take == last_n - j;
    out->reused_at = take == last_n - j ? n : -1; // the whole tail, or no use
    out->reused_from = j;
    return n + take;
}

#define HL_WALK_AGAIN (-2)
// CFI walk from (ip, sp, rbp) into out (ips, slots, sps). When a frame is one the previous walk
// `last` also passed (same stack pointer, same address) and the frames above it still stand,
// their rest is copied instead of walked: a recursion or a loop calling different functions
// from one place re-walks only what changed. When `last` was cut short of the depth this walk
// may reach (a release after a release, cut to HL_RELEASE_DEPTH frames, then a tail-called free
// one frame shallower: tree --recursive's every node), its frames are copied as far as they go
// and the walk goes on from its outermost one. Returns the frame count; -1 when a frame needs
// the general unwinder, HL_WALK_AGAIN when a frame past such a copy needs the %rbp the walk
// copied from did not keep (the caller walks again, reusing nothing).
// HL_INLINE: with check_walk (a test's) as its second caller, gcc would no longer inline it
// into capture(), whose walk needs every register.
HL_INLINE int walk(unwind_state_t* st, uintptr_t ip, uintptr_t sp, uintptr_t rbp,
                   last_stack_t* out, const last_stack_t* last, int max) {
    // Locals, so the stores into out's arrays do not make the compiler reload the fields of
    // last on every frame (the two could alias as far as it knows).
    uintptr_t* restrict out_ips = out->ips;
    uintptr_t* restrict out_sps = out->sps;
    uintptr_t* restrict out_slots = out->slots;
    const uintptr_t* last_sps = last ? last->sps : NULL;
    const uintptr_t* last_ips = last ? last->ips : NULL;
    const int last_n = last ? last->n : 0;
    uintptr_t sp0 = sp;
    int n = 0, j = 0;
    out->is_complete = 0;
    out->reused_at = -1;
    out->reused_from = -1;
    out->is_resumed = 0;
    out->rbp_last = -1;
    int any_rbp = 0;        // a walked frame's CFA came from %rbp
    int is_rbp_unknown = 0; // past frames copied from a walk cut short: not known until read
    while (n < max) {
        while (j < last_n && last_sps[j] < sp)
            j++;
        if (j < last_n && last_sps[j] == sp && last_ips[j] == ip) {
            if ((last->is_complete || n + (last_n - j) >= max) && tail_still_valid(last, j, rbp)) {
                int take = last_n - j < max - n ? last_n - j : max - n;
                copy_frames(&out_ips[n], &out_slots[n], &out_sps[n], last, j, take);
                return end_with_tail(out, n, last, j, take, any_rbp);
            }
            // `last` was cut short of this walk's depth (a release one frame shallower than the
            // last: a tail-called free): its frames stand as far as they go, and the walk goes
            // on from its outermost one, %rbp there unknown. Only where neither the frames
            // walked so far nor the copied ones depend on %rbp: the copied frames bring no %rbp
            // checks along (their kinds cleared, settle_rbp finds none there; their rbps are
            // stale).
            if (!last->is_complete && n + (last_n - j) < max && j < last_n - 1 && !any_rbp &&
                last->rbp_last < j && tail_slots_still_valid(last, j)) {
                int take = last_n - 1 - j;
                copy_frames(&out_ips[n], &out_slots[n], &out_sps[n], last, j, take);
                memset(&out->kinds[n], 0, (size_t)take);
                out->reused_from = j;
                out->is_resumed = 1;
                n += take;
                ip = last->ips[last_n - 1];
                sp = last->sps[last_n - 1];
                is_rbp_unknown = 1;
                j = last_n;
                continue;
            }
        }
        out_ips[n] = ip;
        out_sps[n] = sp;
        out->rbps[n] = rbp;
        out->kinds[n] = 0;
        n++;
        rule_t r;
        if (hl_likely(st != NULL)) {
            r = rule_of(st, ip);
        } else {
            r = compute_rule(ip, NULL);
        }
        uintptr_t cfa;
        if (hl_likely((r.mode & 0xf3) == RULE_MODE(RULE_VALID, 0, CFA_RSP))) {
            cfa = sp + r.cfa_off;
        } else if (RULE_FLAGS(r) != RULE_VALID) {
            if (RULE_FLAGS(r) & RULE_END) {
                out->is_complete = 1;
                break;
            }
            return -1;
        } else if (hl_unlikely(is_rbp_unknown)) {
            return HL_WALK_AGAIN;
        } else if (RULE_CFA(r) == CFA_RBP) {
            cfa = rbp + r.cfa_off;
            out->kinds[n - 1] = FRAME_CFA_RBP;
            any_rbp = 1;
        } else {
            out->creads[n - 1] = rbp + r.cfa_off;
            cfa = *(uintptr_t*)(rbp + r.cfa_off);
            out->kinds[n - 1] = FRAME_CFA_RBP | FRAME_READ_CFA;
            any_rbp = 1;
        }
        // The stack only grows one way; anything else means the rules do not fit this frame.
        if (hl_unlikely(cfa <= sp || cfa - sp0 > (64u << 20) || (cfa & 7)))
            return -1;
        uintptr_t slot = cfa + r.ra_off;
        uintptr_t next_ip = *(uintptr_t*)slot;
        out_slots[n - 1] = slot;
        if (RULE_RBP(r) == RBP_AT_CFA) {
            out->rreads[n - 1] = cfa + r.rbp_off;
            out->kinds[n - 1] |= FRAME_READ_RBP;
            rbp = *(uintptr_t*)(cfa + r.rbp_off);
            is_rbp_unknown = 0;
        } else if (RULE_RBP(r) == RBP_AT_RBP) {
            if (hl_unlikely(is_rbp_unknown))
                return HL_WALK_AGAIN;
            out->rreads[n - 1] = rbp + r.rbp_off;
            out->kinds[n - 1] |= FRAME_RBP_AT_RBP | FRAME_READ_RBP;
            rbp = *(uintptr_t*)(rbp + r.rbp_off);
        } else {
            out->kinds[n - 1] |= FRAME_RBP_SAME;
        }
        sp = cfa;
        ip = next_ip;
        if (hl_unlikely(ip < 4096)) {
            out->is_complete = 1;
            break;
        }
    }
    if (hl_unlikely(any_rbp))
        settle_rbp(out, n, n, 0, -1, NULL, 0);
    return n;
}

// unwind_check (a test's setting): each stack the unwinder took from earlier walks, found whole
// among the recent ones or with frames copied, is walked again reusing nothing, into a walk of
// its own; a difference in its frames is said on stderr. Walks that need the general unwinder
// are not compared.

static HL_NOINLINE HL_COLD void check_walk(unwind_state_t* st, const last_stack_t* got,
                                           uintptr_t ip, uintptr_t sp, uintptr_t rbp) {
    if (!st->check) {
        char* at = os_map(walk_bytes(st->depth) + sizeof(last_stack_t));
        if (!at)
            return;
        st->check = (last_stack_t*)at;
        walk_lay_out(st->check, at + sizeof(last_stack_t), st->depth);
    }
    last_stack_t* anew = st->check;
    // A walk cut at its depth, to the same depth; one that ended, as far as it may go (a stack
    // wrongly ended early is then longer walked anew).
    int n = walk(st, ip, sp, rbp, anew, NULL, got->is_complete ? st->depth : got->n);
    if (n < 0)
        return;
    atomic_fetch_add(&checks_made, 1);
    if (got->is_resumed)
        atomic_fetch_add(&checks_resumed, 1);
    int k = 0;
    while (k < n && k < got->n && anew->ips[k] == got->ips[k])
        k++;
    if (k == n && n == got->n)
        return;
    atomic_fetch_add(&checks_differed, 1);
    hl_log("unwind check: a stack of %d frames taken from earlier walks, %d walked anew; they "
           "part at frame %d (0x%lx, anew 0x%lx)",
           got->n, n, k, k < got->n ? (unsigned long)got->ips[k] : 0ul,
           k < n ? (unsigned long)anew->ips[k] : 0ul);
}

void unwind_check_report(void) {
    if (hl_opt.unwind_check)
        hl_log("unwind check: %lu stacks taken from earlier walks walked again, %lu differed "
               "(%lu had gone on past a cut walk; %lu walks past one met a frame needing %%rbp "
               "and were walked again whole); rule cache of %u entries at most",
               atomic_load(&checks_made), atomic_load(&checks_differed),
               atomic_load(&checks_resumed), atomic_load(&walks_again),
               atomic_load(&rule_entries_max));
}

// The node `up` callers above the stack id (a walk's frames were reused from frame `up` of the
// walk whose stack is id), following parents (a few: the innermost frames that changed); 0 when
// not known. Its nodes were made or found lately, so they are likely in the cache, where a probe
// by path is a hash of every frame and a miss in a table of all of them.
#define HL_CALLER_HOPS 4
static uint32_t caller_node(uint32_t id, int up) {
    if (!id || up > HL_CALLER_HOPS)
        return 0;
    uint32_t at = id;
    for (int k = 0; k < up; k++) {
        uintptr_t ip;
        uint32_t parent;
        if (stack_node(at, &ip, &parent) != 0 || !parent)
            return 0;
        at = parent;
    }
    return at;
}

// The very stack of a recent call at (ip, sp): a walk of the key's ways whose saved return
// addresses all still hold (sqlite3 reaches its allocator from many places at one depth, and
// finds 24% of its stacks past the first way). 0: none; the caller walks.
static inline uint32_t recent_find(unwind_state_t* st, recent_t* rc, uint8_t* ways, uintptr_t ip,
                                   uintptr_t sp, uintptr_t rbp) {
    int nways = rc->ways_score || (st->seq % HL_WAYS_RETRY) == 0 ? HL_RECENT_WAYS : 1;
    for (int w = 0; w < nways && ways[w]; w++) {
        const walk_key_t* key = &rc->key[ways[w] - 1];
        if (key->sp != sp || key->ip != ip ||
            (key->slot && *(const uintptr_t*)key->slot != key->caller))
            continue;
        const last_stack_t* seen = &rc->walks[ways[w] - 1];
        if (seen->n > 0 &&
            (w == 0 ? tail_still_valid(seen, 0, rbp) : tail_still_same(seen, rbp))) {
            rc->latest = ways[w] - 1;
            rc->latest_seq = ++st->seq;
            if (hl_unlikely(w > 0)) {
                rc->ways_score = (uint8_t)(rc->ways_score > 255 - HL_WAYS_REWARD
                                               ? 255
                                               : rc->ways_score + HL_WAYS_REWARD);
                recent_to_front(ways, w);
            }
            return seen->id;
        }
    }
    if (nways > 1 && ways[1] && rc->ways_score)
        rc->ways_score--;
    return 0;
}

// The general unwinder's path, out of line: its 2 KiB array of frames must not sit in every
// capture's frame, where it would push the walk below it deeper into the program's stack on
// each allocation (a recursion near its stack limit would lose levels to it).
static HL_NOINLINE HL_COLD uint32_t capture_general(int max) {
    uintptr_t ips[HL_MAX_DEPTH];
    return stack_intern(ips, unwind_general(ips, max), NULL);
}

static HL_NOINLINE uint32_t capture(hl_thread_t* t, int which, int looked) {
    uintptr_t ip, sp, rbp;
    // A release stack is cut to its innermost frames when a report names it (stacks.h:
    // HL_RELEASE_DEPTH). Right after an allocation it is taken at full depth from that
    // allocation's walk: a block freed where it was made shares all its frames but the
    // innermost, walked and interned once. After another release it is taken cut (a release
    // walk after a release walk rarely shares its outer frames, and a teardown by recursion
    // would make a full path of new nodes per block where the cut windows repeat).
    int max = hl_opt.depth;
    unwind_state_t* st = thread_state(t, max);
    if (hl_unlikely(!st || !hl_opt.unwind_cfi || leave_agent(&ip, &sp, &rbp) != 0))
        return capture_general(which == 1 && max > HL_RELEASE_DEPTH ? HL_RELEASE_DEPTH : max);
    unsigned generation = atomic_load_explicit(&recent_generation, memory_order_relaxed);
    if (hl_unlikely(st->generation != generation)) {
        os_discard(rule_table_at(st->rule_table), rule_table_bytes(st->rule_table));
        memset(&st->resumes, 0, sizeof st->resumes);
        st->generation = generation;
    }
    recent_t* rc = &st->recent[which];
    const recent_t* other = &st->recent[which ^ 1];
    int after_other = other->latest_seq > rc->latest_seq;
    if (which == 1 && !after_other && max > HL_RELEASE_DEPTH)
        max = HL_RELEASE_DEPTH;
    if (hl_unlikely(rc->generation != generation)) {
        memset(rc->index, 0, sizeof rc->index);
        for (int k = 0; k < HL_RECENT; k++)
            rc->walks[k].n = 0;
        rc->generation = generation;
    }
    uint8_t* ways = rc->index[recent_slot(ip, sp)];
    if (!looked) {
        uint32_t id = recent_find(st, rc, ways, ip, sp, rbp);
        if (id && hl_unlikely(hl_opt.unwind_check)) // capture_hit left the looking to here
            check_walk(st, &rc->walks[rc->latest], ip, sp, rbp);
        if (id)
            return id;
    }
    // Walk into the slot after the latest, reusing the outer frames of the thread's latest walk
    // of either kind (a free just after an allocation in the same function shares all but one).
    const last_stack_t* last = &rc->walks[rc->latest];
    const last_stack_t* theirs = &other->walks[other->latest];
    if (after_other && other->generation == generation && (theirs->is_complete || theirs->n >= max))
        last = theirs; // not a release walk cut short: its outer frames are the whole stack's
    if (hl_unlikely(!st->is_populated) && st->seq - st->populate_from >= HL_STATE_POPULATE_AT)
        state_populate(st);
    int slot = (rc->latest + 1) % HL_RECENT;
    if (hl_unlikely(st->is_made_present) &&
        !((st->walk_groups[which] >> (slot / HL_WALK_GROUP)) & 1))
        walks_make_present(st, which, slot);
    last_stack_t* fresh = &rc->walks[slot];
    const last_stack_t* reuse = last->n > 0 ? last : NULL;
    int n;
    // A walk past a cut one that met a frame needing the %rbp it lacked: again, reusing nothing.
    while (hl_unlikely((n = walk(st, ip, sp, rbp, fresh, reuse, max)) == HL_WALK_AGAIN)) {
        reuse = NULL;
        if (hl_unlikely(hl_opt.unwind_check)) // a shared counter: only for the check's line
            atomic_fetch_add_explicit(&walks_again, 1, memory_order_relaxed);
    }
    if (n < 0) {
        fresh->n = 0;
        return capture_general(max);
    }
    // The last frame's own slot may be unread (the walk stopped at max): matches compare the
    // n - 1 slots that were.
    fresh->n = n;
    if (hl_unlikely(hl_opt.unwind_check) && fresh->reused_from >= 0)
        check_walk(st, fresh, ip, sp, rbp);
    fresh->id = 0;
    if (fresh->reused_at == 0) // all of it was the previous walk's from one of its frames on
        fresh->id = fresh->nodes[0];
    else if (fresh->reused_at > 0) {
        // The outer frames are the previous stack's: start from its node for them.
        uint32_t base = fresh->nodes[fresh->reused_at];
        if (!base) // not known (the stack it came from was found whole): its callers from its id
            base = fresh->nodes[fresh->reused_at] = caller_node(last->id, fresh->reused_from);
        if (!base) // or one probe by its path
            base = fresh->nodes[fresh->reused_at] =
                stack_intern(fresh->ips + fresh->reused_at, n - fresh->reused_at, NULL);
        if (base)
            fresh->id = stack_extend(base, fresh->ips, fresh->reused_at, fresh->nodes);
    }
    if (!fresh->id)
        fresh->id = stack_intern(fresh->ips, n, fresh->nodes);
    if (!fresh->id) {
        fresh->n = 0; // the table is full: nothing here may be reused
        return 0;
    }
    rc->latest = slot;
    rc->latest_seq = ++st->seq;
    rc->key[slot] = (walk_key_t){sp, ip, n > 1 ? fresh->slots[0] : 0, n > 1 ? fresh->ips[1] : 0};
    recent_note(ways, (uint8_t)(slot + 1));
    return fresh->id;
}

// The very stack of a recent call, apart from capture(), whose walk keeps every register busy:
// most calls of most programs (sqlite3: 96%, tree.c: all) pay none of its spills and saved
// registers, only recent_find's own (five; inlined here, sqlite3 was 4% slower). 1 and *id:
// found; 2: looked in vain, capture() walks; 0: capture() must look itself
// (no state yet, new generation, or the general unwinder).
static inline int capture_hit(hl_thread_t* t, int which, uint32_t* id) {
    unwind_state_t* st = t->unwind_cache;
    uintptr_t ip, sp, rbp;
    if (hl_unlikely(!st || st->depth < hl_opt.depth || !hl_opt.unwind_hits ||
                    leave_agent(&ip, &sp, &rbp) != 0))
        return 0;
    unsigned generation = atomic_load_explicit(&recent_generation, memory_order_relaxed);
    recent_t* rc = &st->recent[which];
    if (hl_unlikely(st->generation != generation || rc->generation != generation))
        return 0;
    *id = recent_find(st, rc, rc->index[recent_slot(ip, sp)], ip, sp, rbp);
    return *id ? 1 : 2;
}

uint32_t stack_capture(hl_thread_t* t) {
    uint32_t id;
    int found = capture_hit(t, 0, &id);
    return hl_likely(found == 1) ? id : capture(t, 0, found == 2);
}
uint32_t stack_capture_release(hl_thread_t* t) {
    uint32_t id;
    int found = capture_hit(t, 1, &id);
    return hl_likely(found == 1) ? id : capture(t, 1, found == 2);
}
#else
uint32_t stack_capture(hl_thread_t* t) {
    (void)t;
    uintptr_t ips[HL_MAX_DEPTH];
    return stack_intern(ips, unwind_general(ips, hl_opt.depth), NULL);
}
uint32_t stack_capture_release(hl_thread_t* t) { return stack_capture(t); }
void unwind_forget_recent(void) {} // nothing is remembered between walks here
void unwind_check_report(void) {}
void unwind_after_fork(hl_thread_t* t) {
    (void)t;
}
void unwind_code_unloaded(void) {}
#endif

// ---------------------------------------------------------------------------------------------
// The stack of a faulting instruction, from its signal handler: libgcc's unwinder steps through
// the signal frame; the frames up to the one at the fault's ip are the handler's.
// ---------------------------------------------------------------------------------------------
typedef struct fault_walk_s {
    uintptr_t ip;
    collect_t c;
} fault_walk_t;

static _Unwind_Reason_Code on_fault_frame(struct _Unwind_Context* ctx, void* arg) {
    fault_walk_t* w = arg;
    uintptr_t ip = (uintptr_t)_Unwind_GetIP(ctx);
    if (!ip)
        return _URC_END_OF_STACK;
    if (w->c.skipping && ip != w->ip)
        return _URC_NO_REASON;
    w->c.skipping = 0;
    // The faulting frame's ip is the instruction itself, not a return address: the analyzer
    // looks a return address up one byte back, so it is given one byte on.
    w->c.ips[w->c.n] = w->c.n == 0 ? ip + 1 : ip;
    w->c.n++;
    return w->c.n >= w->c.max ? _URC_END_OF_STACK : _URC_NO_REASON;
}

uint32_t stack_capture_fault(hl_thread_t* t, uintptr_t ip) {
    (void)t;
    uintptr_t ips[HL_MAX_DEPTH];
    fault_walk_t w = {ip, {ips, 0, hl_opt.depth, ip != 0}};
    _Unwind_Backtrace(on_fault_frame, &w);
    if (!w.c.n) // the fault's frame was never reached: the handler's callers, as they come
        return stack_capture(t);
    return stack_intern(ips, w.c.n, NULL);
}

void unwind_init(void) {}
