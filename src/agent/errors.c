// SPDX-License-Identifier: MIT
// errors.c - heap errors (double, invalid and mismatched release, writes outside a block or to
// a released one). Reporting is the cold path: it unwinds the bad call and writes one ERROR
// record straight into the trace, followed by an ERROR_CHANGE record when bytes the agent left
// were found changed.
#define _GNU_SOURCE
#include <string.h>

#include "../common/compiler.h"
#include "../common/format.h"
#include "check.h"
#include "errors.h"
#include "live.h"
#include "options.h"
#include "thread.h"
#include "unwind.h"
#include "writer.h"

void error_report_change(int kind, int fn, uintptr_t addr, const hl_block_t* block,
                         uint32_t release_stack, const hl_change_t* c, int no_call_stack) {
    hl_thread_t* t = thread_self();
    uint32_t call_stack = no_call_stack ? 0 : stack_capture(t);
    writer_lock();
    writer_put_error_locked(kind, t->index, call_stack, addr, fn, block, release_stack);
    if (c)
        writer_put_change_locked(c);
    writer_unlock();
}

void error_report(int kind, int fn, uintptr_t addr, const hl_block_t* block,
                  uint32_t release_stack) {
    hl_change_t c;
    int changed = kind == HL_ERR_OVERFLOW && block && layout_after_change(block, &c);
    error_report_change(kind, fn, addr, block, release_stack, changed ? &c : NULL, 0);
}

void error_put_change_locked(int kind, uintptr_t addr, const hl_block_t* block,
                             uint32_t release_stack, const hl_change_t* c) {
    writer_put_error_locked(kind, 0, 0, addr, 0, block, release_stack);
    if (c)
        writer_put_change_locked(c);
}

static void check_one(const hl_block_t* b, void* arg) {
    (void)arg;
    hl_change_t c;
    if (!b->guarded || b->is_internal)
        return;
    if (!guard_is_intact(b))
        error_put_change_locked(HL_ERR_OVERFLOW, b->addr, b,
                                0, layout_after_change(b, &c) ? &c : NULL);
    if (hl_unlikely(hl_opt.checking) && !b->headed && layout_before_change(b, &c))
        error_put_change_locked(HL_ERR_UNDERFLOW, b->addr, b, 0, &c);
}

// At exit the blocks never released get their guards and red zones checked too, and the
// released ones held back their paint (caller holds the world).
void error_check_guards_at_exit(void) {
    live_for_each(check_one, NULL);
    if (hl_unlikely(hl_opt.checking))
        check_at_exit();
}
