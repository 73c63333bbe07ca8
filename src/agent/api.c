// SPDX-License-Identifier: MIT
// api.c - the agent's side of include/heaplens.h: the table libheaplens-api finds by the one
// exported name HL_API_ENTRY. Each entry runs on the program's thread, marked as inside the
// agent for its duration (what it allocates is not the program's), and parks there if the
// world was stopped meanwhile.
#define _GNU_SOURCE
#include <errno.h>

#include "../common/api_table.h"
#include "../common/compiler.h"
#include "../common/format.h"
#include "agent.h"
#include "api.h"
#include "epoch.h"
#include "live.h"
#include "record.h"
#include "report_live.h"
#include "scan.h"
#include "scan_now.h"
#include "thread.h"
#include "writer.h"

static int on(void) {
    return atomic_load_explicit(&hl_phase, memory_order_acquire) == HL_ON && agent_owns_process();
}

static int fail(int err) {
    errno = err;
    return -1;
}

static hl_thread_t* enter(void) {
    hl_thread_t* t = thread_self();
    t->busy++;
    return t;
}
static void leave(hl_thread_t* t) {
    if (--t->busy == 0 && hl_unlikely(t->park_pending))
        scan_park_self();
}

static int api_is_traced(void) {
    return on();
}

static int api_pause(void) {
    if (!on())
        return fail(ENOSYS);
    hl_thread_t* t = enter();
    if (t->paused++ == 0) {
        record_note(t, HL_NOTE_PAUSE, 0, 0);
        atomic_fetch_or(&hl_api_hooks, HL_API_PAUSED); // stays set: a paused thread may exit
    }
    leave(t);
    return 0;
}

static int api_resume(void) {
    if (!on())
        return fail(ENOSYS);
    hl_thread_t* t = enter();
    int rc = 0;
    if (t->paused == 0)
        rc = fail(EINVAL);
    else if (--t->paused == 0)
        record_note(t, HL_NOTE_RESUME, 0, 0);
    leave(t);
    return rc;
}

static int64_t api_mark(void) {
    if (!on())
        return fail(ENOSYS);
    hl_thread_t* t = enter();
    uint64_t e = epoch_advance64(); // never wraps: an old mark is told apart
    record_note(t, HL_NOTE_MARK, (uint32_t)e, (uint32_t)(e >> 32));
    leave(t);
    return (int64_t)e;
}

static int report_since(uint32_t since, int fd, int format) {
    if (format != HEAPLENS_TEXT && format != HEAPLENS_JSON)
        return fail(EINVAL);
    hl_thread_t* t = enter();
    int rc = report_live_write(fd, format, since, 0);
    leave(t);
    return rc;
}

static int api_report_since(int64_t mark, int fd, int format) {
    if (!on())
        return fail(ENOSYS);
    if (mark <= 0)
        return fail(EINVAL);
    if (!epoch_is_valid64((uint64_t)mark))
        return fail(mark > (int64_t)epoch_now64() ? EINVAL : ESTALE);
    return report_since((uint32_t)mark, fd, format); // within 2^16 of now: exact in 32 bits
}

static int api_report(int fd, int format) {
    if (!on())
        return fail(ENOSYS);
    return report_since(0, fd, format);
}

static int api_ignore(const void* ptr) {
    if (!on())
        return fail(ENOSYS);
    hl_thread_t* t = enter();
    hl_block_t b = {0};
    int rc = 0;
    if (live_lookup((uintptr_t)ptr, &b) != HL_BLOCK_LIVE || b.is_internal) {
        rc = fail(ENOENT);
    } else if (!b.ignored && live_set_ignored((uintptr_t)ptr) == 0) {
        // Its release (or resize) says so again: the report leaves out what is ignored at exit.
        atomic_fetch_or(&hl_api_hooks, HL_API_IGNORED);
        record_note_block(t, HL_NOTE_IGNORE, &b);
    }
    leave(t);
    return rc;
}

static int api_watch(const void* ptr, heaplens_watch_fn cb, void* arg) {
    if (!on())
        return fail(ENOSYS);
    hl_thread_t* t = enter();
    hl_block_t b = {0};
    int rc;
    // A block made while paused is not the agent's to follow: its release is not seen.
    if (cb && (live_lookup((uintptr_t)ptr, &b) != HL_BLOCK_LIVE || b.is_internal))
        rc = fail(ENOENT);
    else
        rc = api_watch_set((uintptr_t)ptr, (void*)cb, arg, 0) == 0 ? 0 : fail(ENOSPC);
    leave(t);
    return rc;
}

static int api_tag(unsigned type, unsigned location) {
    if (!on())
        return fail(ENOSYS);
    hl_thread_t* t = enter();
    record_note(t, HL_NOTE_TAG, type, location);
    leave(t);
    return 0;
}

static int api_untag(void) {
    if (!on())
        return fail(ENOSYS);
    hl_thread_t* t = enter();
    record_note(t, HL_NOTE_UNTAG, 0, 0);
    leave(t);
    return 0;
}

static int api_set_thresholds(size_t block_bytes, size_t delta_bytes, uint64_t delta_ns,
                              heaplens_threshold_fn cb, void* arg) {
    if (!on())
        return fail(ENOSYS);
    if (delta_bytes && !delta_ns)
        return fail(EINVAL);
    return api_thresholds_set(block_bytes, delta_bytes, delta_ns, (void*)cb, arg);
}

static int api_stats(struct heaplens_stats* s) {
    if (!on())
        return fail(ENOSYS);
    if (!s)
        return fail(EINVAL);
    hl_thread_t* t = enter();
    hl_heap_totals_t h;
    hl_ring_stats_t mine = {0};
    writer_stats(&h, t->ring, &mine);
    leave(t);
    *s = (struct heaplens_stats){
        .live_bytes = h.live_bytes,
        .live_blocks = h.live_blocks,
        .peak_bytes = h.peak_bytes,
        .peak_blocks = h.peak_blocks,
        .peak_time_ns = h.peak_time_ns,
        .allocations = h.allocations,
        .frees = h.frees,
        .bytes_allocated = h.bytes_allocated,
        .thread_allocations = mine.allocs,
        .thread_frees = mine.frees,
        .thread_bytes_allocated = mine.alloc_bytes,
        .thread_bytes_freed = mine.free_bytes,
    };
    return 0;
}

// ---------------------------------------------------------------------------------------------
// Leak checks: the on-demand scan (scan_now.c).
// ---------------------------------------------------------------------------------------------

static _Atomic uint64_t last_check_epoch; // blocks of this epoch or later are new to a check

static int leak_check_since(int only_new, struct heaplens_leak_counts* counts) {
    if (!on())
        return fail(ENOSYS);
    hl_thread_t* t = thread_self();
    if (t->busy)
        return fail(EDEADLK); // from a callback run inside a release: no scan there
    // A new epoch first: what is allocated from here on is new to the next check.
    t = enter();
    uint64_t next = epoch_advance64();
    leave(t);
    uint64_t since64 = atomic_exchange(&last_check_epoch, next);
    uint32_t since = (uint32_t)since64;
    if (since64 && !epoch_is_valid64(since64))
        since = epoch_floor() + 1; // older than the epochs kept apart: what they still tell
    hl_scan_counts_t c = {{0}, {0}};
    if (scan_now(only_new ? since : 0, &c) != 0)
        return -1;
    if (counts) {
        struct heaplens_amount* k[4] = {&counts->definitely_lost, &counts->indirectly_lost,
                                        &counts->possibly_lost, &counts->still_reachable};
        for (int i = 0; i < 4; i++)
            *k[i] = (struct heaplens_amount){.bytes = c.bytes[i], .blocks = c.blocks[i]};
    }
    return 0;
}

static int api_leak_check(struct heaplens_leak_counts* counts) {
    return leak_check_since(0, counts);
}

static int api_leak_check_new(struct heaplens_leak_counts* counts) {
    return leak_check_since(1, counts);
}

// ---------------------------------------------------------------------------------------------
static const hl_api_table_t table = {
    .version = HEAPLENS_API_VERSION,
    .is_traced = api_is_traced,
    .pause = api_pause,
    .resume = api_resume,
    .mark = api_mark,
    .report_since = api_report_since,
    .report = api_report,
    .leak_check = api_leak_check,
    .leak_check_new = api_leak_check_new,
    .ignore = api_ignore,
    .watch = api_watch,
    .tag = api_tag,
    .untag = api_untag,
    .set_thresholds = api_set_thresholds,
    .stats = api_stats,
};

HL_EXPORT const hl_api_table_t* heaplens_agent_api(int version) {
    return version == HEAPLENS_API_VERSION ? &table : NULL;
}
