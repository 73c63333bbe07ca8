// SPDX-License-Identifier: MIT
// api_hooks.c - the API's cold paths behind the hot path's one check of hl_api_hooks:
// paused threads, watched blocks, thresholds. Callbacks run on the program's thread that made
// the call, with no agent lock held and the thread marked as outside the agent, so that what
// they allocate is the program's.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <time.h>

#include "../../include/heaplens.h"
#include "../common/compiler.h"
#include "../common/format.h"
#include "api.h"
#include "errors.h"
#include "record.h"
#include "stacks.h"
#include "unwind.h"

_Atomic int hl_api_hooks;

static void spin_lock(_Atomic int* l) {
    while (atomic_exchange_explicit(l, 1, memory_order_acquire))
        sched_yield();
}
static void spin_unlock(_Atomic int* l) {
    atomic_store_explicit(l, 0, memory_order_release);
}

void api_alloc_paused(void* p, size_t size, int fn, int how) {
    live_insert(&(hl_block_t){.addr = (uintptr_t)p,
                              .size = size,
                              .fn = (uint8_t)fn,
                              .guarded = (how & HL_AS_GUARDED) != 0,
                              .headed = (how & HL_AS_HEADED) != 0,
                              .is_internal = 1});
    if (how & HL_AS_GUARDED) // a resize checks it as any block's
        guard_fill(p, size);
}

// ---------------------------------------------------------------------------------------------
// Watches: a small open-addressing table by address (a watch is a debugging aid: a few)
// ---------------------------------------------------------------------------------------------
#define HL_WATCH_MAX 1024 // slots, a power of two; up to half hold watches
typedef struct watch_s {
    uintptr_t addr; // 0: empty; 1: removed (a tombstone)
    void* cb; // heaplens_watch_fn, or hl_watch_stack_fn when with_stack
    void* arg;
    int with_stack;
} watch_t;
static watch_t watches[HL_WATCH_MAX];
static size_t nwatches, nused;
static _Atomic int watch_lock;

static size_t watch_slot(uintptr_t a) {
    return (size_t)((a >> 4) * 0x9E3779B97F4A7C15ull >> 54) & (HL_WATCH_MAX - 1);
}
static watch_t* watch_find(uintptr_t a) {
    for (size_t i = watch_slot(a), k = 0; k < HL_WATCH_MAX; i = (i + 1) & (HL_WATCH_MAX - 1), k++) {
        if (watches[i].addr == a)
            return &watches[i];
        if (watches[i].addr == 0)
            return NULL;
    }
    return NULL;
}

static void hooks_update(int bit, int on) {
    if (on)
        atomic_fetch_or(&hl_api_hooks, bit);
    else
        atomic_fetch_and(&hl_api_hooks, ~bit);
}

int api_watch_set(uintptr_t addr, void* cb, void* arg, int with_stack) {
    int rc = 0;
    spin_lock(&watch_lock);
    watch_t* w = watch_find(addr);
    if (!cb) {
        if (w) {
            w->addr = 1;
            nwatches--;
        }
    } else if (w) {
        w->cb = cb, w->arg = arg, w->with_stack = with_stack;
    } else if (nwatches >= HL_WATCH_MAX / 2) {
        rc = -1; // full: half the table, so that probes stay short
    } else {
        if (nused + 1 >= HL_WATCH_MAX * 3 / 4) { // tombstones only: rebuild in place
            watch_t keep[HL_WATCH_MAX];
            size_t n = 0;
            for (size_t i = 0; i < HL_WATCH_MAX; i++)
                if (watches[i].addr > 1)
                    keep[n++] = watches[i];
            __builtin_memset(watches, 0, sizeof watches);
            nused = 0;
            for (size_t i = 0; i < n; i++) {
                size_t j = watch_slot(keep[i].addr);
                while (watches[j].addr)
                    j = (j + 1) & (HL_WATCH_MAX - 1);
                watches[j] = keep[i];
                nused++;
            }
        }
        size_t j = watch_slot(addr);
        while (watches[j].addr > 1)
            j = (j + 1) & (HL_WATCH_MAX - 1);
        if (watches[j].addr == 0)
            nused++;
        watches[j] = (watch_t){.addr = addr, .cb = cb, .arg = arg, .with_stack = with_stack};
        nwatches++;
    }
    hooks_update(HL_API_WATCH, nwatches > 0);
    spin_unlock(&watch_lock);
    return rc;
}

// The program's instruction that released the block: the innermost frame of its stack that is
// not the agent's own.
static uintptr_t where_of(uint32_t stack) {
    Dl_info self, di;
    if (!dladdr((void*)where_of, &self))
        return 0;
    for (int k = 0; stack && k < HL_MAX_DEPTH; k++) {
        uintptr_t ip;
        uint32_t parent;
        if (stack_node(stack, &ip, &parent) != 0)
            break;
        if (!dladdr((void*)(ip - 1), &di) || di.dli_fbase != self.dli_fbase)
            return ip;
        stack = parent;
    }
    return 0;
}

// ---------------------------------------------------------------------------------------------
// Thresholds
// ---------------------------------------------------------------------------------------------
typedef struct thresholds_s {
    size_t block_bytes, delta_bytes;
    uint64_t delta_ns;
    heaplens_threshold_fn cb;
    void* arg;
    int64_t level;          // heap bytes since the thresholds were set (allocations - releases)
    int64_t window_base;    // the level when the window began
    uint64_t window_start;  // CLOCK_MONOTONIC ns
} thresholds_t;
static thresholds_t th;
static _Atomic int th_lock;

static uint64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int api_thresholds_set(size_t block_bytes, size_t delta_bytes, uint64_t delta_ns, void* cb,
                       void* arg) {
    spin_lock(&th_lock);
    th = (thresholds_t){.block_bytes = block_bytes,
                        .delta_bytes = delta_bytes,
                        .delta_ns = delta_ns,
                        .cb = (heaplens_threshold_fn)cb,
                        .arg = arg,
                        .window_start = mono_ns()};
    hooks_update(HL_API_THRESHOLDS, cb && (block_bytes || delta_bytes));
    spin_unlock(&th_lock);
    return 0;
}

void api_after_alloc(hl_thread_t* t, size_t size) {
    spin_lock(&th_lock);
    heaplens_threshold_fn cb = th.cb;
    void* arg = th.arg;
    int block = th.block_bytes && size >= th.block_bytes;
    size_t grown = 0;
    th.level += (int64_t)size;
    if (th.delta_bytes) {
        uint64_t now = mono_ns();
        if (now - th.window_start > th.delta_ns) { // a new window, from before this allocation
            th.window_start = now;
            th.window_base = th.level - (int64_t)size;
        }
        if (th.level - th.window_base >= (int64_t)th.delta_bytes) {
            grown = (size_t)(th.level - th.window_base);
            th.window_start = now;
            th.window_base = th.level;
        }
    }
    spin_unlock(&th_lock);
    if (!cb || t->in_callback)
        return;
    if (block)
        API_AS_PROGRAM(t, cb(HEAPLENS_BLOCK, size, arg));
    if (grown)
        API_AS_PROGRAM(t, cb(HEAPLENS_DELTA, grown, arg));
}

void api_on_release(hl_thread_t* t, const hl_block_t* b, int event, uint32_t release_stack) {
    int hooks = atomic_load_explicit(&hl_api_hooks, memory_order_relaxed);
    if ((hooks & HL_API_IGNORED) && b->ignored)
        record_note_block(t, HL_NOTE_UNIGNORE, b);
    if (hooks & HL_API_THRESHOLDS) {
        spin_lock(&th_lock);
        th.level -= (int64_t)b->size;
        spin_unlock(&th_lock);
    }
    if (!(hooks & HL_API_WATCH))
        return;
    spin_lock(&watch_lock);
    watch_t* w = watch_find(b->addr);
    watch_t hit = w ? *w : (watch_t){0};
    if (w) { // the watch ends with the block
        w->addr = 1;
        nwatches--;
        hooks_update(HL_API_WATCH, nwatches > 0);
    }
    spin_unlock(&watch_lock);
    if (!hit.cb)
        return;
    uint32_t stack = release_stack ? release_stack : stack_capture_release(t);
    const void* where = (const void*)where_of(stack);
    if (hit.with_stack)
        API_AS_PROGRAM(t,
                       ((hl_watch_stack_fn)hit.cb)((void*)b->addr, event, where, stack, hit.arg));
    else
        API_AS_PROGRAM(t, ((heaplens_watch_fn)hit.cb)((void*)b->addr, event, where, hit.arg));
}

void api_after_fork_child(void) {
    atomic_store(&watch_lock, 0);
    atomic_store(&th_lock, 0);
}
