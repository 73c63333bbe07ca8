// SPDX-License-Identifier: MIT
// errors.c - heap errors (double, invalid and mismatched release, writes past the end) and the
// guard bytes that catch the last kind. Reporting is the cold path: it unwinds the bad call and
// writes one ERROR record straight into the trace.
#define _GNU_SOURCE
#include <string.h>

#include "../common/compiler.h"
#include "../common/format.h"
#include "errors.h"
#include "live.h"
#include "options.h"
#include "thread.h"
#include "unwind.h"
#include "writer.h"

static inline uint8_t guard_byte(size_t i) { return (uint8_t)(0xA5 ^ (i * 0x3B)); }

// The default 8 guard bytes as one word: filled and checked with a single unaligned access.
static uint64_t guard_word(void) {
    uint64_t w = 0;
    for (size_t i = 0; i < 8; i++)
        w |= (uint64_t)guard_byte(i) << (8 * i);
    return w;
}

void guard_fill(void* p, size_t size) {
    uint8_t* g = (uint8_t*)p + size;
    if (hl_likely(hl_opt.guard == 8)) {
        uint64_t w = guard_word();
        memcpy(g, &w, 8);
        return;
    }
    for (int i = 0; i < hl_opt.guard; i++)
        g[i] = guard_byte((size_t)i);
}

int guard_is_intact(const hl_block_t* b) {
    const uint8_t* g = (const uint8_t*)b->addr + b->size;
    if (hl_likely(hl_opt.guard == 8)) {
        uint64_t w;
        memcpy(&w, g, 8);
        return w == guard_word();
    }
    for (int i = 0; i < hl_opt.guard; i++)
        if (g[i] != guard_byte((size_t)i))
            return 0;
    return 1;
}

void error_report(int kind, int fn, uintptr_t addr, const hl_block_t* block,
                  uint32_t release_stack) {
    hl_thread_t* t = thread_self();
    uint32_t call_stack = stack_capture(t);
    writer_put_error(kind, t->index, call_stack, addr, fn, block, release_stack);
}

static void check_one(const hl_block_t* b, void* arg) {
    (void)arg;
    if (b->guarded && !b->is_internal && !guard_is_intact(b))
        writer_put_error_locked(HL_ERR_OVERFLOW, 0, 0, b->addr, 0, b, 0);
}

// At exit the blocks never released get their guards checked too (caller holds the world).
void error_check_guards_at_exit(void) { live_for_each(check_one, NULL); }
