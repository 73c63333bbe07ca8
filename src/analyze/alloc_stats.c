// SPDX-License-Identifier: MIT
// alloc_stats.c - REC_ALLOC_STATS records gathered beside the live heap (alloc_stats.h).
#include <stdlib.h>
#include <string.h>

#include "alloc_stats.h"

static const char* const value_names[HL_AS_COUNT] = {
    [HL_AS_ARENA] = "arena",       [HL_AS_IN_USE] = "in_use",
    [HL_AS_FREE] = "free",         [HL_AS_FAST_FREE] = "fast_free",
    [HL_AS_MMAPPED] = "mmapped",   [HL_AS_MMAP_COUNT] = "mmap_count",
    [HL_AS_KEEPCOST] = "keepcost", [HL_AS_VM_RSS] = "vm_rss",
    [HL_AS_VM_HWM] = "vm_hwm",     [HL_AS_VM_SWAP] = "vm_swap",
    [HL_AS_RSS_ANON] = "rss_anon",
};

const char* as_value_name(int k) {
    return k >= 0 && k < HL_AS_COUNT ? value_names[k] : "?";
}

const char* as_source_name(int source) {
    switch (source) {
    case HL_AS_SRC_MALLINFO2:
        return "glibc mallinfo2";
    case HL_AS_SRC_MALLINFO:
        return "the allocator's mallinfo";
    default:
        return "none";
    }
}

static void arenas_of(as_arenas_t* a, const rd_record_t* r) {
    a->listed = r->nsegs <= HL_AS_ARENAS_MAX ? r->nsegs : HL_AS_ARENAS_MAX;
    if (a->listed) // a record without arenas carries no segment array at all
        memcpy(a->v, r->segs, (size_t)a->listed * HL_AS_ARENA_FIELDS * sizeof(uint64_t));
}

// Keeps one record in `stride`; when the array is full, every other one goes and the stride
// doubles, so the samples stay evenly spread over the whole run.
static void keep(as_series_t* s, const as_sample_t* x) {
    if (!s->stride)
        s->stride = 1;
    if ((s->records - 1) % s->stride != 0)
        return;
    if (!s->samples) {
        s->samples = malloc(AS_SAMPLES_MAX * sizeof *s->samples);
        if (!s->samples) {
            s->failed = 1;
            return;
        }
    }
    if (s->n == AS_SAMPLES_MAX) {
        for (size_t i = 0; i < AS_SAMPLES_MAX / 2; i++)
            s->samples[i] = s->samples[2 * i];
        s->n = AS_SAMPLES_MAX / 2;
        s->stride *= 2;
        if ((s->records - 1) % s->stride != 0)
            return;
    }
    s->samples[s->n++] = *x;
}

void as_note(as_series_t* s, const rd_record_t* r, uint64_t heap_bytes) {
    as_sample_t x = {.time_ns = r->time_ns, .heap_bytes = heap_bytes};
    x.available = (uint32_t)r->u[1];
    for (int k = 0; k < HL_AS_COUNT; k++)
        x.value[k] = x.available & (1u << k) ? r->u[2 + k] : 0;
    uint64_t arenas = r->u[2 + HL_AS_COUNT];
    x.arenas = arenas > UINT32_MAX ? UINT32_MAX : (uint32_t)arenas;
    s->records++;
    s->source = (int)r->u[0];
    s->available |= x.available;
    if (s->records == 1 || heap_bytes > s->peak.heap_bytes) {
        s->peak = x;
        arenas_of(&s->peak_arenas, r);
    }
    s->last = x;
    arenas_of(&s->last_arenas, r);
    keep(s, &x);
}

void as_free(as_series_t* s) {
    free(s->samples);
    memset(s, 0, sizeof *s);
}
