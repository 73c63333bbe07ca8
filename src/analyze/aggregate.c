// SPDX-License-Identifier: MIT
// aggregate.c - the second pass (see aggregate.h). Like the model it follows sizes and stacks,
// never blocks. The per-site bytes at the peak come from a lazy snapshot: each site remembers
// the peak epoch of its last change, so a new maximum costs O(1) instead of a copy of every
// site.
#define _GNU_SOURCE
#include "aggregate.h"

#include "../common/compiler.h"

#include <errno.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>

// ---------------------------------------------------------------------------------------------
// Small pieces
// ---------------------------------------------------------------------------------------------
int ag_parse_time(const char* s, int64_t* out_ns) {
    if (!s || !*s || *s == '-' || *s == '+')
        return -EINVAL;
    char* end;
    errno = 0;
    unsigned long long whole = strtoull(s, &end, 10);
    if (end == s || errno)
        return -EINVAL;
    double frac = 0;
    if (*end == '.') {
        char* fend;
        frac = strtod(end, &fend);
        if (fend == end + 1)
            return -EINVAL;
        end = fend;
    }
    double mult;
    if (!*end || !strcmp(end, "ns"))
        mult = 1;
    else if (!strcmp(end, "us"))
        mult = 1e3;
    else if (!strcmp(end, "ms"))
        mult = 1e6;
    else if (!strcmp(end, "s"))
        mult = 1e9;
    else
        return -EINVAL;
    double v = ((double)whole + frac) * mult;
    if (v > 9.2e18)
        return -EINVAL;
    *out_ns = mult == 1 ? (int64_t)whole : (int64_t)(v + 0.5);
    return 0;
}

static const char* metric_names[AG_METRIC_COUNT] = {"allocations", "bytes", "peak", "leaked",
                                                    "temporary"};

int ag_metric_parse(const char* s) {
    for (int i = 0; i < AG_METRIC_COUNT; i++)
        if (!strcmp(s, metric_names[i]))
            return i;
    return -1;
}

const char* ag_metric_name(int metric) {
    return metric >= 0 && metric < AG_METRIC_COUNT ? metric_names[metric] : "?";
}

uint64_t ag_site_metric(const ag_site_t* s, int metric) {
    switch (metric) {
    case AG_METRIC_ALLOCATIONS:
        return s->allocations;
    case AG_METRIC_BYTES:
        return s->bytes;
    case AG_METRIC_PEAK:
        return s->peak_bytes;
    case AG_METRIC_LEAKED:
        return s->leaked_bytes;
    case AG_METRIC_TEMPORARY:
        return s->temporary;
    default:
        return 0;
    }
}

// The order sites are ranked in by a metric: larger first, then more bytes, then by stack.
static inline int site_order(const ag_site_t* x, const ag_site_t* y, int metric) {
    uint64_t vx = ag_site_metric(x, metric), vy = ag_site_metric(y, metric);
    if (vx != vy)
        return vx < vy ? 1 : -1;
    if (x->bytes != y->bytes)
        return x->bytes < y->bytes ? 1 : -1;
    return (x->stack > y->stack) - (x->stack < y->stack);
}

static int sort_metric;
static int cmp_sites(const void* pa, const void* pb) {
    return site_order(*(const ag_site_t* const*)pa, *(const ag_site_t* const*)pb, sort_metric);
}

long ag_sorted_sites(const aggregate_t* a, int metric, const ag_site_t*** out) {
    const ag_site_t** v = calloc(a->nsites + 1, sizeof *v);
    if (!v)
        return -ENOMEM;
    long n = 0;
    for (size_t i = 0; i < a->nsites; i++)
        if (a->sites[i].is_kept && ag_site_metric(&a->sites[i], metric) > 0)
            v[n++] = &a->sites[i];
    sort_metric = metric;
    qsort(v, (size_t)n, sizeof *v, cmp_sites);
    *out = v;
    return n;
}

static inline int site_before(const ag_site_t* x, const ag_site_t* y, int metric) {
    return site_order(x, y, metric) < 0;
}

static void top_sift_down(const ag_site_t** h, size_t n, size_t i, int metric) {
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, w = i; // w: the worst of i and its children
        if (l < n && site_before(h[w], h[l], metric))
            w = l;
        if (r < n && site_before(h[w], h[r], metric))
            w = r;
        if (w == i)
            return;
        const ag_site_t* t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

// The best k by a bounded heap (worst of the k on top): n log k, not n log n, which counts when
// every one of millions of allocations has its own stack and a page wants the top 500.
// One metric's heap: the best k offered so far.
typedef struct top_s {
    const ag_site_t** h;
    size_t n;
    int metric;
} top_t;

static void top_offer(top_t* t, size_t k, const ag_site_t* s) {
    const ag_site_t** h = t->h;
    if (t->n < k) {
        h[t->n++] = s; // sift up
        for (size_t j = t->n - 1; j > 0 && site_before(h[(j - 1) / 2], h[j], t->metric);
             j = (j - 1) / 2) {
            const ag_site_t* x = h[j];
            h[j] = h[(j - 1) / 2];
            h[(j - 1) / 2] = x;
        }
    } else if (site_before(s, h[0], t->metric)) {
        h[0] = s;
        top_sift_down(h, t->n, 0, t->metric);
    }
}

int ag_top_sites(const aggregate_t* a, size_t k, const ag_site_t** out[AG_METRIC_COUNT],
                 long n[AG_METRIC_COUNT]) {
    top_t t[AG_METRIC_COUNT];
    for (int m = 0; m < AG_METRIC_COUNT; m++) {
        t[m] = (top_t){.h = calloc(k + 1, sizeof *t[m].h), .metric = m};
        if (!t[m].h) {
            while (m-- > 0)
                free(t[m].h);
            return -ENOMEM;
        }
    }
    // One scan for every metric: the sites of a trace with millions of call paths are hundreds
    // of MB, read once instead of once per metric.
    for (size_t i = 0; i < a->nsites && k > 0; i++) {
        const ag_site_t* s = &a->sites[i];
        if (!s->is_kept)
            continue;
        for (int m = 0; m < AG_METRIC_COUNT; m++)
            if (ag_site_metric(s, m) != 0)
                top_offer(&t[m], k, s);
    }
    for (int m = 0; m < AG_METRIC_COUNT; m++) {
        sort_metric = m;
        qsort(t[m].h, t[m].n, sizeof *t[m].h, cmp_sites);
        out[m] = t[m].h;
        n[m] = (long)t[m].n;
    }
    return 0;
}

void ag_hist_bounds(int k, uint64_t* lo, uint64_t* hi) {
    if (k <= 0) {
        *lo = 0;
        *hi = 1;
        return;
    }
    *lo = 1ull << (k - 1);
    *hi = k >= 64 ? UINT64_MAX : 1ull << k;
}

static int hist_bucket(uint64_t size) {
    return size ? 64 - __builtin_clzll(size) : 0;
}

// ---------------------------------------------------------------------------------------------
// The pass
// ---------------------------------------------------------------------------------------------
// The blocks of one allocation site (format.h) by when they were made, against the window.
// Which of a site's blocks a release takes, the trace cannot tell (they share size and stack):
// the pass takes the youngest, since most blocks die young. "Leaked in the window" is then
// exact whenever a site's blocks do not straddle the window's edges, and always without one.
typedef struct life_s {
    int64_t live;   // blocks live now
    int64_t inside; // of them, made inside the window
} life_t;

typedef struct pass_s {
    aggregate_t* a;
    model_t* m;
    report_ctx_t* ctx;
    regex_t* filter;    // --filter, compiled; NULL: every site is kept
    ag_site_t spare;    // stands in for a site that could not be made (out of memory)
    life_t* life;       // by site number
    size_t life_cap;
    size_t life_used; // life[0 .. life_used) zeroed and in use; the rest of life_cap untouched
    // Of a site's live blocks, those made after the window (by site number, as life): only a
    // window with an end has any, so only then is there room for them (the page's pass, over
    // the whole trace, has a site for every allocation of some traces).
    int64_t* after;
    size_t after_cap;
    idmap_t thread_ids; // thread index -> 1 + its place in a->threads
    size_t threads_cap;
    // Signed: a FREE_EXPLICIT may come an instant before its ALLOC. Moved with unsigned
    // arithmetic (level_add), so sizes no real heap reaches wrap instead of overflowing.
    int64_t heap, blocks_live;
    uint64_t mapped, rss;
    uint64_t epoch;
    long cur; // last timeline bucket filled, -1: none
    int failed;
} pass_t;

static inline uint64_t level(int64_t v) { return v > 0 ? (uint64_t)v : 0; }

static inline void level_add(int64_t* v, uint64_t by) {
    *v = (int64_t)((uint64_t)*v + by);
}
static inline void level_sub(int64_t* v, uint64_t by) {
    *v = (int64_t)((uint64_t)*v - by);
}

// The peak epoch as a site keeps it (ag_site_t.epoch: its low AG_EPOCH_BITS).
#define AG_EPOCH_MASK ((1ull << AG_EPOCH_BITS) - 1)
static inline uint32_t epoch_now(const pass_t* p) {
    return (uint32_t)(p->epoch & AG_EPOCH_MASK);
}

// Threads in the order they come (the decoder bounds their indices, not how sparse they are);
// sorted by index once the pass is over.
static HL_NOINLINE ag_thread_t* thread_new(pass_t* p, uint64_t index) {
    aggregate_t* a = p->a;
    uint32_t k = idmap_add(&p->thread_ids, index);
    ag_thread_t* fresh = k ? md_grow(a->threads, &p->threads_cap, k, sizeof *fresh) : NULL;
    if (!fresh) {
        p->failed = 1;
        return NULL;
    }
    a->threads = fresh;
    a->nthreads = k;
    a->threads[k - 1].index = (uint32_t)index;
    return &a->threads[k - 1];
}

static inline ag_thread_t* thread_at(pass_t* p, uint64_t index) {
    uint32_t k = idmap_find(&p->thread_ids, index);
    return hl_likely(k != 0) ? &p->a->threads[k - 1] : thread_new(p, index);
}

static int cmp_threads(const void* x, const void* y) {
    const ag_thread_t *a = x, *b = y;
    return (a->index > b->index) - (a->index < b->index);
}

const ag_thread_t* ag_thread_for(const aggregate_t* a, uint32_t index) {
    size_t lo = 0, hi = a->nthreads;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a->threads[mid].index < index)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < a->nthreads && a->threads[lo].index == index ? &a->threads[lo] : NULL;
}

static inline int in_window(const aggregate_t* a, int64_t t) {
    return (!a->opts.has_from || t >= a->opts.from_ns) && (!a->opts.has_to || t <= a->opts.to_ns);
}

// A site is made at its stack's first event: a trace's prefix tree has many more stacks (every
// caller of every caller) than stacks that allocate.
static HL_NOINLINE ag_site_t* site_new(pass_t* p, size_t id) {
    aggregate_t* a = p->a;
    ag_site_t* fresh = md_grow_used(a->sites, &a->sites_cap, a->nsites, a->nsites + 1,
                                    sizeof *fresh); // the new site zeroed
    if (!fresh) {
        p->failed = 1;
        return &p->spare;
    }
    a->sites = fresh;
    ag_site_t* s = &a->sites[a->nsites];
    s->stack = (uint32_t)id;
    s->epoch = epoch_now(p);
    s->is_kept = 1;
    if (p->filter) {
        const report_frame_t* fr;
        int n = report_stack(p->ctx, (uint32_t)id, &fr), keep = 0;
        for (int j = 0; j < n && !keep; j++)
            keep = fr[j].function && regexec(p->filter, fr[j].function, 0, NULL, 0) == 0;
        s->is_kept = keep;
    }
    a->site_slot[id] = (uint32_t)++a->nsites;
    return s;
}

// The site of a stack by its number (model_stack_number).
// A pass fed while the model reads: the stacks are numbered as they come, the table grows.
static HL_NOINLINE int slot_grow(pass_t* p, uint32_t stack) {
    aggregate_t* a = p->a;
    uint32_t* fresh =
        md_grow_used(a->site_slot, &a->site_slot_cap, a->nstacks, (size_t)stack + 1, sizeof *fresh);
    if (!fresh) {
        p->failed = 1;
        return 0;
    }
    a->site_slot = fresh;
    a->nstacks = (size_t)stack + 1;
    return 1;
}

static inline ag_site_t* site_of(pass_t* p, uint32_t stack) {
    aggregate_t* a = p->a;
    if (hl_unlikely(stack >= a->nstacks) && a->stream && !slot_grow(p, stack))
        return &p->spare;
    size_t id = stack < a->nstacks ? (size_t)stack : 0;
    uint32_t slot = a->site_slot[id];
    return hl_likely(slot != 0) ? &a->sites[slot - 1] : site_new(p, id);
}

const ag_site_t* ag_site_for(const aggregate_t* a, uint32_t stack) {
    if (!a->site_slot || stack >= a->nstacks || !a->site_slot[stack])
        return NULL;
    return &a->sites[a->site_slot[stack] - 1];
}

// A site's numbers now taken as its numbers at the last peak.
static void site_snapshot(pass_t* p, ag_site_t* s) {
    s->peak_bytes = level((int64_t)s->live_bytes);
    s->peak_blocks = level((int64_t)s->live_blocks);
    s->epoch = epoch_now(p);
}

// Before a site's live numbers change: if a peak happened since its last change, the numbers
// it holds now are the ones it had at that peak.
static void site_touch(pass_t* p, ag_site_t* s) {
    if (s->epoch != epoch_now(p))
        site_snapshot(p, s);
}

// A new peak: every site's current numbers are now "at the peak" until it changes. A site
// keeps the epoch's low AG_EPOCH_BITS only, so one left untouched for exactly 2^AG_EPOCH_BITS
// peaks would pass for fresh: when those bits come round to 0, every site takes the snapshot
// it would take at its next change (none changed since the peak), so none is ever that old.
static void epoch_advance(pass_t* p) {
    p->epoch++;
    if (hl_unlikely(epoch_now(p) == 0))
        for (size_t i = 0; i < p->a->nsites; i++)
            site_snapshot(p, &p->a->sites[i]);
}

// The live bytes of every site at each growth boundary the pass has gone past.
static void growth_advance(pass_t* p, int64_t t) {
    aggregate_t* a = p->a;
    while (a->growth_taken <= AG_GROWTH_WINDOWS) {
        int k = a->growth_taken;
        // span * k / AG_GROWTH_WINDOWS, without the product: a trace's times may span nearly
        // 2^63 ns (a corrupt one), and at stays within the window.
        uint64_t span = (uint64_t)(a->end_ns - a->growth_start_ns);
        int64_t at = a->growth_start_ns +
                     (int64_t)(span / AG_GROWTH_WINDOWS * (uint64_t)k +
                               span % AG_GROWTH_WINDOWS * (uint64_t)k / AG_GROWTH_WINDOWS);
        if (t < at && k < AG_GROWTH_WINDOWS)
            return;
        if (t <= at && k == AG_GROWTH_WINDOWS)
            return; // the end's numbers are taken after the pass
        uint64_t* live = a->nsites ? malloc(a->nsites * sizeof *live) : NULL;
        if (a->nsites && !live) {
            p->failed = 1;
            return;
        }
        for (size_t i = 0; i < a->nsites; i++)
            live[i] = (int64_t)a->sites[i].live_bytes > 0 ? a->sites[i].live_bytes : 0;
        a->growth_live[k] = live;
        a->growth_n[k] = a->nsites;
        a->growth_taken++;
    }
}

// A streamed pass past its last bucket: buckets twice as wide, each pair merged into one (the
// higher heap with its blocks, the higher mapping and RSS: the maxima of the wider bucket).
static void tl_widen(pass_t* p) {
    aggregate_t* a = p->a;
    for (long i = 0; 2 * i <= p->cur; i++) {
        ag_point_t x = a->timeline[2 * i];
        if (2 * i + 1 <= p->cur)
            ag_point_merge(&x, &a->timeline[2 * i + 1]);
        a->timeline[i] = x;
    }
    if (p->cur >= 0)
        p->cur /= 2;
    memset(&a->timeline[p->cur + 1], 0,
           (a->opts.max_buckets - (size_t)(p->cur + 1)) * sizeof *a->timeline);
    a->bucket_ns *= 2;
}

// Timeline: fill every bucket up to the one holding t with the level as it stands.
static void tl_advance(pass_t* p, int64_t t) {
    aggregate_t* a = p->a;
    if (a->opts.growth)
        growth_advance(p, t);
    if (!a->timeline || t < a->start_ns || t > a->end_ns)
        return;
    while (a->stream && (t - a->start_ns) / a->bucket_ns >= (int64_t)a->opts.max_buckets)
        tl_widen(p);
    long idx = (long)((t - a->start_ns) / a->bucket_ns);
    while (p->cur < idx) {
        ag_point_t* pt = &a->timeline[++p->cur];
        pt->time_ns = a->start_ns + (int64_t)p->cur * a->bucket_ns;
        pt->heap_bytes = level(p->heap);
        pt->heap_blocks = level(p->blocks_live);
        pt->mapped_bytes = p->mapped;
        pt->rss_bytes = p->rss;
    }
}

static void tl_note(pass_t* p, int64_t t) {
    aggregate_t* a = p->a;
    if (!a->timeline || p->cur < 0 || t < a->start_ns || t > a->end_ns)
        return;
    ag_point_t* pt = &a->timeline[p->cur];
    if (level(p->heap) > pt->heap_bytes) {
        pt->heap_bytes = level(p->heap);
        pt->heap_blocks = level(p->blocks_live);
    }
    if (p->mapped > pt->mapped_bytes)
        pt->mapped_bytes = p->mapped;
    if (p->rss > pt->rss_bytes)
        pt->rss_bytes = p->rss;
}

// Per-stack live numbers wrap below zero (unsigned) for the instant a FREE_EXPLICIT is ahead of
// its ALLOC, and come back; only their snapshots are clamped (site_touch).
static void heap_up(pass_t* p, ag_site_t* s, uint64_t size, int64_t t) {
    site_touch(p, s);
    s->live_bytes += size;
    s->live_blocks++;
    level_add(&p->heap, size);
    level_add(&p->blocks_live, 1);
    if (in_window(p->a, t) && p->heap > (int64_t)p->a->peak_bytes) {
        p->a->peak_bytes = (uint64_t)p->heap;
        p->a->peak_blocks = level(p->blocks_live);
        p->a->peak_time_ns = t;
        epoch_advance(p);
    }
}

static void heap_down(pass_t* p, ag_site_t* s, uint64_t size) {
    site_touch(p, s);
    s->live_bytes -= size;
    s->live_blocks--;
    level_sub(&p->heap, size);
    level_sub(&p->blocks_live, 1);
}

static HL_NOINLINE life_t* life_new(pass_t* p, uint64_t site) {
    if (site == 0 || site > (1ull << 32))
        return NULL;
    // Sites are numbered as they come: only the entries reached are zeroed, so a doubling does
    // not touch (and make the kernel clear) the half no site has reached.
    life_t* fresh = md_grow_used(p->life, &p->life_cap, p->life_used, site + 1, sizeof *fresh);
    if (fresh)
        p->life = fresh;
    if (fresh && p->a->opts.has_to) {
        int64_t* after =
            md_grow_used(p->after, &p->after_cap, p->life_used, site + 1, sizeof *after);
        if (after)
            p->after = after;
        else
            fresh = NULL;
    }
    if (!fresh) {
        p->failed = 1;
        return NULL;
    }
    p->life_used = site + 1;
    return &p->life[site];
}

static inline life_t* life_at(pass_t* p, uint64_t site) {
    if (hl_likely(site && site < p->life_used))
        return &p->life[site];
    return site ? life_new(p, site) : NULL;
}

static void life_release(pass_t* p, uint64_t site, life_t* l) {
    l->live--;
    if (p->after && p->after[site] > 0)
        p->after[site]--;
    else if (l->inside > 0)
        l->inside--;
}

// A new block of a site at t (INHERIT: before the trace, never inside a window), and the
// releases of its site that came before it was named (reader.h: early).
static void life_add(pass_t* p, uint64_t site, int64_t t, int is_inherited, uint64_t early) {
    const aggregate_t* a = p->a;
    life_t* l = life_at(p, site);
    if (!l)
        return;
    l->live++;
    if (!is_inherited && in_window(a, t))
        l->inside++;
    else if (!is_inherited && a->opts.has_to && t > a->opts.to_ns)
        p->after[site]++; // life_at made room for it: has_to
    for (uint64_t i = 0; i < early && l->live > 0; i++)
        life_release(p, site, l);
}

static void on_alloc(pass_t* p, const rd_record_t* r) {
    aggregate_t* a = p->a;
    uint64_t size = r->u[0];
    int64_t t = r->time_ns;
    ag_site_t* s = site_of(p, model_stack_number(p->m, r->u[1]));
    life_add(p, r->u[2], t, 0, r->u[3]);
    ag_thread_t* th = thread_at(p, r->thread);
    if (th)
        th->last_alloc_ns = t;
    if (!s->is_kept)
        return;
    tl_advance(p, t);
    heap_up(p, s, size, t);
    tl_note(p, t);
    if (!in_window(a, t))
        return;
    s->allocations++;
    s->bytes += size;
    a->totals.allocations++;
    a->totals.bytes += size;
    int k = hist_bucket(size);
    a->hist[k].count++;
    a->hist[k].bytes += size;
    if (th) {
        th->allocations++;
        th->bytes += size;
    }
}

static void on_free(pass_t* p, const rd_record_t* r) {
    aggregate_t* a = p->a;
    uint64_t size = r->u[0];
    int64_t t = r->time_ns;
    ag_site_t* s = site_of(p, model_stack_number(p->m, r->u[1]));
    life_t* l = r->u[2] ? life_at(p, r->u[2]) : NULL;
    if (l)
        life_release(p, r->u[2], l);
    if (!s->is_kept)
        return;
    tl_advance(p, t);
    heap_down(p, s, size);
    tl_note(p, t);
    if (!in_window(a, t))
        return;
    ag_thread_t* th = thread_at(p, r->thread);
    s->frees++;
    a->totals.frees++;
    a->totals.freed_bytes += size;
    if (th) {
        th->frees++;
        th->freed_bytes += size;
    }
    // A temporary's block was its thread's latest allocation: that ALLOC's time tells whether
    // it was made inside the window too.
    if (r->is_temporary && (!th || in_window(a, th->last_alloc_ns))) {
        s->temporary++;
        s->temporary_bytes += size;
        a->totals.temporary++;
        a->totals.temporary_bytes += size;
        if (th)
            th->temporary++;
    }
}

static void on_inherit(pass_t* p, const rd_record_t* r) {
    uint64_t size = r->u[1];
    ag_site_t* s = site_of(p, model_stack_number(p->m, r->u[2]));
    life_add(p, r->u[4], 0, 1, r->u[5]);
    if (s->is_kept) { // alive before the trace began: part of the level, not the window
        tl_advance(p, 0);
        heap_up(p, s, size, 0);
        tl_note(p, 0);
    }
}

// The address map of the last scan: its verdicts, each a block with its address.
static void on_verdict(pass_t* p, const rd_record_t* r) {
    aggregate_t* a = p->a;
    if (r->u[0] >= HL_LEAK_COUNT)
        return;
    a->exit_map_total++;
    if (a->nexit_map >= AG_MAP_MAX)
        return;
    ag_block_t* fresh = md_grow(a->exit_map, &a->exit_map_cap, a->nexit_map + 1, sizeof *fresh);
    if (!fresh) {
        p->failed = 1;
        return;
    }
    a->exit_map = fresh;
    a->exit_map[a->nexit_map++] = (ag_block_t){.addr = r->u[1], .size = r->u[2],
                                               .kind = (int)r->u[0]};
}

static int on_record(const rd_record_t* r, void* arg) {
    pass_t* p = arg;
    aggregate_t* a = p->a;
    switch (r->tag) {
    case REC_ALLOC:
        on_alloc(p, r);
        break;
    case REC_FREE:
        on_free(p, r);
        break;
    case REC_INHERIT:
        on_inherit(p, r);
        break;
    case REC_THREAD: {
        ag_thread_t* th = thread_at(p, r->u[0]);
        if (th)
            th->tid = (uint32_t)r->u[1];
        break;
    }
    case REC_MMAP:
    case REC_MUNMAP:
        tl_advance(p, r->time_ns);
        if (r->tag == REC_MMAP)
            p->mapped += r->u[1];
        else
            p->mapped -= r->u[1] < p->mapped ? r->u[1] : p->mapped;
        if (in_window(a, r->time_ns) && p->mapped > a->mapped_peak)
            a->mapped_peak = p->mapped;
        tl_note(p, r->time_ns);
        break;
    case REC_SAMPLE:
        tl_advance(p, r->time_ns);
        p->rss = r->u[3];
        if (in_window(a, r->time_ns) && p->rss > a->rss_peak)
            a->rss_peak = p->rss;
        tl_note(p, r->time_ns);
        break;
    case REC_SCAN:
        a->has_exit_map = 1;
        a->nexit_map = 0; // a later scan supersedes an earlier one
        a->exit_map_total = 0;
        break;
    case REC_VERDICT:
        on_verdict(p, r);
        break;
    default:
        break;
    }
    return p->failed;
}

// --filter: a site is kept when any of its symbolized function names matches (site_new).
static int compile_filter(regex_t* rx, const char* re, char* err, size_t errlen) {
    int rc = regcomp(rx, re, REG_EXTENDED | REG_NOSUB);
    if (rc != 0) {
        char why[128];
        regerror(rc, rx, why, sizeof why);
        snprintf(err, errlen, "--filter '%s': %s", re, why);
        return -EINVAL;
    }
    return 0;
}

int ag_filter_check(const char* re, char* err, size_t errlen) {
    regex_t rx;
    int rc = compile_filter(&rx, re, err, errlen);
    if (rc == 0)
        regfree(&rx);
    return rc;
}

// n of total blocks spread over the kinds in proportion to blocks[] (the rest one by one).
static void split_kinds(const uint64_t blocks[HL_NKINDS], uint64_t total, uint64_t n,
                        uint64_t out[HL_NKINDS]) {
    uint64_t given = 0;
    for (int k = 0; k < HL_NKINDS; k++) {
        out[k] = n == total ? blocks[k] : (uint64_t)((unsigned __int128)blocks[k] * n / total);
        given += out[k];
    }
    for (int k = HL_NKINDS - 1; k >= 0 && given < n; k--) {
        uint64_t room = blocks[k] - out[k], add = room < n - given ? room : n - given;
        out[k] += add;
        given += add;
    }
}

// What is live at the end and was made in the window: leaked, of the kinds the model's last
// scan gave the site's blocks (model_site_kinds). With a window that cuts through a site's
// life, which of its blocks those are is life_t's estimate, their kinds in proportion.
static void finish_leaks(pass_t* p) {
    aggregate_t* a = p->a;
    const model_t* m = p->m;
    for (size_t i = 1; i < m->nsites; i++) {
        const md_site_t* ms = &m->sites[i];
        uint64_t kinds[HL_NKINDS];
        uint64_t total = model_site_kinds(ms, kinds);
        const life_t* l = i < p->life_used ? &p->life[i] : NULL;
        uint64_t inside = l ? level(l->inside) : 0, n = inside < total ? inside : total;
        if (!n)
            continue;
        ag_site_t* s = site_of(p, ms->stack);
        if (!s->is_kept)
            continue;
        uint64_t part[HL_NKINDS];
        split_kinds(kinds, total, n, part);
        for (int k = 0; k < HL_NKINDS; k++) {
            a->totals.leaks[k].bytes += part[k] * ms->size;
            a->totals.leaks[k].blocks += part[k];
        }
        s->leaked_bytes += n * ms->size;
        s->leaked_blocks += n;
        a->totals.leaked_bytes += n * ms->size;
        a->totals.leaked_blocks += n;
    }
}

// After the last record: the timeline up to the end, the sites' numbers at the last peak, the
// leaks the model's scan gave them, the totals.
static void finish(pass_t* p) {
    aggregate_t* a = p->a;
    tl_advance(p, a->end_ns);
    if (a->opts.growth) {
        while (a->growth_taken < AG_GROWTH_WINDOWS)
            growth_advance(p, a->end_ns);
        growth_advance(p, a->end_ns + 1);
    }
    a->ntimeline = (size_t)(p->cur + 1);
    for (size_t i = 0; i < a->nsites; i++) {
        ag_site_t* s = &a->sites[i];
        site_touch(p, s); // the last peak's numbers for sites unchanged since
        s->leaked_bytes = s->leaked_blocks = 0; // the live numbers' room, for finish_leaks
        if (s->is_kept && s->allocations)
            a->totals.sites++;
    }
    finish_leaks(p);
    if (a->nthreads)
        qsort(a->threads, a->nthreads, sizeof *a->threads, cmp_threads);
    if (!a->peak_bytes && a->ntimeline)
        a->peak_time_ns = a->start_ns;
}

int aggregate_build(aggregate_t* a, report_ctx_t* c, const char* path, const ag_opts_t* o,
                    char* err, size_t errlen) {
    model_t* m = report_model(c);
    memset(a, 0, sizeof *a);
    a->opts = *o;
    if (!a->opts.max_buckets)
        a->opts.max_buckets = AG_DEFAULT_BUCKETS;
    err[0] = 0;
    a->nstacks = m->nstacks ? m->nstacks : 1;
    a->site_slot = calloc(a->nstacks, sizeof *a->site_slot);
    if (!a->site_slot) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    regex_t rx;
    int rc = 0;
    if (o->filter) {
        rc = compile_filter(&rx, o->filter, err, errlen);
        if (rc != 0)
            return rc;
        a->is_filtered = 1;
    }

    int64_t last = m->has_end && m->end_time_ns > m->last_time_ns ? m->end_time_ns
                                                                     : m->last_time_ns;
    a->start_ns = o->has_from ? o->from_ns : 0;
    a->end_ns = o->has_to ? o->to_ns : last;
    if (a->end_ns < a->start_ns)
        a->end_ns = a->start_ns;
    // A trace younger than the window grows from its first record, not from nothing before it.
    a->growth_start_ns = m->first_time_ns > a->start_ns && m->first_time_ns < a->end_ns
                             ? m->first_time_ns
                             : a->start_ns;
    uint64_t span = (uint64_t)(a->end_ns - a->start_ns);
    a->bucket_ns = (int64_t)(span / a->opts.max_buckets + 1);
    size_t nb = (size_t)(span / (uint64_t)a->bucket_ns) + 1;
    a->timeline = calloc(nb, sizeof *a->timeline);
    if (!a->timeline) {
        if (o->filter)
            regfree(&rx);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }

    pass_t p = {.a = a, .m = m, .ctx = c, .filter = o->filter ? &rx : NULL, .cur = -1};
    rd_result_t res;
    rc = rd_read_file(path, on_record, &p, &res);
    if (rc == 0 && p.failed)
        rc = -ENOMEM;
    if (rc != 0)
        snprintf(err, errlen, "%s: %s", path, p.failed ? "out of memory" : res.message);
    else
        finish(&p);
    if (o->filter)
        regfree(&rx);
    free(p.life);
    free(p.after);
    idmap_free(&p.thread_ids);
    return rc;
}

int aggregate_begin(aggregate_t* a, model_t* m, size_t max_buckets) {
    memset(a, 0, sizeof *a);
    a->opts.max_buckets = max_buckets ? max_buckets : AG_DEFAULT_BUCKETS;
    a->end_ns = INT64_MAX; // known at the end
    a->bucket_ns = AG_STREAM_BUCKET_NS;
    a->timeline = calloc(a->opts.max_buckets, sizeof *a->timeline);
    pass_t* p = calloc(1, sizeof *p);
    if (!a->timeline || !p) {
        free(p);
        aggregate_free(a);
        return -ENOMEM;
    }
    *p = (pass_t){.a = a, .m = m, .cur = -1};
    a->stream = p;
    return 0;
}

int aggregate_record(const rd_record_t* r, void* arg) {
    aggregate_t* a = arg;
    return on_record(r, a->stream);
}

int aggregate_end(aggregate_t* a, char* err, size_t errlen) {
    pass_t* p = a->stream;
    if (!p)
        return -EINVAL;
    int rc = p->failed ? -ENOMEM : 0;
    if (rc == 0) {
        const model_t* m = p->m;
        a->end_ns = m->has_end && m->end_time_ns > m->last_time_ns ? m->end_time_ns
                                                                     : m->last_time_ns;
        if (a->end_ns < 0)
            a->end_ns = 0;
        finish(p);
    } else {
        snprintf(err, errlen, "out of memory");
    }
    free(p->life);
    free(p->after);
    idmap_free(&p->thread_ids);
    free(p);
    a->stream = NULL;
    return rc;
}

void aggregate_free(aggregate_t* a) {
    if (a->stream) {
        free(a->stream->life);
        free(a->stream->after);
        idmap_free(&a->stream->thread_ids);
        free(a->stream);
    }
    for (int k = 0; k <= AG_GROWTH_WINDOWS; k++)
        free(a->growth_live[k]);
    free(a->site_slot);
    free(a->exit_map);
    free(a->timeline);
    free(a->sites);
    free(a->threads);
    memset(a, 0, sizeof *a);
}

static int cmp_growth(const void* x, const void* y) {
    const ag_growth_t *a = x, *b = y;
    return (a->bytes_per_s < b->bytes_per_s) - (a->bytes_per_s > b->bytes_per_s);
}

long ag_growing_sites(const aggregate_t* a, double min_rate, ag_growth_t** out) {
    *out = NULL;
    if (a->growth_taken <= AG_GROWTH_WINDOWS)
        return 0;
    ag_growth_t* v = a->nsites ? malloc(a->nsites * sizeof *v) : NULL;
    if (a->nsites && !v)
        return -1;
    double seconds = (double)(a->end_ns - a->growth_start_ns) / 1e9;
    long n = 0;
    for (size_t i = 0; i < a->nsites; i++) {
        if (!a->sites[i].is_kept)
            continue;
        ag_growth_t g = {.site = &a->sites[i]};
        int rises = 1;
        for (int k = 0; k <= AG_GROWTH_WINDOWS; k++) {
            g.live[k] = i < a->growth_n[k] ? a->growth_live[k][i] : 0;
            if (k > 0 && g.live[k] <= g.live[k - 1])
                rises = 0;
        }
        if (!rises || seconds <= 0)
            continue;
        g.bytes_per_s = (double)(g.live[AG_GROWTH_WINDOWS] - g.live[0]) / seconds;
        if (g.bytes_per_s >= min_rate)
            v[n++] = g;
    }
    if (n > 1)
        qsort(v, (size_t)n, sizeof *v, cmp_growth);
    *out = v;
    return n;
}
