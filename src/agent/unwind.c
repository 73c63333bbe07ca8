// SPDX-License-Identifier: MIT
// unwind.c - the backtrace of the current call. libunwind's unw_backtrace walks CFI with a
// per-thread cache of unwind rules keyed by return address, so a frame it has seen before
// costs a hash lookup, not a DWARF interpretation; programs built without frame pointers (the
// usual -O2 build) unwind correctly. Frames inside libheaplens.so are dropped.
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "agent.h"

int unwind_here(uintptr_t* ips, int max) {
    void* raw[HL_MAX_DEPTH + 8];
    int want = max + 8;
    if (want > (int)HL_ARRAY_LEN(raw))
        want = (int)HL_ARRAY_LEN(raw);
    int n = unw_backtrace(raw, want);
    int skip = 0;
    while (skip < n && modules_own_text((uintptr_t)raw[skip]))
        skip++;
    int out = 0;
    for (int i = skip; i < n && out < max; i++)
        ips[out++] = (uintptr_t)raw[i];
    return out;
}

// Per-thread caching makes repeated frames cheap; called once at start.
void unwind_init(void) { unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD); }
