// SPDX-License-Identifier: MIT
// leaks.c - leak records by (kind, stack) (see leaks.h). Only the last scan counts: a SCAN
// record voids the verdicts before it, as a later look at the heap supersedes an earlier one.
#include "leaks.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static inline uint64_t record_key(int kind, uint32_t stack) {
    return ((uint64_t)stack << 3) | (uint64_t)kind;
}

static inline size_t key_slot(uint64_t k, size_t mask) {
    uint64_t h = (k + 1) * 0x9E3779B97F4A7C15ull;
    return (size_t)(h ^ (h >> 32)) & mask;
}

static int index_grow(model_t* m) {
    size_t cap = m->record_slots ? (m->record_mask + 1) * 2 : 256;
    uint32_t* fresh = calloc(cap, sizeof *fresh);
    if (!fresh)
        return -1;
    for (size_t i = 0; i < m->nrecords; i++) {
        size_t j = key_slot(record_key(m->records[i].kind, m->records[i].stack), cap - 1);
        while (fresh[j])
            j = (j + 1) & (cap - 1);
        fresh[j] = (uint32_t)i + 1;
    }
    free(m->record_slots);
    m->record_slots = fresh;
    m->record_mask = cap - 1;
    return 0;
}

// The record of (kind, stack), made when new; NULL when memory runs out.
static md_leak_record_t* record_at(model_t* m, int kind, uint32_t stack) {
    if ((!m->record_slots || (m->nrecords + 1) * 2 > m->record_mask + 1) && index_grow(m) != 0)
        return NULL;
    uint64_t k = record_key(kind, stack);
    size_t j = key_slot(k, m->record_mask);
    for (; m->record_slots[j]; j = (j + 1) & m->record_mask) {
        md_leak_record_t* r = &m->records[m->record_slots[j] - 1];
        if (record_key(r->kind, r->stack) == k)
            return r;
    }
    md_leak_record_t* fresh = md_grow(m->records, &m->records_cap, m->nrecords + 1, sizeof *fresh);
    if (!fresh)
        return NULL;
    m->records = fresh;
    md_leak_record_t* r = &m->records[m->nrecords];
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->stack = stack;
    m->record_slots[j] = (uint32_t)++m->nrecords;
    return r;
}

void leaks_scan(model_t* m, const rd_record_t* r) {
    if (r->u[0] & HL_SCAN_NO_MEMORY) { // no VERDICT follows: an earlier scan's still stand
        m->is_scan_short = 1;
        return;
    }
    leaks_run_end(m);
    m->is_scanned = 1;
    m->scan_flags = r->u[0];
    m->nrecords = 0;
    if (m->record_slots)
        memset(m->record_slots, 0, (m->record_mask + 1) * sizeof *m->record_slots);
    for (size_t i = 0; i < m->nsites; i++)
        memset(m->sites[i].verdicts, 0, sizeof m->sites[i].verdicts);
}

void leaks_verdict(model_t* m, const rd_record_t* r) {
    int kind = (int)r->u[0];
    uint64_t addr = r->u[1], size = r->u[2], leader = r->u[5], site = r->u[6];
    uint32_t stack = model_stack_ref(m, r->u[3]);
    if (r->u[0] >= HL_LEAK_COUNT)
        return;
    md_run_t* run = &m->run;
    run->is_open = 1;
    md_leak_record_t* rec = record_at(m, kind, stack);
    if (rec) {
        rec->bytes += size;
        rec->blocks++;
    }
    if (site && site < m->nsites)
        m->sites[site].verdicts[kind]++;
    if (kind == HL_LEAK_DEFINITE) {
        md_lost_t* fresh = md_grow(run->lost, &run->lost_cap, run->nlost + 1, sizeof *fresh);
        if (!fresh)
            return;
        run->lost = fresh;
        if (run->nlost && addr < run->lost[run->nlost - 1].addr)
            run->is_unsorted = 1; // the scan writes address order; do not rely on it
        run->lost[run->nlost++] = (md_lost_t){.addr = addr, .stack = stack};
    } else if (kind == HL_LEAK_INDIRECT && leader) {
        md_reached_t* fresh = md_grow(run->reached, &run->reached_cap, run->nreached + 1,
                                      sizeof *fresh);
        if (!fresh)
            return;
        run->reached = fresh;
        run->reached[run->nreached++] = (md_reached_t){.leader = leader, .size = size};
    }
}

static int cmp_lost(const void* a, const void* b) {
    const md_lost_t *x = a, *y = b;
    return (x->addr > y->addr) - (x->addr < y->addr);
}

static const md_lost_t* find_lost(const md_run_t* run, uint64_t addr) {
    size_t lo = 0, hi = run->nlost;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (run->lost[mid].addr < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < run->nlost && run->lost[lo].addr == addr ? &run->lost[lo] : NULL;
}

// Indirectly lost bytes credit their leader's record (memcheck's "(direct, indirect)").
void leaks_run_end(model_t* m) {
    md_run_t* run = &m->run;
    if (!run->is_open)
        return;
    if (run->is_unsorted)
        qsort(run->lost, run->nlost, sizeof *run->lost, cmp_lost);
    for (size_t i = 0; i < run->nreached; i++) {
        const md_lost_t* l = find_lost(run, run->reached[i].leader);
        md_leak_record_t* rec = l ? record_at(m, HL_LEAK_DEFINITE, l->stack) : NULL;
        if (rec) {
            rec->indirect_bytes += run->reached[i].size;
            rec->indirect_blocks++;
        }
    }
    // The lost blocks were only needed to tie them together: give their memory back.
    free(run->lost);
    free(run->reached);
    memset(run, 0, sizeof *run);
}

uint64_t model_site_kinds(const md_site_t* s, uint64_t blocks[HL_NKINDS]) {
    uint64_t judged = 0;
    for (int k = 0; k < HL_LEAK_COUNT; k++) {
        blocks[k] = s->verdicts[k];
        judged += s->verdicts[k];
    }
    uint64_t live = s->live > 0 ? (uint64_t)s->live : 0;
    uint64_t ignored = s->ignored > 0 ? (uint64_t)s->ignored : 0; // no verdict, and no leak
    live = live > ignored ? live - ignored : 0;
    blocks[HL_KIND_UNSCANNED] = live > judged ? live - judged : 0;
    return judged + blocks[HL_KIND_UNSCANNED];
}

static int cmp_record(const void* a, const void* b) {
    const md_leak_record_t *x = a, *y = b;
    if (x->kind != y->kind)
        return x->kind - y->kind;
    uint64_t tx = x->bytes + x->indirect_bytes, ty = y->bytes + y->indirect_bytes;
    return tx < ty ? 1 : tx > ty ? -1 : (x->stack > y->stack) - (x->stack < y->stack);
}

int leaks_finish(model_t* m) {
    leaks_run_end(m);
    int rc = 0;
    for (size_t i = 1; i < m->nsites && rc == 0; i++) {
        const md_site_t* s = &m->sites[i];
        uint64_t kinds[HL_NKINDS];
        model_site_kinds(s, kinds);
        uint64_t n = kinds[HL_KIND_UNSCANNED];
        if (!n)
            continue;
        md_leak_record_t* rec = record_at(m, HL_KIND_UNSCANNED, s->stack);
        if (!rec) {
            rc = -ENOMEM;
            break;
        }
        rec->blocks += n;
        rec->bytes += n * s->size;
    }
    for (size_t i = 0; i < m->nrecords; i++) {
        m->leaks[m->records[i].kind].bytes += m->records[i].bytes;
        m->leaks[m->records[i].kind].blocks += m->records[i].blocks;
    }
    free(m->record_slots); // sorting makes its indices stale
    m->record_slots = NULL;
    m->record_mask = 0;
    if (m->nrecords)
        qsort(m->records, m->nrecords, sizeof *m->records, cmp_record);
    return rc;
}

void leaks_free(model_t* m) {
    free(m->run.lost);
    free(m->run.reached);
    free(m->record_slots);
    free(m->records);
}
