// SPDX-License-Identifier: MIT
// gsites.c - --guard-sites: an allocation goes on a guard page only when its stack passes
// through a chosen function. The agent never sees the REGEX: heaplens run matches it against
// the symbol tables of the program and of its libraries (src/cli/gsites.c) and passes each
// module's function ranges, keyed by build-id, in guard_sites= (format in checkopts.h). Here a
// module's ranges become absolute when the loader maps it (modules.c: at start and after every
// dlopen), into fixed tables; an allocation that may go on a guard page has its stack unwound
// anyway, and its return addresses are looked up in them. Nothing here allocates, and the
// lookup takes no lock: entries are appended under the writer's lock (modules_refresh) and
// published by one release store of their count.
#define _GNU_SOURCE
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/checkopts.h"
#include "gsites.h"
#include "log.h"
#include "os.h"
#include "stacks.h"

// Modules with ranges loaded over the whole run (a dlclose'd one keeps its slot, emptied).
#define GSITES_MODULES 256

typedef struct range_s {
    uintptr_t lo, hi;
} range_t;

typedef struct loaded_s {
    uintptr_t lo, hi; // the extent of its ranges: most return addresses miss it at once
    uintptr_t bias, first_vaddr;
    uint32_t first;
    _Atomic uint32_t n; // 0 once the module is gone
} loaded_t;

int hl_gsites_on;
static char* spec; // the setting, in the agent's memory
static range_t ranges[HL_GSITES_MAX];
static uint32_t nranges;
static loaded_t loaded[GSITES_MODULES];
static _Atomic uint32_t nloaded;

int gsites_set(const char* value, size_t len) {
    char* copy = os_map(len + 1);
    if (!copy)
        return -1;
    memcpy(copy, value, len);
    copy[len] = 0;
    if (hl_gsites_check(copy) != 0)
        return -1;
    spec = copy;
    hl_gsites_on = 1;
    return 0;
}

// Is KEY this module: its build-id in hex, or its path?
static int key_is(const hl_gsites_entry_t* e, const uint8_t* bid, size_t bid_len,
                  const char* path) {
    if (e->key[0] == '/')
        return strlen(path) == e->key_len && !memcmp(path, e->key, e->key_len);
    if (!bid_len || e->key_len != bid_len * 2)
        return 0;
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < bid_len; i++)
        if (e->key[2 * i] != hex[bid[i] >> 4] || e->key[2 * i + 1] != hex[bid[i] & 15])
            return 0;
    return 1;
}

void gsites_module_loaded(uintptr_t bias, uintptr_t first_vaddr, const uint8_t* bid,
                          size_t bid_len, const char* path) {
    if (!hl_gsites_on || !spec || spec[0] == '-')
        return;
    uint32_t n = atomic_load_explicit(&nloaded, memory_order_relaxed);
    for (uint32_t k = 0; k < n; k++) // a fork's child reads the module list again
        if (loaded[k].bias == bias && loaded[k].first_vaddr == first_vaddr &&
            atomic_load_explicit(&loaded[k].n, memory_order_relaxed))
            return;
    char exe[1024];
    if (!path || !path[0]) {
        long len = syscall(SYS_readlink, "/proc/self/exe", exe, sizeof exe - 1);
        exe[len > 0 ? len : 0] = 0;
        path = exe;
    }
    const char* s = spec;
    hl_gsites_entry_t e;
    while (hl_gsites_entry(&s, &e) == 1) {
        if (!key_is(&e, bid, bid_len, path))
            continue;
        if (n >= GSITES_MODULES) {
            hl_log("guard_sites: more than %d modules with sites; %s left out", GSITES_MODULES,
                   path);
            return;
        }
        loaded_t* m = &loaded[n];
        m->lo = UINTPTR_MAX;
        m->hi = 0;
        m->bias = bias;
        m->first_vaddr = first_vaddr;
        m->first = nranges;
        uint64_t floor = 0, v, l;
        const char* q = e.ranges;
        while (hl_gsites_range(&q, e.end, &floor, &v, &l) == 1 && nranges < HL_GSITES_MAX) {
            range_t* r = &ranges[nranges++];
            r->lo = bias + (uintptr_t)v;
            r->hi = r->lo + (uintptr_t)l;
            if (r->lo < m->lo)
                m->lo = r->lo;
            if (r->hi > m->hi)
                m->hi = r->hi;
        }
        atomic_store_explicit(&m->n, nranges - m->first, memory_order_relaxed);
        atomic_store_explicit(&nloaded, n + 1, memory_order_release);
        return;
    }
}

void gsites_module_gone(uintptr_t bias, uintptr_t first_vaddr) {
    uint32_t n = atomic_load_explicit(&nloaded, memory_order_relaxed);
    for (uint32_t k = 0; k < n; k++)
        if (loaded[k].bias == bias && loaded[k].first_vaddr == first_vaddr)
            atomic_store_explicit(&loaded[k].n, 0, memory_order_relaxed);
}

// The range of m holding a, by bisection (a module's ranges are ascending and disjoint).
static int in_module(const loaded_t* m, uint32_t count, uintptr_t a) {
    const range_t* r = &ranges[m->first];
    uint32_t lo = 0, hi = count;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (a < r[mid].lo)
            hi = mid;
        else if (a >= r[mid].hi)
            lo = mid + 1;
        else
            return 1;
    }
    return 0;
}

int gsites_match(uint32_t stack) {
    uint32_t n = atomic_load_explicit(&nloaded, memory_order_acquire);
    uintptr_t ip;
    uint32_t parent;
    for (int d = 0; stack && d < HL_MAX_DEPTH && stack_node(stack, &ip, &parent) == 0;
         d++, stack = parent) {
        uintptr_t a = ip - 1; // a return address: its call is the byte before
        for (uint32_t k = 0; k < n; k++) {
            const loaded_t* m = &loaded[k];
            uint32_t count = atomic_load_explicit(&m->n, memory_order_relaxed);
            if (count && a - m->lo < m->hi - m->lo && in_module(m, count, a))
                return 1;
        }
    }
    return 0;
}
