// SPDX-License-Identifier: MIT
// epoch.c - the current epoch and its rebases (see epoch.h for what a rebase promises).
#define _GNU_SOURCE
#include <sched.h>

#include "epoch.h"
#include "live.h"

_Atomic uint32_t hl_epoch;
static _Atomic uint32_t floor_epoch; // marks at or before it have expired
// The 64-bit count: hl_epoch's wraps, and the floor in it (written under the lock).
static uint32_t epoch_wraps;
static uint64_t floor64;
static _Atomic int advance_lock; // one advance (and its rebase) at a time

void epoch_lock(void) {
    while (atomic_exchange_explicit(&advance_lock, 1, memory_order_acquire))
        sched_yield();
}
void epoch_unlock(void) {
    atomic_store_explicit(&advance_lock, 0, memory_order_release);
}

static uint64_t now64_locked(void) {
    return (uint64_t)epoch_wraps << 32 | atomic_load(&hl_epoch);
}

static uint32_t advance_locked(void) {
    uint32_t now = atomic_load(&hl_epoch), next = now + 1;
    if (next == 0)
        epoch_wraps++;
    if (next % HL_EPOCH_REBASE == 0) {
        // Before the new epoch is published: blocks allocated meanwhile carry `now`, which is
        // after the floor and never relabelled.
        uint32_t floor = next - HL_EPOCH_REBASE;
        live_epoch_rebase(now, floor);
        atomic_store(&floor_epoch, floor);
        floor64 = ((uint64_t)epoch_wraps << 32 | next) - HL_EPOCH_REBASE;
    }
    atomic_store_explicit(&hl_epoch, next, memory_order_release);
    return next;
}

uint32_t epoch_advance(void) {
    epoch_lock();
    uint32_t next = advance_locked();
    epoch_unlock();
    return next;
}

uint64_t epoch_advance64(void) {
    epoch_lock();
    advance_locked();
    uint64_t next = now64_locked();
    epoch_unlock();
    return next;
}

uint64_t epoch_now64(void) {
    epoch_lock();
    uint64_t now = now64_locked();
    epoch_unlock();
    return now;
}

int epoch_is_valid64(uint64_t mark) {
    epoch_lock();
    int valid = mark > floor64 && mark <= now64_locked();
    epoch_unlock();
    return valid;
}

uint32_t epoch_floor(void) {
    return atomic_load(&floor_epoch);
}

int epoch_is_valid(uint32_t mark) {
    uint32_t now = epoch_now(), floor = epoch_floor();
    return (int32_t)(mark - floor) > 0 && (int32_t)(now - mark) >= 0;
}

void epoch_reset_after_fork(void) {
    atomic_store(&advance_lock, 0);
}
