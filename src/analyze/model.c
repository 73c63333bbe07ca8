// SPDX-License-Identifier: MIT
// model.c - folds the record stream into the model (see model.h). A release names its block's
// size and stack (the reader resolves its site), so levels, per-stack and per-site numbers move
// with each record and no block is ever looked up.
#define _GNU_SOURCE
#include "model.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../common/compiler.h"
#include "leaks.h"

static const char* fn_names[HL_FN_COUNT] = {
    [HL_FN_MALLOC] = "malloc",
    [HL_FN_CALLOC] = "calloc",
    [HL_FN_REALLOC] = "realloc",
    [HL_FN_REALLOCARRAY] = "reallocarray",
    [HL_FN_POSIX_MEMALIGN] = "posix_memalign",
    [HL_FN_ALIGNED_ALLOC] = "aligned_alloc",
    [HL_FN_MEMALIGN] = "memalign",
    [HL_FN_VALLOC] = "valloc",
    [HL_FN_PVALLOC] = "pvalloc",
    [HL_FN_NEW] = "new",
    [HL_FN_NEW_ARRAY] = "new[]",
    [HL_FN_FREE] = "free",
    [HL_FN_DELETE] = "delete",
    [HL_FN_DELETE_ARRAY] = "delete[]",
    [HL_FN_MMAP] = "mmap",
    [HL_FN_MUNMAP] = "munmap",
    [HL_FN_MREMAP] = "mremap",
};

int hl_fn_counted(int fn) {
    return fn == HL_FN_REALLOC_OF_NULL        ? HL_FN_REALLOC
           : fn == HL_FN_REALLOCARRAY_OF_NULL ? HL_FN_REALLOCARRAY
                                              : fn;
}

const char* hl_fn_name(int fn) {
    fn = hl_fn_counted(fn);
    return fn > 0 && fn < HL_FN_COUNT && fn_names[fn] ? fn_names[fn] : "?";
}

const char* hl_leak_kind_name(int kind) {
    static const char* names[] = {"definitely_lost", "indirectly_lost", "possibly_lost",
                                  "still_reachable", "unscanned"};
    return kind >= 0 && kind < HL_NKINDS ? names[kind] : "?";
}

const char* hl_error_kind_name(int kind) {
    static const char* names[] = {"?",        "double_free",   "invalid_free",    "mismatched_free",
                                  "overflow", "realloc_freed", "underflow", "write_after_free",
                                  "dangling_pointer", "read_after_free",
                                  "read_overflow",    "invalid_access",  "read_underflow"};
    return kind > 0 && kind < HL_ERR_COUNT ? names[kind] : "?";
}

// A string of the trace, NUL-terminated, its first `cap` bytes when longer, followed by what was
// cut. *len (may be NULL) is the length kept, the note included.
static char* dup_capped(model_t* m, rd_str_t s, size_t cap, size_t* len) {
    char note[48] = "";
    size_t keep = s.len;
    if (s.len > cap) {
        keep = cap;
        snprintf(note, sizeof note, "...[%zu bytes cut]", s.len - cap);
        m->strings_cut++;
    }
    size_t nlen = strlen(note);
    char* p = malloc(keep + nlen + 1);
    if (p) {
        memcpy(p, s.ptr, keep);
        memcpy(p + keep, note, nlen + 1);
    }
    if (len)
        *len = p ? keep + nlen : 0;
    return p;
}

static const char* base_name(const char* p) {
    const char* b = strrchr(p, '/');
    return b ? b + 1 : p;
}

// p grown (doubling) to hold need items, *cap updated; p itself when it holds them already,
// NULL when memory runs out (p and *cap as they were).
static void* grow_to(void* p, size_t* cap, size_t need, size_t elem) {
    if (need <= *cap)
        return p;
    size_t ncap = *cap ? *cap : 16;
    while (ncap < need)
        ncap *= 2;
    void* fresh = realloc(p, ncap * elem);
    if (fresh)
        *cap = ncap;
    return fresh;
}

// A large array fills a page at a time, and each new page was a fault (a trace of 6 million
// distinct stacks: 130,000 faults in the HTML page's pass alone). When its used part enters a
// new stretch of MD_POPULATE_STEP, that stretch (as far as the capacity goes) is made present
// in one call; the kernel clears the pages as the faults would have.
#define MD_POPULATE_STEP ((size_t)2 << 20)
#define MD_PAGE ((uintptr_t)4096)
static void populate_ahead(char* base, size_t from, size_t to, size_t cap_bytes) {
    size_t step = (to - 1) / MD_POPULATE_STEP;
    if (cap_bytes < 2 * MD_POPULATE_STEP || (from && (from - 1) / MD_POPULATE_STEP == step))
        return;
    uintptr_t lo = ((uintptr_t)base + step * MD_POPULATE_STEP + MD_PAGE - 1) & ~(MD_PAGE - 1);
    size_t end = (step + 1) * MD_POPULATE_STEP < cap_bytes ? (step + 1) * MD_POPULATE_STEP
                                                          : cap_bytes;
    uintptr_t hi = ((uintptr_t)base + end) & ~(MD_PAGE - 1);
    if (hi > lo)
        madvise((void*)lo, hi - lo, MADV_POPULATE_WRITE); // a hint: without it, faults
}

void* md_grow_used(void* p, size_t* cap, size_t used, size_t need, size_t elem) {
    void* fresh = grow_to(p, cap, need, elem);
    if (fresh && need > used) {
        populate_ahead(fresh, used * elem, need * elem, *cap * elem);
        memset((char*)fresh + used * elem, 0, (need - used) * elem);
    }
    return fresh;
}

void* md_grow(void* p, size_t* cap, size_t need, size_t elem) {
    size_t old = *cap;
    void* fresh = grow_to(p, cap, need, elem);
    if (fresh && *cap > old)
        memset((char*)fresh + old * elem, 0, (*cap - old) * elem);
    return fresh;
}

// ---------------------------------------------------------------------------------------------
// Records
// ---------------------------------------------------------------------------------------------
static md_stack_t* stack_of(model_t* m, uint32_t id) {
    return id && id < m->nstacks ? &m->stacks[id] : NULL;
}

// A new stack id: its number, and room for it. 0 when memory runs out.
static HL_NOINLINE uint32_t stack_new(model_t* m, uint64_t trace_id) {
    uint32_t id = idmap_add(&m->stack_ids, trace_id);
    if (!id)
        return 0;
    if (id >= m->nstacks) {
        md_stack_t* fresh =
            md_grow_used(m->stacks, &m->stacks_cap, m->nstacks, (size_t)id + 1, sizeof *fresh);
        if (!fresh)
            return 0;
        m->stacks = fresh;
        m->nstacks = (size_t)id + 1;
    }
    return id;
}

void model_live_by_stack(const model_t* m, uint64_t* bytes, uint64_t* blocks) {
    for (size_t i = 1; i < m->nsites; i++) { // each site's level is at least 0 once loaded
        const md_site_t* s = &m->sites[i];
        if (s->stack >= m->nstacks)
            continue;
        bytes[s->stack] += (uint64_t)s->live * s->size;
        if (blocks)
            blocks[s->stack] += (uint64_t)s->live;
    }
}

uint32_t model_stack_ref(model_t* m, uint64_t trace_id) {
    if (!trace_id)
        return 0;
    uint32_t id = model_stack_number(m, trace_id);
    return hl_likely(id != 0) ? id : stack_new(m, trace_id);
}

// Site numbers come in order (format.h), so a new one is at most one past the last. Kept out
// of line: the ALLOC path then needs few registers.
static HL_NOINLINE md_site_t* site_new(model_t* m, uint64_t site, uint64_t size, uint64_t stack) {
    if (site == 0 || site > (1ull << 32))
        return NULL;
    md_site_t* fresh = md_grow_used(m->sites, &m->sites_cap, m->nsites, site + 1, sizeof *fresh);
    if (!fresh)
        return NULL;
    m->sites = fresh;
    m->sites[site].size = size;
    m->sites[site].stack = (uint32_t)stack;
    m->nsites = site + 1;
    return &m->sites[site];
}

static inline md_site_t* site_of(model_t* m, uint64_t site, uint64_t size, uint64_t stack) {
    return hl_likely(site < m->nsites) ? &m->sites[site] : site_new(m, site, size, stack);
}

// Levels are compared as signed: a FREE_EXPLICIT ahead of its ALLOC takes them below the truth
// for an instant, never to a huge number.
static void heap_add(model_t* m, uint64_t size, int64_t t) {
    m->heap_bytes += size;
    m->heap_blocks++;
    if ((int64_t)m->heap_bytes > (int64_t)m->peak_bytes) {
        m->peak_bytes = m->heap_bytes;
        m->peak_blocks = m->heap_blocks;
        m->peak_time_ns = t;
    }
}

// A new block of a site; `early` of its blocks were released before the site was named.
static void site_add(model_t* m, const rd_record_t* r, uint64_t site, uint64_t size,
                     uint64_t stack, uint64_t early) {
    md_site_t* st = site_of(m, site, size, stack);
    if (st)
        st->live += 1 - (int64_t)early;
    heap_add(m, size, r->time_ns);
}

static void on_alloc(model_t* m, const rd_record_t* r) {
    uint64_t size = r->u[0];
    uint32_t stack = model_stack_ref(m, r->u[1]);
    m->allocations++;
    m->bytes_allocated += size;
    if (r->fn < HL_FN_COUNT)
        m->calls[hl_fn_counted(r->fn)]++;
    md_stack_t* s = stack_of(m, stack);
    if (s)
        s->alloc_fn = r->fn;
    site_add(m, r, r->u[2], size, stack, r->u[3]);
    if (hl_unlikely(m->notes.ntagged))
        notes_on_alloc(&m->notes, r->thread, size);
}

static void on_free(model_t* m, const rd_record_t* r) {
    m->frees++;
    if (r->fn < HL_FN_COUNT && r->fn != HL_FN_REALLOC && r->fn != HL_FN_REALLOCARRAY)
        m->calls[r->fn]++;
    m->heap_bytes -= r->u[0];
    m->heap_blocks--;
    if (r->u[2] && r->u[2] < m->nsites)
        m->sites[r->u[2]].live--;
}

static void on_module(model_t* m, const rd_record_t* r) {
    md_module_t* mods = md_grow(m->mods, &m->mods_cap, m->nmods + 1, sizeof *mods);
    if (!mods)
        return;
    m->mods = mods;
    md_module_t* md = &m->mods[m->nmods++];
    memset(md, 0, sizeof *md);
    md->id = (uint32_t)r->u[0];
    md->bias = r->u[1];
    md->path = dup_capped(m, r->s[0], MD_PATH_MAX, NULL);
    if (md->path) {
        const char* base = base_name(md->path);
        md->name = dup_capped(m, (rd_str_t){base, strlen(base)}, MD_NAME_MAX, NULL);
    }
    // A longer build-id is kept short: then it matches no file, and no wrong names are shown.
    md->build_id_len = r->s[1].len < MD_BUILD_ID_MAX ? r->s[1].len : MD_BUILD_ID_MAX;
    md->build_id = malloc(md->build_id_len + 1);
    if (md->build_id)
        memcpy(md->build_id, r->s[1].ptr, md->build_id_len);
    md->nsegs = r->nsegs;
    md->segs = malloc(sizeof(*md->segs) * (r->nsegs + 1));
    if (md->segs)
        for (uint32_t i = 0; i < r->nsegs; i++)
            for (int k = 0; k < 3; k++)
                md->segs[i][k] = r->segs[i * 3 + k];
    md->is_alive = 1;
    md->sym_handle = -1;
    m->seen_lo = m->seen_hi = 0; // the segment may be another module's now
}

// The module of a frame for model_load_observed. Most new frames lie in the segment of the one
// before (a program's own code): only a frame outside it looks the modules up.
static void frame_seen(model_t* m, uint64_t ip) {
    if (ip >= m->seen_lo && ip < m->seen_hi)
        return;
    md_module_t* md = (md_module_t*)model_module_of(m, ip);
    if (!md)
        return;
    for (uint32_t s = 0; s < md->nsegs; s++) {
        uint64_t lo = md->bias + md->segs[s][0], hi = lo + md->segs[s][1];
        if (ip >= lo && ip < hi) {
            m->seen_lo = lo;
            m->seen_hi = hi;
        }
    }
    m->observer->module_seen(m->observer->module_arg, md);
}

// A node of the prefix tree, numbered as the trace defines it: the decoder made sure its parent's
// id is smaller, so the tree has no cycle whatever the numbers.
static void on_stack(model_t* m, const rd_record_t* r) {
    uint32_t id = model_stack_ref(m, r->u[0]);
    if (!id)
        return;
    // A parent the trace never defined gets its number here, which may move m->stacks.
    uint32_t parent = model_stack_ref(m, r->u[1]);
    m->stacks[id].parent = parent;
    m->stacks[id].ip = r->u[2];
    if (m->observer && m->observer->module_seen)
        frame_seen(m, r->u[2]);
}

uint32_t model_stack_ips(const model_t* m, uint32_t id, uint64_t* ips, uint32_t max) {
    if (id == 0 || id >= m->nstacks || !m->stacks[id].ip)
        return 0;
    uint32_t n = 0;
    for (uint32_t k = id; k && k < m->nstacks && n < max; k = m->stacks[k].parent)
        ips[n++] = m->stacks[k].ip;
    return n;
}

static void on_error(model_t* m, const rd_record_t* r) {
    md_error_t* fresh = md_grow(m->errors, &m->errors_cap, m->nerrors + 1, sizeof *fresh);
    if (!fresh)
        return;
    m->errors = fresh;
    md_error_t* e = &m->errors[m->nerrors++];
    e->kind = r->u[0] < HL_ERR_COUNT ? (int)r->u[0] : 0;
    e->has_change = 0;
    e->stack = model_stack_ref(m, r->u[2]);
    e->addr = r->u[3];
    e->fn = (int)r->u[4];
    e->has_block = r->u[5] != 0;
    e->block_size = r->u[6];
    e->alloc_stack = model_stack_ref(m, r->u[7]);
    e->alloc_fn = (int)r->u[8];
    e->release_stack = model_stack_ref(m, r->u[9]);
    e->time_ns = r->time_ns;
}

// Every record but ALLOC and FREE: a scan's verdicts end at the first other record.
static HL_NOINLINE void on_other(model_t* m, const rd_record_t* r) {
    if (hl_unlikely(m->run.is_open) && r->tag != REC_VERDICT)
        leaks_run_end(m);
    switch (r->tag) {
    case REC_INFO:
        m->has_info = 1;
        m->pid = r->u[0];
        m->ppid = r->u[1];
        m->start_realtime_ns = r->u[2];
        m->depth = r->u[3];
        m->guard = r->u[4];
        m->info_flags = r->u[5];
        free(m->exe);
        free(m->argv);
        m->exe = dup_capped(m, r->s[0], MD_PATH_MAX, NULL);
        m->argv = dup_capped(m, r->s[1], MD_ARGV_MAX, &m->argv_len);
        m->is_fork_child = r->u[6] != 0;
        break;
    case REC_MODULE:
        on_module(m, r);
        break;
    case REC_MODULE_GONE:
        for (size_t i = 0; i < m->nmods; i++)
            if (m->mods[i].id == r->u[0])
                m->mods[i].is_alive = 0;
        break;
    case REC_THREAD:
        m->threads_seen++;
        break;
    case REC_STACK:
        on_stack(m, r);
        break;
    case REC_MMAP:
        m->mmaps++;
        m->calls[HL_FN_MMAP]++;
        m->mapped_bytes += r->u[1];
        if (m->mapped_bytes > m->mapped_peak)
            m->mapped_peak = m->mapped_bytes;
        break;
    case REC_MUNMAP:
        m->munmaps++;
        m->calls[HL_FN_MUNMAP]++;
        m->mapped_bytes = m->mapped_bytes > r->u[1] ? m->mapped_bytes - r->u[1] : 0;
        break;
    case REC_SAMPLE:
        if (r->u[3] > m->rss_peak)
            m->rss_peak = r->u[3];
        break;
    case REC_ERROR:
        on_error(m, r);
        break;
    case REC_ERROR_CHANGE: // of the error just before it
        if (m->nerrors && !m->errors[m->nerrors - 1].has_change) {
            md_error_t* e = &m->errors[m->nerrors - 1];
            e->has_change = 1;
            e->change_offset = (int64_t)r->u[0];
            e->change_length = r->u[1];
            e->change_n = (uint32_t)r->u[2];
            for (uint32_t k = 0; k < e->change_n; k++) {
                e->seen[k] = (uint8_t)(r->u[3 + k / 8] >> (8 * (k % 8)));
                e->expected[k] = (uint8_t)(r->u[5 + k / 8] >> (8 * (k % 8)));
            }
        }
        break;
    case REC_INHERIT: // alive before the trace began: part of the level, not an allocation
        {
            uint32_t stack = model_stack_ref(m, r->u[2]);
            site_add(m, r, r->u[4], r->u[1], stack, r->u[5]);
            if (stack < m->nstacks && !m->stacks[stack].alloc_fn)
                m->stacks[stack].alloc_fn = r->fn;
        }
        break;
    case REC_SCAN:
        leaks_scan(m, r);
        break;
    case REC_VERDICT:
        leaks_verdict(m, r);
        break;
    case REC_END:
        m->has_end = 1;
        m->end_how = (int)r->u[0];
        m->end_value = r->u[1];
        m->end_time_ns = r->time_ns;
        free(m->exec_path);
        m->exec_path = NULL;
        break;
    case REC_EXEC:
        free(m->exec_path);
        m->exec_path = dup_capped(m, r->s[0], MD_PATH_MAX, NULL);
        break;
    case REC_ALLOC_STATS:
        as_note(&m->alloc_stats, r, (int64_t)m->heap_bytes > 0 ? m->heap_bytes : 0);
        break;
    case REC_NOTE:
        notes_on_record(&m->notes, r);
        if ((r->u[0] == HL_NOTE_IGNORE || r->u[0] == HL_NOTE_UNIGNORE) && r->u[1] &&
            r->u[1] < m->nsites)
            m->sites[r->u[1]].ignored += r->u[0] == HL_NOTE_IGNORE ? 1 : -1;
        break;
    default:
        break;
    }
}

// A heap event after EXEC: the exec failed and the image went on; its end is still to come.
static HL_NOINLINE void exec_failed(model_t* m) {
    free(m->exec_path);
    m->exec_path = NULL;
}

// ALLOC and FREE, nearly every record, go straight to their handlers.
static int on_record(const rd_record_t* r, void* arg) {
    model_t* m = arg;
    if (r->time_ns > m->last_time_ns)
        m->last_time_ns = r->time_ns;
    if (hl_unlikely(m->first_time_ns < 0) && r->time_ns > 0)
        m->first_time_ns = r->time_ns;
    if (hl_unlikely(m->exec_path) &&
        (r->tag == REC_ALLOC || r->tag == REC_FREE || r->tag == REC_MMAP || r->tag == REC_MUNMAP))
        exec_failed(m);
    if (hl_likely(r->tag == REC_ALLOC))
        on_alloc(m, r);
    else if (hl_likely(r->tag == REC_FREE))
        on_free(m, r);
    else
        on_other(m, r);
    return 0;
}

// Once read: what lives at the end. A level below zero can only be a FREE_EXPLICIT whose ALLOC
// the trace never got to (cut short): count it as nothing.
static void finish_levels(model_t* m) {
    if ((int64_t)m->heap_bytes < 0 || (int64_t)m->heap_blocks < 0)
        m->heap_bytes = m->heap_blocks = 0;
    for (size_t i = 1; i < m->nsites; i++)
        if (m->sites[i].live < 0)
            m->sites[i].live = 0;
}

int model_load(model_t* m, const char* path) {
    return model_load_observed(m, path, NULL);
}

static int on_record_observed(const rd_record_t* r, void* arg) {
    model_t* m = arg;
    on_record(r, m);
    return m->observer->record(r, m->observer->record_arg);
}

void model_begin(model_t* m, const model_observer_t* obs) {
    memset(m, 0, sizeof *m);
    m->first_time_ns = -1;
    m->observer = obs;
}

int model_read(model_t* m, rd_stream_t* s, unsigned max_chunks) {
    const model_observer_t* obs = m->observer;
    return rd_stream_read(s, obs && obs->record ? on_record_observed : on_record, m, &m->read,
                          max_chunks);
}

int model_load_observed(model_t* m, const char* path, const model_observer_t* obs) {
    model_begin(m, obs);
    int rc = rd_read_file(path, obs && obs->record ? on_record_observed : on_record, m, &m->read);
    return model_end(m, rc);
}

int model_end(model_t* m, int rc) {
    m->observer = NULL; // the caller's, for the reading only
    if (rc != 0)
        return rc;
    if (!m->has_info) {
        if (!m->read.message[0])
            snprintf(m->read.message, sizeof m->read.message, "trace holds no records");
        return -EINVAL;
    }
    finish_levels(m);
    if (leaks_finish(m) != 0) {
        snprintf(m->read.message, sizeof m->read.message, "out of memory");
        return -ENOMEM;
    }
    return 0;
}

// The agent writes END last, after every event and the scan; an image replaced by exec ends
// with EXEC, everything before it written. Without either, the process ended unseen.
const char* model_incomplete_reason(const model_t* m) {
    if (m->read.is_truncated || m->read.is_corrupt)
        return m->read.message;
    if (!m->has_end && !m->exec_path)
        return "the trace has no end: the process ended without heaplens seeing it (SIGKILL, "
               "or an exit system call made directly); its last ~10 ms of events may be "
               "missing, and no leak scan ran";
    return NULL;
}

int model_is_complete(const model_t* m) {
    return model_incomplete_reason(m) == NULL;
}

void model_free(model_t* m) {
    notes_free(&m->notes);
    as_free(&m->alloc_stats);
    for (size_t i = 0; i < m->nmods; i++) {
        free(m->mods[i].path);
        free(m->mods[i].name);
        free(m->mods[i].build_id);
        free(m->mods[i].segs);
    }
    free(m->mods);
    free(m->stacks);
    idmap_free(&m->stack_ids);
    free(m->sites);
    leaks_free(m);
    free(m->errors);
    free(m->exe);
    free(m->argv);
    free(m->exec_path);
    memset(m, 0, sizeof *m);
}

const md_site_t* model_site(const model_t* m, uint64_t site) {
    return site && site < m->nsites ? &m->sites[site] : NULL;
}

const md_module_t* model_module_of(const model_t* m, uint64_t ip) {
    const md_module_t* gone = NULL;
    for (size_t i = m->nmods; i-- > 0;) {
        const md_module_t* md = &m->mods[i];
        for (uint32_t s = 0; s < md->nsegs; s++) {
            uint64_t lo = md->bias + md->segs[s][0], hi = lo + md->segs[s][1];
            if (ip >= lo && ip < hi) {
                if (md->is_alive)
                    return md;
                if (!gone)
                    gone = md; // a dlclosed object: the last one that covered ip
            }
        }
    }
    return gone;
}
