// SPDX-License-Identifier: MIT
// report.c - what every report view shares: symbolized stacks (each stack once) and leak
// records filtered through the suppressions.
#include "report.h"

#include <stdlib.h>
#include <string.h>

struct report_ctx_s {
    model_t* m;
    symbolizer_t* sym;
    report_frame_t** frames; // by stack id, built on first use
    int* nframes;
    const md_leak_record_t** kept;
    // Where a stack's frames are put together before they are kept in a block of their own
    // size: a block for the most a stack could expand to (every address inlined twice) was
    // twice the memory, and calloc clearing it a tenth of the JSON report of a trace with
    // 17,000 leak records of 30 frames (cc1plus).
    report_frame_t* scratch;
    size_t scratch_cap;
};

int report_ctx_add_debug_dir(report_ctx_t* c, const char* dir) {
    return symbolizer_add_debug_dir(c->sym, dir);
}

report_ctx_t* report_ctx_new(model_t* m, const char* sysroot) {
    return report_ctx_new_with(m, symbolizer_new_cached(sysroot));
}

report_ctx_t* report_ctx_new_with(model_t* m, symbolizer_t* sym) {
    report_ctx_t* c = calloc(1, sizeof *c);
    if (!c) {
        symbolizer_free(sym);
        return NULL;
    }
    c->m = m;
    c->sym = sym;
    c->frames = calloc(m->nstacks + 1, sizeof *c->frames);
    c->nframes = calloc(m->nstacks + 1, sizeof *c->nframes);
    if (!c->sym || !c->frames || !c->nframes) {
        report_ctx_free(c);
        return NULL;
    }
    return c;
}

model_t* report_model(report_ctx_t* c) { return c->m; }

void report_ctx_free(report_ctx_t* c) {
    if (!c)
        return;
    if (c->frames)
        for (size_t i = 0; i <= c->m->nstacks; i++)
            free(c->frames[i]);
    free(c->frames);
    free(c->nframes);
    free(c->kept);
    free(c->scratch);
    if (c->sym)
        symbolizer_free(c->sym);
    free(c);
}

int report_ip_frames(report_ctx_t* c, uint64_t ip, report_frame_t* out) {
    md_module_t* md = (md_module_t*)model_module_of(c->m, ip);
    sym_frame_t sf[REPORT_IP_FRAMES_MAX];
    int k = 0;
    if (md) {
        if (md->sym_handle < 0)
            md->sym_handle =
                symbolizer_add_module(c->sym, md->path, md->build_id, md->build_id_len);
        // A return address: the call is the byte before it.
        if (md->sym_handle >= 0)
            k = symbolizer_lookup(c->sym, md->sym_handle, ip - md->bias - 1, sf,
                                  REPORT_IP_FRAMES_MAX);
    }
    if (k <= 0) {
        sf[0] = (sym_frame_t){0};
        k = 1;
    }
    for (int j = 0; j < k; j++)
        out[j] = (report_frame_t){
            .function = sf[j].function,
            .file = sf[j].file,
            .line = sf[j].line,
            .module = md ? md->name : NULL,
            .address = (unsigned long long)ip,
            .is_inlined = (int)sf[j].is_inlined,
        };
    return k;
}

int report_stack(report_ctx_t* c, uint32_t stack, const report_frame_t** out) {
    model_t* m = c->m;
    if (stack < m->nstacks && c->frames[stack]) {
        *out = c->frames[stack];
        return c->nframes[stack];
    }
    uint64_t ips[MD_STACK_DEPTH_MAX];
    uint32_t nips = model_stack_ips(m, stack, ips, MD_STACK_DEPTH_MAX);
    if (!nips) {
        *out = NULL;
        return 0;
    }
    size_t n = 0;
    for (uint32_t i = 0; i < nips; i++) {
        report_frame_t* room =
            md_grow(c->scratch, &c->scratch_cap, n + REPORT_IP_FRAMES_MAX, sizeof *room);
        if (!room)
            break;
        c->scratch = room;
        n += (size_t)report_ip_frames(c, ips[i], room + n);
    }
    report_frame_t* fr = n ? malloc(n * sizeof *fr) : NULL;
    if (!fr) {
        *out = NULL;
        return 0;
    }
    memcpy(fr, c->scratch, n * sizeof *fr);
    c->frames[stack] = fr;
    c->nframes[stack] = (int)n;
    *out = fr;
    return (int)n;
}

int report_leaks(report_ctx_t* c, const suppressions_t* supp, report_leaks_t* out) {
    model_t* m = c->m;
    memset(out, 0, sizeof *out);
    free(c->kept);
    c->kept = calloc(m->nrecords + 1, sizeof *c->kept);
    if (!c->kept)
        return -1;
    for (size_t i = 0; i < m->nrecords; i++) {
        const md_leak_record_t* r = &m->records[i];
        if (supp) {
            const report_frame_t* fr;
            int n = report_stack(c, r->stack, &fr);
            if (suppressions_match(supp, fr, n)) {
                out->suppressed.bytes += r->bytes;
                out->suppressed.blocks += r->blocks;
                continue;
            }
        }
        out->kinds[r->kind].bytes += r->bytes;
        out->kinds[r->kind].blocks += r->blocks;
        c->kept[out->nrecords++] = r;
    }
    out->records = c->kept;
    return 0;
}
