// SPDX-License-Identifier: MIT
// report_massif.c - the heap over time in Valgrind massif's out format, for ms_print and
// massif-visualizer: up to 100 snapshots from the timeline, the exact peak among them, detailed
// as massif's tree of code addresses (innermost first) with its 1% threshold.
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate.h"

#define MASSIF_SNAPSHOTS 100
#define MASSIF_THRESHOLD 1.0 // percent of the peak, as massif's --threshold default

typedef struct mnode_s {
    uint64_t ip;
    const report_frame_t* frame; // the innermost frame at ip; NULL: no stack
    uint64_t bytes;
    int first_child, next_sibling;
} mnode_t;

typedef struct mtree_s {
    mnode_t* v;
    size_t n, cap;
} mtree_t;

static int mnode_child(mtree_t* t, int parent, uint64_t ip, const report_frame_t* frame) {
    int last = -1;
    for (int c = parent >= 0 ? t->v[parent].first_child : -1; c >= 0; c = t->v[c].next_sibling) {
        if (t->v[c].ip == ip)
            return c;
        last = c;
    }
    mnode_t* fresh = md_grow(t->v, &t->cap, t->n + 1, sizeof *fresh);
    if (!fresh)
        return -1;
    t->v = fresh;
    int c = (int)t->n++;
    t->v[c] = (mnode_t){.ip = ip, .frame = frame, .first_child = -1, .next_sibling = -1};
    if (parent >= 0) {
        if (last < 0)
            t->v[parent].first_child = c;
        else
            t->v[last].next_sibling = c;
    }
    return c;
}

static int cmp_bytes(const void* pa, const void* pb, void* arg) {
    const mtree_t* t = arg;
    uint64_t x = t->v[*(const int*)pa].bytes, y = t->v[*(const int*)pb].bytes;
    return x < y ? 1 : x > y ? -1 : 0;
}

static void massif_label(FILE* out, const mnode_t* n) {
    const report_frame_t* f = n->frame;
    fprintf(out, " 0x%llX: ", (unsigned long long)n->ip);
    if (!f) {
        fputs("???", out);
        return;
    }
    // '#' starts a comment for ms_print: keep it out of names.
    char buf[64];
    for (const char* s = ag_frame_name(f, buf, sizeof buf); *s; s++)
        fputc(*s == '#' || (unsigned char)*s < 0x20 ? ' ' : *s, out);
    if (f->file) {
        const char* base = strrchr(f->file, '/');
        fprintf(out, " (%s:%u)", base ? base + 1 : f->file, f->line);
    } else if (f->module) {
        fprintf(out, " (in %s)", f->module);
    }
}

static int massif_walk(FILE* out, const mtree_t* t, int node, int depth, uint64_t total) {
    int nkids = 0;
    for (int c = t->v[node].first_child; c >= 0; c = t->v[c].next_sibling)
        nkids++;
    int* kids = calloc((size_t)nkids + 1, sizeof *kids);
    if (!kids)
        return -ENOMEM;
    int k = 0;
    for (int c = t->v[node].first_child; c >= 0; c = t->v[c].next_sibling)
        kids[k++] = c;
    qsort_r(kids, (size_t)nkids, sizeof *kids, cmp_bytes, (void*)t);
    int sig = 0;
    uint64_t insig_bytes = 0;
    for (int i = 0; i < nkids; i++) {
        if ((double)t->v[kids[i]].bytes * 100.0 >= MASSIF_THRESHOLD * (double)total && total)
            sig++;
        else
            insig_bytes += t->v[kids[i]].bytes;
    }
    int shown = sig + (sig < nkids ? 1 : 0);
    fprintf(out, "%*sn%d: %llu", depth, "", shown, (unsigned long long)t->v[node].bytes);
    if (node == 0)
        fputs(" (heap allocation functions) malloc/new/new[], --alloc-fns, etc.", out);
    else
        massif_label(out, &t->v[node]);
    fputc('\n', out);
    int rc = 0;
    for (int i = 0; i < sig && rc == 0; i++)
        rc = massif_walk(out, t, kids[i], depth + 1, total);
    if (sig < nkids)
        fprintf(out, "%*sn0: %llu in %d place%s, all below massif's threshold (%.2f%%)\n",
                depth + 1, "", (unsigned long long)insig_bytes, nkids - sig,
                nkids - sig == 1 ? "" : "s", MASSIF_THRESHOLD);
    free(kids);
    return rc;
}

static int build_tree(mtree_t* t, report_ctx_t* c, const aggregate_t* a) {
    memset(t, 0, sizeof *t);
    if (mnode_child(t, -1, 0, NULL) != 0)
        return -ENOMEM;
    for (size_t i = 0; i < a->nsites; i++) {
        const ag_site_t* s = &a->sites[i];
        if (!s->is_kept || !s->peak_bytes)
            continue;
        const report_frame_t* fr;
        int n = report_stack(c, s->stack, &fr);
        int node = 0;
        t->v[0].bytes += s->peak_bytes;
        if (n == 0) {
            node = mnode_child(t, 0, 0, NULL);
            if (node < 0)
                return -ENOMEM;
            t->v[node].bytes += s->peak_bytes;
        }
        for (int j = 0; j < n;) {
            int k = j; // one node per code address: the innermost (inlined) frame names it
            while (k < n - 1 && fr[k].is_inlined && fr[k + 1].address == fr[j].address)
                k++;
            node = mnode_child(t, node, fr[j].address, &fr[j]);
            if (node < 0)
                return -ENOMEM;
            t->v[node].bytes += s->peak_bytes;
            j = k + 1;
        }
    }
    return 0;
}

static void snapshot(FILE* out, int n, int64_t t_ns, uint64_t heap, const char* tree) {
    fprintf(out,
            "#-----------\nsnapshot=%d\n#-----------\ntime=%.3f\nmem_heap_B=%llu\n"
            "mem_heap_extra_B=0\nmem_stacks_B=0\nheap_tree=%s\n",
            n, (double)t_ns / 1e6, (unsigned long long)heap, tree);
}

int ag_write_massif(FILE* out, report_ctx_t* c, const aggregate_t* a) {
    model_t* m = report_model(c);
    fprintf(out, "desc: heaplens");
    if (a->opts.has_from || a->opts.has_to)
        fprintf(out, " --from %lldns --to %lldns", (long long)a->start_ns, (long long)a->end_ns);
    if (a->opts.filter)
        fprintf(out, " --filter %s", a->opts.filter);
    fputs("\ncmd:", out);
    if (m->argv_len) {
        for (size_t i = 0; i < m->argv_len; i += strlen(m->argv + i) + 1)
            fprintf(out, " %s", m->argv + i);
    } else {
        fprintf(out, " %s", m->exe ? m->exe : "?");
    }
    fputs("\ntime_unit: ms\n", out);

    mtree_t t;
    int rc = build_tree(&t, c, a);
    if (rc != 0) {
        free(t.v);
        return rc;
    }
    // Snapshots: groups of timeline buckets (each its highest heap), the exact peak in between.
    size_t n = a->ntimeline, per = (n + MASSIF_SNAPSHOTS - 2) / (MASSIF_SNAPSHOTS - 1);
    if (per == 0)
        per = 1;
    int sn = 0, peak_done = 0;
    for (size_t i = 0; i < n && rc == 0; i += per) {
        uint64_t heap = 0;
        int64_t time = a->timeline[i].time_ns;
        for (size_t j = i; j < i + per && j < n; j++)
            if (a->timeline[j].heap_bytes > heap)
                heap = a->timeline[j].heap_bytes;
        if (!peak_done && time > a->peak_time_ns) {
            snapshot(out, sn++, a->peak_time_ns, a->peak_bytes, "peak");
            rc = massif_walk(out, &t, 0, 0, a->peak_bytes);
            peak_done = 1;
        }
        snapshot(out, sn++, time, heap < a->peak_bytes ? heap : a->peak_bytes, "empty");
    }
    if (!peak_done && rc == 0) {
        snapshot(out, sn++, a->peak_time_ns, a->peak_bytes, "peak");
        rc = massif_walk(out, &t, 0, 0, a->peak_bytes);
    }
    free(t.v);
    if (rc == 0 && ferror(out))
        rc = -EIO;
    return rc;
}
