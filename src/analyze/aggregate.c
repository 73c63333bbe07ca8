// SPDX-License-Identifier: MIT
// aggregate.c - the second pass (see aggregate.h). Blocks are tracked by id, as in model.c; the
// per-site bytes at the peak come from a lazy snapshot: each site remembers the peak epoch of
// its last change, so a new maximum costs O(1) instead of a copy of every site.
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

static int sort_metric;
static int cmp_sites(const void* pa, const void* pb) {
    const ag_site_t *x = *(const ag_site_t* const*)pa, *y = *(const ag_site_t* const*)pb;
    uint64_t vx = ag_site_metric(x, sort_metric), vy = ag_site_metric(y, sort_metric);
    if (vx != vy)
        return vx < vy ? 1 : -1;
    if (x->bytes != y->bytes)
        return x->bytes < y->bytes ? 1 : -1;
    return (x->stack > y->stack) - (x->stack < y->stack);
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
enum { BLK_IN_WINDOW = 2, BLK_KEPT = 4 };

typedef struct blk_s {
    uint64_t key;
    uint64_t addr;
    uint64_t size;
    uint32_t stack;
    uint8_t flags;
    uint8_t kind;
} blk_t;

typedef struct early_s {
    uint64_t key, thread;
    int64_t time_ns;
} early_t;

typedef struct pass_s {
    aggregate_t* a;
    model_t* m;
    report_ctx_t* ctx;
    regex_t* filter;    // --filter, compiled; NULL: every site is kept
    ag_site_t spare;    // stands in for a site that could not be made (out of memory)
    bs_t blocks; // live blocks (blk_t), by id
    uint64_t* seq; // ALLOC count per thread index
    size_t nseq;
    early_t* early;
    size_t nearly, early_cap;
    uint64_t heap, blocks_live, mapped, rss;
    uint64_t epoch;
    long cur; // last timeline bucket filled, -1: none
    int failed;
} pass_t;

static inline uint64_t key_of(uint64_t thread, uint64_t seq) { return bs_key(thread, seq); }

static ag_thread_t* thread_at(pass_t* p, uint64_t index) {
    aggregate_t* a = p->a;
    if (index >= (1u << 24))
        return NULL;
    if (index >= a->nthreads) {
        size_t cap = a->nthreads;
        ag_thread_t* fresh = md_grow(a->threads, &cap, index + 1, sizeof *fresh);
        if (!fresh) {
            p->failed = 1;
            return NULL;
        }
        for (size_t i = a->nthreads; i < cap; i++)
            fresh[i].index = (uint32_t)i;
        a->threads = fresh;
        a->nthreads = cap;
    }
    return &a->threads[index];
}

static uint64_t* seq_at(pass_t* p, uint64_t index) {
    if (index >= (1u << 24))
        return NULL;
    if (index >= p->nseq) {
        uint64_t* fresh = md_grow(p->seq, &p->nseq, index + 1, sizeof *fresh);
        if (!fresh) {
            p->failed = 1;
            return NULL;
        }
        p->seq = fresh;
    }
    return &p->seq[index];
}

static inline int in_window(const aggregate_t* a, int64_t t) {
    return (!a->opts.has_from || t >= a->opts.from_ns) && (!a->opts.has_to || t <= a->opts.to_ns);
}

// A site is made at its stack's first event: a trace's prefix tree has many more stacks (every
// caller of every caller) than stacks that allocate.
static HL_NOINLINE ag_site_t* site_new(pass_t* p, size_t id) {
    aggregate_t* a = p->a;
    if (a->nsites == a->sites_cap) {
        size_t cap = a->sites_cap ? a->sites_cap * 2 : 1024;
        ag_site_t* fresh = realloc(a->sites, cap * sizeof *fresh);
        if (!fresh) {
            p->failed = 1;
            return &p->spare;
        }
        a->sites = fresh;
        a->sites_cap = cap;
    }
    ag_site_t* s = &a->sites[a->nsites];
    memset(s, 0, sizeof *s);
    s->stack = (uint32_t)id;
    s->epoch = p->epoch;
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

static inline ag_site_t* site_of(pass_t* p, uint64_t stack) {
    aggregate_t* a = p->a;
    size_t id = stack < a->nstacks ? (size_t)stack : 0;
    uint32_t slot = a->site_slot[id];
    return hl_likely(slot != 0) ? &a->sites[slot - 1] : site_new(p, id);
}

const ag_site_t* ag_site_for(const aggregate_t* a, uint32_t stack) {
    if (!a->site_slot || stack >= a->nstacks || !a->site_slot[stack])
        return NULL;
    return &a->sites[a->site_slot[stack] - 1];
}

// Before a site's live numbers change: if a peak happened since its last change, the numbers
// it holds now are the ones it had at that peak.
static void site_touch(pass_t* p, ag_site_t* s) {
    if (s->epoch != p->epoch) {
        s->peak_bytes = s->live_bytes;
        s->peak_blocks = s->live_blocks;
        s->epoch = p->epoch;
    }
}

// Timeline: fill every bucket up to the one holding t with the level as it stands.
static void tl_advance(pass_t* p, int64_t t) {
    aggregate_t* a = p->a;
    if (!a->timeline || t < a->start_ns || t > a->end_ns)
        return;
    long idx = (long)((t - a->start_ns) / a->bucket_ns);
    while (p->cur < idx) {
        ag_point_t* pt = &a->timeline[++p->cur];
        pt->time_ns = a->start_ns + (int64_t)p->cur * a->bucket_ns;
        pt->heap_bytes = p->heap;
        pt->heap_blocks = p->blocks_live;
        pt->mapped_bytes = p->mapped;
        pt->rss_bytes = p->rss;
    }
}

static void tl_note(pass_t* p, int64_t t) {
    aggregate_t* a = p->a;
    if (!a->timeline || p->cur < 0 || t < a->start_ns || t > a->end_ns)
        return;
    ag_point_t* pt = &a->timeline[p->cur];
    if (p->heap > pt->heap_bytes) {
        pt->heap_bytes = p->heap;
        pt->heap_blocks = p->blocks_live;
    }
    if (p->mapped > pt->mapped_bytes)
        pt->mapped_bytes = p->mapped;
    if (p->rss > pt->rss_bytes)
        pt->rss_bytes = p->rss;
}

static void heap_up(pass_t* p, ag_site_t* s, uint64_t size, int64_t t) {
    site_touch(p, s);
    s->live_bytes += size;
    s->live_blocks++;
    p->heap += size;
    p->blocks_live++;
    if (in_window(p->a, t) && p->heap > p->a->peak_bytes) {
        p->a->peak_bytes = p->heap;
        p->a->peak_blocks = p->blocks_live;
        p->a->peak_time_ns = t;
        p->epoch++; // every site's current numbers are now "at the peak" until it changes
    }
}

static void heap_down(pass_t* p, ag_site_t* s, uint64_t size) {
    site_touch(p, s);
    s->live_bytes -= size < s->live_bytes ? size : s->live_bytes;
    s->live_blocks -= s->live_blocks ? 1 : 0;
    p->heap -= size < p->heap ? size : p->heap;
    p->blocks_live -= p->blocks_live ? 1 : 0;
}

// A release of block b by thread `thread` at t.
static void do_free(pass_t* p, blk_t* b, uint64_t thread, int64_t t) {
    aggregate_t* a = p->a;
    if (b->flags & BLK_KEPT) {
        ag_site_t* s = site_of(p, b->stack);
        tl_advance(p, t);
        heap_down(p, s, b->size);
        tl_note(p, t);
        if (in_window(a, t)) {
            uint64_t owner = b->key >> 40, oseq = b->key & ((1ull << 40) - 1);
            uint64_t* sq = seq_at(p, thread);
            int is_temp = (b->flags & BLK_IN_WINDOW) && owner == thread && sq && *sq == oseq;
            ag_thread_t* th = thread_at(p, thread);
            s->frees++;
            a->totals.frees++;
            a->totals.freed_bytes += b->size;
            if (th) {
                th->frees++;
                th->freed_bytes += b->size;
            }
            if (is_temp) {
                s->temporary++;
                s->temporary_bytes += b->size;
                a->totals.temporary++;
                a->totals.temporary_bytes += b->size;
                if (th)
                    th->temporary++;
            }
        }
    }
    bs_del(&p->blocks, b);
}

static int take_early(pass_t* p, uint64_t key, early_t* out) {
    for (size_t i = 0; i < p->nearly; i++) {
        if (p->early[i].key == key) {
            *out = p->early[i];
            p->early[i] = p->early[--p->nearly];
            return 1;
        }
    }
    return 0;
}

// The heap's address space at the moment the (unfiltered) heap first reaches its peak: every
// live block, taken once, in the same pass (the first pass told the peak's height).
static void snapshot_peak(pass_t* p) {
    aggregate_t* a = p->a;
    a->peak_map = malloc((p->blocks_live + 1) * sizeof *a->peak_map);
    if (!a->peak_map)
        return;
    size_t n = 0;
    const blk_t* b;
    for (bs_iter_t it = {0}; n <= p->blocks_live && (b = bs_next(&p->blocks, &it));) {
        if (b->flags & BLK_KEPT) {
            a->peak_map[n][0] = b->addr;
            a->peak_map[n][1] = b->size;
            n++;
        }
    }
    a->npeak_map = n;
}

static void on_alloc(pass_t* p, const rd_record_t* r) {
    aggregate_t* a = p->a;
    uint64_t thread = r->u[0], size = r->u[2], stack = r->u[3];
    uint64_t* sq = seq_at(p, thread);
    if (!sq)
        return;
    uint64_t key = key_of(thread, ++*sq);
    blk_t* b = bs_put(&p->blocks, key);
    if (!b) {
        p->failed = 1;
        return;
    }
    ag_site_t* s = site_of(p, stack);
    b->addr = r->u[1];
    b->size = size;
    b->stack = (uint32_t)(stack < a->nstacks ? stack : 0);
    b->kind = HL_KIND_UNSCANNED;
    int win = in_window(a, r->time_ns);
    if (win)
        b->flags |= BLK_IN_WINDOW;
    if (s->is_kept) {
        b->flags |= BLK_KEPT;
        tl_advance(p, r->time_ns);
        heap_up(p, s, size, r->time_ns);
        tl_note(p, r->time_ns);
        if (!a->is_filtered && !a->peak_map && p->heap == p->m->peak_bytes && p->heap)
            snapshot_peak(p);
        if (win) {
            s->allocations++;
            s->bytes += size;
            a->totals.allocations++;
            a->totals.bytes += size;
            int k = hist_bucket(size);
            a->hist[k].count++;
            a->hist[k].bytes += size;
            ag_thread_t* th = thread_at(p, thread);
            if (th) {
                th->allocations++;
                th->bytes += size;
            }
        }
    }
    early_t e;
    if (p->nearly && take_early(p, key, &e))
        do_free(p, b, e.thread, e.time_ns > r->time_ns ? e.time_ns : r->time_ns);
}

static void on_free(pass_t* p, const rd_record_t* r) {
    uint64_t key = key_of(r->u[1], r->u[2]);
    blk_t* b = bs_find(&p->blocks, key);
    if (b) {
        do_free(p, b, r->u[0], r->time_ns);
        return;
    }
    if (p->nearly >= (1u << 20))
        return; // a damaged trace, not threads drained out of order: stop remembering
    early_t* fresh = md_grow(p->early, &p->early_cap, p->nearly + 1, sizeof *fresh);
    if (!fresh) {
        p->failed = 1;
        return;
    }
    p->early = fresh;
    p->early[p->nearly++] = (early_t){.key = key, .thread = r->u[0], .time_ns = r->time_ns};
}

static void on_inherit(pass_t* p, const rd_record_t* r) {
    blk_t* b = bs_put(&p->blocks, key_of(r->u[0], r->u[1]));
    if (!b) {
        p->failed = 1;
        return;
    }
    uint64_t stack = r->u[4];
    ag_site_t* s = site_of(p, stack);
    b->addr = r->u[2];
    b->size = r->u[3];
    b->stack = (uint32_t)(stack < p->a->nstacks ? stack : 0);
    b->kind = HL_KIND_UNSCANNED;
    if (s->is_kept) {
        b->flags |= BLK_KEPT; // alive before the trace began: part of the level, not the window
        tl_advance(p, 0);
        heap_up(p, s, b->size, 0);
        tl_note(p, 0);
    }
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
            p->mapped += r->u[2];
        else
            p->mapped -= r->u[2] < p->mapped ? r->u[2] : p->mapped;
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

// What is still live: leaked, with the model's verdicts (its block table has the same ids).
static void finish_leaks(pass_t* p) {
    aggregate_t* a = p->a;
    model_t* m = p->m;
    const md_block_t* mb;
    for (bs_iter_t it = {0}; (mb = bs_next(&m->blocks, &it));) {
        blk_t* b = bs_find(&p->blocks, mb->key);
        if (b && mb->kind < HL_NKINDS)
            b->kind = mb->kind;
    }
    const blk_t* b;
    for (bs_iter_t it = {0}; (b = bs_next(&p->blocks, &it));) {
        if ((b->flags & (BLK_IN_WINDOW | BLK_KEPT)) != (BLK_IN_WINDOW | BLK_KEPT))
            continue;
        ag_site_t* s = site_of(p, b->stack);
        s->leaked_bytes += b->size;
        s->leaked_blocks++;
        s->leaked_kind_bytes[b->kind] += b->size;
        a->totals.leaked_bytes += b->size;
        a->totals.leaked_blocks++;
        a->totals.leaks[b->kind].bytes += b->size;
        a->totals.leaks[b->kind].blocks++;
    }
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
    uint64_t span = (uint64_t)(a->end_ns - a->start_ns);
    a->bucket_ns = (int64_t)(span / a->opts.max_buckets + 1);
    size_t nb = (size_t)(span / (uint64_t)a->bucket_ns) + 1;
    a->timeline = calloc(nb, sizeof *a->timeline);
    if (!a->timeline) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }

    pass_t p = {.a = a, .m = m, .ctx = c, .filter = o->filter ? &rx : NULL, .cur = -1};
    rd_result_t res;
    bs_init(&p.blocks, sizeof(blk_t));
    rc = rd_read_file(path, on_record, &p, &res);
    if (rc == 0 && p.failed)
        rc = -ENOMEM;
    if (rc != 0) {
        snprintf(err, errlen, "%s: %s", path, p.failed ? "out of memory" : res.message);
    } else {
        tl_advance(&p, a->end_ns);
        a->ntimeline = (size_t)(p.cur + 1);
        for (size_t i = 0; i < a->nsites; i++)
            site_touch(&p, &a->sites[i]); // the last peak's numbers for sites unchanged since
        finish_leaks(&p);
        for (size_t i = 0; i < a->nsites; i++)
            if (a->sites[i].is_kept && a->sites[i].allocations)
                a->totals.sites++;
        if (!a->peak_bytes && a->ntimeline)
            a->peak_time_ns = a->start_ns;
    }
    if (o->filter)
        regfree(&rx);
    bs_free(&p.blocks);
    free(p.seq);
    free(p.early);
    return rc;
}

void aggregate_free(aggregate_t* a) {
    free(a->site_slot);
    free(a->peak_map);
    free(a->timeline);
    free(a->sites);
    free(a->threads);
    memset(a, 0, sizeof *a);
}
