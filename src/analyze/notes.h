// SPDX-License-Identifier: MIT
// notes.h - what the program said through the heaplens API (REC_NOTE records), as the model
// keeps it (notes.c): pauses, marks, and its allocations grouped by tag.
#ifndef HL_NOTES_H
#define HL_NOTES_H

#include <stddef.h>
#include <stdint.h>

#define MD_TAGS_MAX 4096 // distinct (type, location) tags kept; the rest are summed as "other"

typedef struct md_tag_s {
    uint32_t type, location;
    uint64_t allocations, bytes;
} md_tag_t;

typedef struct md_tag_thread_s {
    uint64_t thread;
    int32_t tag; // index into tags, -1: untagged
} md_tag_thread_t;

typedef struct md_notes_s {
    uint64_t pauses, resumes, marks, ignores;
    md_tag_t* tags;
    size_t ntags, tags_cap;
    md_tag_t other; // allocations under tags past MD_TAGS_MAX
    md_tag_thread_t* threads; // each thread's current tag
    size_t nthreads, threads_cap;
    size_t ntagged; // threads with a tag now: 0 keeps the ALLOC path to one test
} md_notes_t;

struct rd_record_s;
void notes_on_record(md_notes_t* n, const struct rd_record_s* r);
void notes_on_alloc(md_notes_t* n, uint64_t thread, uint64_t size); // when n->ntagged
void notes_free(md_notes_t* n);

#endif
