// SPDX-License-Identifier: MIT
// live_regions.c - a directory of regions, one per 16 MiB of address space, each made the
// first time a block lands there: how the direct map (live.c) and the headers' marks
// (live_header.c) find their part for an address with one load. Regions are never freed.
#include "live_levels.h"
#include "os.h"

#define HL_DIR_ENTRIES (1u << (HL_ADDR_BITS - HL_REGION_SHIFT))

void region_dir_init(region_dir_t* d) {
    d->at = os_map((size_t)HL_DIR_ENTRIES * sizeof *d->at);
    d->made = os_map(HL_MAX_REGIONS * sizeof *d->made);
    if (!d->made)
        d->at = NULL;
}

void* region_dir_make(region_dir_t* d, uintptr_t a, void* (*map)(size_t), size_t bytes) {
    if (!d->at || addr_beyond(a))
        return NULL;
    uint32_t idx = (uint32_t)(a >> HL_REGION_SHIFT);
    while (atomic_exchange_explicit(&d->lock, 1, memory_order_acquire))
        os_yield();
    if (!atomic_load(&d->at[idx]) && atomic_load(&d->nmade) < HL_MAX_REGIONS) {
        void* r = map(bytes);
        if (r) {
            d->made[atomic_load(&d->nmade)] = idx;
            atomic_store_explicit(&d->at[idx], r, memory_order_release);
            atomic_fetch_add(&d->nmade, 1);
        }
    }
    atomic_store_explicit(&d->lock, 0, memory_order_release);
    return region_dir_get(d, a);
}

void* region_dir_nth(region_dir_t* d, uint32_t i, uintptr_t* base) {
    *base = (uintptr_t)d->made[i] << HL_REGION_SHIFT;
    return atomic_load(&d->at[d->made[i]]);
}

void region_dir_reset_after_fork(region_dir_t* d) {
    atomic_store(&d->lock, 0);
}
