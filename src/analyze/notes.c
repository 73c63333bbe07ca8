// SPDX-License-Identifier: MIT
// notes.c - the API's notes in a trace: counts of pauses and marks, and the allocations made
// while their thread carried a tag (heaplens_tag), by tag. A release names its site, not its
// block, so what a tag's blocks still hold is not told: only what was allocated under it.
#include <stdlib.h>

#include "../common/format.h"
#include "model.h"
#include "notes.h"
#include "reader.h"

static md_tag_thread_t* thread_slot(md_notes_t* n, uint64_t thread, int make) {
    for (size_t i = 0; i < n->nthreads; i++)
        if (n->threads[i].thread == thread)
            return &n->threads[i];
    if (!make)
        return NULL;
    md_tag_thread_t* fresh = md_grow(n->threads, &n->threads_cap, n->nthreads + 1, sizeof *fresh);
    if (!fresh)
        return NULL;
    n->threads = fresh;
    n->threads[n->nthreads] = (md_tag_thread_t){.thread = thread, .tag = -1};
    return &n->threads[n->nthreads++];
}

static int32_t tag_index(md_notes_t* n, uint32_t type, uint32_t location) {
    for (size_t i = 0; i < n->ntags; i++)
        if (n->tags[i].type == type && n->tags[i].location == location)
            return (int32_t)i;
    if (n->ntags >= MD_TAGS_MAX)
        return (int32_t)MD_TAGS_MAX; // "other"
    md_tag_t* fresh = md_grow(n->tags, &n->tags_cap, n->ntags + 1, sizeof *fresh);
    if (!fresh)
        return (int32_t)MD_TAGS_MAX;
    n->tags = fresh;
    n->tags[n->ntags] = (md_tag_t){.type = type, .location = location};
    return (int32_t)n->ntags++;
}

static void set_tag(md_notes_t* n, uint64_t thread, int32_t tag) {
    md_tag_thread_t* t = thread_slot(n, thread, tag >= 0);
    if (!t)
        return;
    n->ntagged += (t->tag < 0) - (tag < 0);
    t->tag = tag;
}

void notes_on_record(md_notes_t* n, const rd_record_t* r) {
    switch (r->u[0]) {
    case HL_NOTE_PAUSE:
        n->pauses++;
        break;
    case HL_NOTE_RESUME:
        n->resumes++;
        break;
    case HL_NOTE_MARK:
        n->marks++;
        break;
    case HL_NOTE_TAG:
        set_tag(n, r->thread, tag_index(n, (uint32_t)r->u[1], (uint32_t)r->u[2]));
        break;
    case HL_NOTE_UNTAG:
        set_tag(n, r->thread, -1);
        break;
    case HL_NOTE_IGNORE:
        n->ignores++;
        break;
    default: // a later kind: nothing this analyzer knows to say
        break;
    }
}

void notes_on_alloc(md_notes_t* n, uint64_t thread, uint64_t size) {
    md_tag_thread_t* t = thread_slot(n, thread, 0);
    if (!t || t->tag < 0)
        return;
    md_tag_t* g = t->tag < (int32_t)MD_TAGS_MAX ? &n->tags[t->tag] : &n->other;
    g->allocations++;
    g->bytes += size;
}

void notes_free(md_notes_t* n) {
    free(n->tags);
    free(n->threads);
}
