// SPDX-License-Identifier: MIT
// model.c - folds the record stream into the model (see model.h). Blocks are matched by their
// id (thread, n-th ALLOC of that thread), never by address, so reuse of an address across
// threads cannot confuse a free with the wrong allocation.
#define _GNU_SOURCE
#include "model.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

const char* hl_fn_name(int fn) {
    return fn > 0 && fn < HL_FN_COUNT && fn_names[fn] ? fn_names[fn] : "?";
}

const char* hl_leak_kind_name(int kind) {
    static const char* names[] = {"definitely_lost", "indirectly_lost", "possibly_lost",
                                  "still_reachable", "unscanned"};
    return kind >= 0 && kind < HL_NKINDS ? names[kind] : "?";
}

const char* hl_error_kind_name(int kind) {
    static const char* names[] = {"?", "double_free", "invalid_free", "mismatched_free",
                                  "overflow", "realloc_freed"};
    return kind > 0 && kind < HL_ERR_COUNT ? names[kind] : "?";
}

static char* dup_str(rd_str_t s) {
    char* p = malloc(s.len + 1);
    if (p) {
        memcpy(p, s.ptr, s.len);
        p[s.len] = 0;
    }
    return p;
}

void* md_grow(void* p, size_t* cap, size_t need, size_t elem) {
    if (need <= *cap)
        return p;
    size_t ncap = *cap ? *cap : 16;
    while (ncap < need)
        ncap *= 2;
    void* fresh = realloc(p, ncap * elem);
    if (!fresh)
        return NULL;
    memset((char*)fresh + *cap * elem, 0, (ncap - *cap) * elem);
    *cap = ncap;
    return fresh;
}

// ---------------------------------------------------------------------------------------------
// Live blocks (blocks.h)
// ---------------------------------------------------------------------------------------------
static inline uint64_t block_key(uint64_t thread, uint64_t seq) { return bs_key(thread, seq); }
static md_block_t* block_put(model_t* m, uint64_t key) { return bs_put(&m->blocks, key); }
static md_block_t* block_find(model_t* m, uint64_t key) { return bs_find(&m->blocks, key); }

// ---------------------------------------------------------------------------------------------
// Records
// ---------------------------------------------------------------------------------------------
static md_stack_t* stack_of(model_t* m, uint64_t id) {
    return id < m->nstacks ? &m->stacks[id] : NULL;
}

static void heap_add(model_t* m, uint64_t size, int64_t t) {
    m->heap_bytes += size;
    m->heap_blocks++;
    if (m->heap_bytes > m->peak_bytes) {
        m->peak_bytes = m->heap_bytes;
        m->peak_blocks = m->heap_blocks;
        m->peak_time_ns = t;
    }
}

static void release(model_t* m, md_block_t* b) {
    m->heap_bytes -= b->size;
    m->heap_blocks--;
    md_stack_t* s = stack_of(m, b->stack);
    if (s) {
        s->live_blocks--;
        s->live_bytes -= b->size;
    }
    bs_del(&m->blocks, b);
}

static int take_early_free(model_t* m, uint64_t key) {
    for (size_t i = 0; i < m->nearly; i++) {
        if (m->early_frees[i] == key) {
            m->early_frees[i] = m->early_frees[--m->nearly];
            return 1;
        }
    }
    return 0;
}

static md_block_t* add_block(model_t* m, uint64_t key, uint64_t addr, uint64_t size,
                             uint64_t stack, uint64_t fn, int64_t t) {
    md_block_t* b = block_put(m, key);
    if (!b)
        return NULL;
    b->addr = addr;
    b->size = size;
    b->stack = (uint32_t)stack;
    b->fn = (uint8_t)fn;
    b->kind = HL_KIND_UNSCANNED;
    heap_add(m, size, t);
    md_stack_t* s = stack_of(m, stack);
    if (s) {
        s->live_blocks++;
        s->live_bytes += size;
    }
    return b;
}

static void on_alloc(model_t* m, const rd_record_t* r) {
    uint64_t thread = r->u[0];
    if (thread >= m->nthreads) {
        size_t cap = m->nthreads;
        uint64_t* fresh = md_grow(m->thread_allocs, &cap, thread + 1, sizeof(uint64_t));
        if (!fresh)
            return;
        m->thread_allocs = fresh;
        cap = m->nthreads;
        uint32_t* tids = md_grow(m->thread_tids, &cap, thread + 1, sizeof(uint32_t));
        if (!tids)
            return;
        m->thread_tids = tids;
        m->nthreads = cap;
    }
    uint64_t key = block_key(thread, ++m->thread_allocs[thread]);
    uint64_t size = r->u[2], stack = r->u[3], fn = r->u[4];
    m->allocations++;
    m->bytes_allocated += size;
    if (fn < HL_FN_COUNT)
        m->calls[fn]++;
    md_stack_t* s = stack_of(m, stack);
    if (s) {
        s->allocations++;
        s->bytes += size;
    }
    md_block_t* b = add_block(m, key, r->u[1], size, stack, fn, r->time_ns);
    if (b && m->nearly && take_early_free(m, key))
        release(m, b);
}

static void on_free(model_t* m, const rd_record_t* r) {
    m->frees++;
    if (r->u[3] < HL_FN_COUNT && r->u[3] != HL_FN_REALLOC && r->u[3] != HL_FN_REALLOCARRAY)
        m->calls[r->u[3]]++;
    uint64_t key = block_key(r->u[1], r->u[2]);
    md_block_t* b = block_find(m, key);
    if (b) {
        release(m, b);
        return;
    }
    uint64_t* fresh = md_grow(m->early_frees, &m->early_cap, m->nearly + 1, sizeof(uint64_t));
    if (fresh) {
        m->early_frees = fresh;
        m->early_frees[m->nearly++] = key;
    }
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
    md->path = dup_str(r->s[0]);
    md->build_id_len = r->s[1].len;
    md->build_id = malloc(r->s[1].len + 1);
    if (md->build_id)
        memcpy(md->build_id, r->s[1].ptr, r->s[1].len);
    md->nsegs = r->nsegs;
    md->segs = malloc(sizeof(*md->segs) * (r->nsegs + 1));
    if (md->segs)
        for (uint32_t i = 0; i < r->nsegs; i++)
            for (int k = 0; k < 3; k++)
                md->segs[i][k] = r->segs[i * 3 + k];
    md->is_alive = 1;
    md->sym_handle = -1;
}

static void on_stack(model_t* m, const rd_record_t* r) {
    uint64_t id = r->u[0];
    if (id >= 1u << 26 || r->u[1] >= id)
        return; // a parent always has a smaller id: anything else is damage
    if (id >= m->nstacks) {
        size_t cap = m->nstacks;
        md_stack_t* fresh = md_grow(m->stacks, &cap, id + 1, sizeof *fresh);
        if (!fresh)
            return;
        m->stacks = fresh;
        m->nstacks = cap;
    }
    md_stack_t* s = &m->stacks[id];
    s->parent = (uint32_t)r->u[1];
    s->ip = r->u[2];
}

const md_stack_t* model_stack(model_t* m, uint32_t id) {
    if (id == 0 || id >= m->nstacks || !m->stacks[id].ip)
        return NULL;
    md_stack_t* s = &m->stacks[id];
    if (s->ips)
        return s;
    uint32_t n = 0;
    for (uint32_t k = id; k && k < m->nstacks && n < 4096; k = m->stacks[k].parent)
        n++;
    s->ips = malloc(sizeof(uint64_t) * (n + 1));
    if (!s->ips)
        return NULL;
    n = 0;
    for (uint32_t k = id; k && k < m->nstacks && n < 4096; k = m->stacks[k].parent)
        s->ips[n++] = m->stacks[k].ip;
    s->n = n;
    return s;
}

static void on_error(model_t* m, const rd_record_t* r) {
    md_error_t* fresh = md_grow(m->errors, &m->errors_cap, m->nerrors + 1, sizeof *fresh);
    if (!fresh)
        return;
    m->errors = fresh;
    md_error_t* e = &m->errors[m->nerrors++];
    e->kind = (int)r->u[0];
    e->stack = (uint32_t)r->u[2];
    e->addr = r->u[3];
    e->fn = (int)r->u[4];
    e->has_block = r->u[5] != 0;
    e->block_size = r->u[8];
    e->alloc_stack = (uint32_t)r->u[9];
    e->alloc_fn = (int)r->u[10];
    e->release_stack = (uint32_t)r->u[11];
    e->time_ns = r->time_ns;
}

static void on_verdict(model_t* m, const rd_record_t* r) {
    md_block_t* b = block_find(m, block_key(r->u[0], r->u[1]));
    if (!b || r->u[2] >= HL_LEAK_COUNT)
        return;
    b->kind = (uint8_t)r->u[2];
    if (b->kind == HL_LEAK_INDIRECT && (r->u[3] || r->u[4])) {
        // Its bytes are credited to the leader's record when records are built.
        md_leader_t* fresh = md_grow(m->leaders, &m->leaders_cap, m->nleaders + 1, sizeof *fresh);
        if (fresh) {
            m->leaders = fresh;
            m->leaders[m->nleaders++] = (md_leader_t){b->key, block_key(r->u[3], r->u[4])};
        }
    }
}

static int on_record(const rd_record_t* r, void* arg) {
    model_t* m = arg;
    if (r->time_ns > m->last_time_ns)
        m->last_time_ns = r->time_ns;
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
        m->exe = dup_str(r->s[0]);
        m->argv = dup_str(r->s[1]);
        m->argv_len = r->s[1].len;
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
    case REC_ALLOC:
        on_alloc(m, r);
        break;
    case REC_FREE:
        on_free(m, r);
        break;
    case REC_MMAP:
        m->mmaps++;
        m->calls[HL_FN_MMAP]++;
        m->mapped_bytes += r->u[2];
        if (m->mapped_bytes > m->mapped_peak)
            m->mapped_peak = m->mapped_bytes;
        break;
    case REC_MUNMAP:
        m->munmaps++;
        m->calls[HL_FN_MUNMAP]++;
        m->mapped_bytes = m->mapped_bytes > r->u[2] ? m->mapped_bytes - r->u[2] : 0;
        break;
    case REC_SAMPLE:
        if (r->u[3] > m->rss_peak)
            m->rss_peak = r->u[3];
        break;
    case REC_ERROR:
        on_error(m, r);
        break;
    case REC_INHERIT:
        add_block(m, block_key(r->u[0], r->u[1]), r->u[2], r->u[3], r->u[4], r->u[5], 0);
        break;
    case REC_SCAN:
        m->is_scanned = 1;
        m->scan_flags = r->u[0];
        md_block_t* b;
        for (bs_iter_t it = {0}; (b = bs_next(&m->blocks, &it));)
            b->kind = HL_LEAK_DEFINITE; // until its verdict says otherwise
        break;
    case REC_VERDICT:
        on_verdict(m, r);
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
        m->exec_path = dup_str(r->s[0]);
        break;
    default:
        break;
    }
    return 0;
}

// ---------------------------------------------------------------------------------------------
// Leak records: live blocks grouped by (kind, stack).
// ---------------------------------------------------------------------------------------------
static md_leak_record_t* record_new(model_t* m, int kind, uint32_t stack, size_t* cap) {
    md_leak_record_t* fresh = md_grow(m->records, cap, m->nrecords + 1, sizeof *fresh);
    if (!fresh)
        return NULL;
    m->records = fresh;
    md_leak_record_t* rec = &m->records[m->nrecords++];
    memset(rec, 0, sizeof *rec);
    rec->kind = kind;
    rec->stack = stack;
    return rec;
}

static int cmp_record(const void* a, const void* b) {
    const md_leak_record_t *x = a, *y = b;
    if (x->kind != y->kind)
        return x->kind - y->kind;
    uint64_t tx = x->bytes + x->indirect_bytes, ty = y->bytes + y->indirect_bytes;
    return tx < ty ? 1 : tx > ty ? -1 : (x->stack > y->stack) - (x->stack < y->stack);
}

static inline size_t key_slot(uint64_t k, size_t mask) {
    uint64_t h = k * 0x9E3779B97F4A7C15ull;
    return (size_t)(h ^ (h >> 32)) & mask;
}

// A small index from (kind, stack) to record, rebuilt once, so grouping is linear.
static void build_records(model_t* m) {
    size_t cap = 0;
    size_t idx_cap = 1;
    while (idx_cap < m->blocks.used * 2 + 16)
        idx_cap *= 2;
    int64_t* idx = malloc(idx_cap * sizeof *idx);
    if (!idx)
        return;
    for (size_t i = 0; i < idx_cap; i++)
        idx[i] = -1;
    md_block_t* b;
    for (bs_iter_t it = {0}; (b = bs_next(&m->blocks, &it));) {
        int kind = b->kind;
        m->leaks[kind].bytes += b->size;
        m->leaks[kind].blocks++;
        uint64_t k = ((uint64_t)b->stack << 3) | (uint64_t)kind;
        size_t j = key_slot(k + 1, idx_cap - 1);
        while (idx[j] >= 0 && ((uint64_t)m->records[idx[j]].stack << 3 | (uint64_t)m->records[idx[j]].kind) != k)
            j = (j + 1) & (idx_cap - 1);
        if (idx[j] < 0) {
            md_leak_record_t* rec = record_new(m, kind, b->stack, &cap);
            if (!rec)
                continue;
            idx[j] = (int64_t)(rec - m->records);
        }
        md_leak_record_t* rec = &m->records[idx[j]];
        rec->bytes += b->size;
        rec->blocks++;
    }
    // Indirect blocks credit their leader's record (memcheck's "(direct, indirect)").
    for (size_t i = 0; i < m->nleaders; i++) {
        const md_block_t* b = block_find(m, m->leaders[i].key);
        const md_block_t* leader = block_find(m, m->leaders[i].leader_key);
        if (!b || !leader || b->kind != HL_LEAK_INDIRECT)
            continue;
        uint64_t k = ((uint64_t)leader->stack << 3) | (uint64_t)leader->kind;
        size_t j = key_slot(k + 1, idx_cap - 1);
        while (idx[j] >= 0 && ((uint64_t)m->records[idx[j]].stack << 3 | (uint64_t)m->records[idx[j]].kind) != k)
            j = (j + 1) & (idx_cap - 1);
        if (idx[j] >= 0) {
            m->records[idx[j]].indirect_bytes += b->size;
            m->records[idx[j]].indirect_blocks++;
        }
    }
    free(idx);
    qsort(m->records, m->nrecords, sizeof *m->records, cmp_record);
}

int model_load(model_t* m, const char* path) {
    memset(m, 0, sizeof *m);
    bs_init(&m->blocks, sizeof(md_block_t));
    int rc = rd_read_file(path, on_record, m, &m->read);
    if (rc != 0)
        return rc;
    if (!m->has_info) {
        if (!m->read.message[0])
            snprintf(m->read.message, sizeof m->read.message, "trace holds no records");
        return -EINVAL;
    }
    // Early frees whose allocation never came are dropped; they cannot be attributed.
    build_records(m);
    bs_shrink(&m->blocks); // sized for the peak; what is left is the blocks alive at the end
    return 0;
}

void model_free(model_t* m) {
    for (size_t i = 0; i < m->nmods; i++) {
        free(m->mods[i].path);
        free(m->mods[i].build_id);
        free(m->mods[i].segs);
    }
    for (size_t i = 0; i < m->nstacks; i++)
        free(m->stacks[i].ips);
    free(m->mods);
    free(m->stacks);
    free(m->thread_allocs);
    free(m->thread_tids);
    bs_free(&m->blocks);
    free(m->leaders);
    free(m->early_frees);
    free(m->errors);
    free(m->records);
    free(m->exe);
    free(m->argv);
    free(m->exec_path);
    memset(m, 0, sizeof *m);
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
