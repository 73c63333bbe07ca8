// SPDX-License-Identifier: MIT
// json_frames.c - the JSON text of the frames a report has written, each made once. An inline
// table keeps it per return address (all the frames the address stands for: several when calls
// were inlined), so a stack is written from its addresses alone. An indexing table keeps each
// symbolized frame, numbered: a frame is its address plus what the symbolizer said of it; the
// symbolizer and the model intern their strings, so equal frames have equal pointers and the
// key compares pointers, not text.
#define _GNU_SOURCE // fwrite_unlocked, fputs_unlocked
#include "json_frames.h"
#include "idmap.h"
#include "model.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct jf_entry_s {
    report_frame_t key;
    uint32_t index; // 1 + position in the table; 0: free slot
    uint32_t text_len;
    char* text; // the frame's JSON object
} jf_entry_t;

// An inline table's text of a return address: a report's stacks are made of the same few
// thousand addresses, and a stack written from them is neither symbolized frame by frame
// (report_stack) nor looked up a frame at a time: that was four fifths of the JSON report's own
// time on a trace with 17,000 leak records of 30 frames each.
typedef struct jf_ip_s {
    uint32_t text_len;
    char* text; // its frames' objects, ", " between them
} jf_ip_t;

struct json_frames_s {
    int by_index;
    // Indexing tables: open addressing, power-of-two size, at most half full.
    jf_entry_t* slots;
    size_t cap, used;
    uint32_t* order; // by index - 1: the slot of each frame, for the table in index order
    size_t order_cap;
    // Inline tables: each return address numbered as it is met, its text at its number.
    idmap_t ip_numbers;
    jf_ip_t* ips; // ips[1 .. ip_numbers.n]
    size_t ips_cap;
};

#define JF_INITIAL_SLOTS 4096

json_frames_t* json_frames_new(int by_index) {
    json_frames_t* t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->by_index = by_index;
    idmap_init(&t->ip_numbers);
    if (!by_index)
        return t;
    t->cap = JF_INITIAL_SLOTS;
    t->slots = calloc(t->cap, sizeof *t->slots);
    if (!t->slots) {
        free(t);
        return NULL;
    }
    return t;
}

void json_frames_free(json_frames_t* t) {
    if (!t)
        return;
    for (size_t i = 0; i < t->cap; i++)
        free(t->slots[i].text);
    for (size_t i = 1; i <= t->ip_numbers.n; i++)
        free(t->ips[i].text);
    free(t->ips);
    idmap_free(&t->ip_numbers);
    free(t->slots);
    free(t->order);
    free(t);
}

size_t json_frames_count(const json_frames_t* t) { return t ? t->used : 0; }

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h;
}

static uint64_t frame_hash(const report_frame_t* f) {
    uint64_t h = f->address * 0xff51afd7ed558ccdull;
    h = mix(h, (uintptr_t)f->function);
    h = mix(h, (uintptr_t)f->file);
    h = mix(h, ((uint64_t)f->line << 1) | (unsigned)f->is_inlined);
    h = mix(h, (uintptr_t)f->module);
    return h ^ (h >> 29);
}

static int frame_eq(const report_frame_t* a, const report_frame_t* b) {
    return a->address == b->address && a->function == b->function && a->file == b->file &&
           a->line == b->line && a->is_inlined == b->is_inlined && a->module == b->module;
}

static void write_frame(FILE* out, const report_frame_t* f) {
    fputs("{\"function\": ", out);
    report_json_string(out, f->function);
    fputs(", \"file\": ", out);
    report_json_string(out, f->file);
    fprintf(out, ", \"line\": %u, \"module\": ", f->line);
    report_json_string(out, f->module);
    fprintf(out, ", \"address\": \"0x%llx\", \"inlined\": %s}", f->address,
            f->is_inlined ? "true" : "false");
}

static int grow(json_frames_t* t) {
    size_t cap = t->cap * 2;
    jf_entry_t* fresh = calloc(cap, sizeof *fresh);
    if (!fresh)
        return -1;
    for (size_t i = 0; i < t->cap; i++) {
        jf_entry_t* e = &t->slots[i];
        if (!e->index)
            continue;
        size_t k = frame_hash(&e->key) & (cap - 1);
        while (fresh[k].index)
            k = (k + 1) & (cap - 1);
        fresh[k] = *e;
        t->order[e->index - 1] = (uint32_t)k;
    }
    free(t->slots);
    t->slots = fresh;
    t->cap = cap;
    return 0;
}

// The frame's entry, made (with its text) on first use; NULL when out of memory.
static const jf_entry_t* lookup(json_frames_t* t, const report_frame_t* f) {
    size_t k = frame_hash(f) & (t->cap - 1);
    while (t->slots[k].index) {
        if (frame_eq(&t->slots[k].key, f))
            return &t->slots[k];
        k = (k + 1) & (t->cap - 1);
    }
    uint32_t* o = md_grow(t->order, &t->order_cap, t->used + 1, sizeof *t->order);
    if (!o)
        return NULL;
    t->order = o;
    char* text = NULL;
    size_t len = 0;
    FILE* mem = open_memstream(&text, &len);
    if (!mem)
        return NULL;
    write_frame(mem, f);
    if (fclose(mem) != 0 || !text) {
        free(text);
        return NULL;
    }
    jf_entry_t* e = &t->slots[k];
    *e = (jf_entry_t){.key = *f, .index = (uint32_t)(t->used + 1), .text_len = (uint32_t)len,
                      .text = text};
    t->order[t->used++] = (uint32_t)k;
    if (t->used * 2 > t->cap) {
        uint32_t index = e->index;
        if (grow(t) != 0)
            return NULL; // the entry stays, in the old table
        return &t->slots[t->order[index - 1]];
    }
    return e;
}

// The text of the frames of return address ip, made on first use; NULL when out of memory.
static const jf_ip_t* ip_lookup(json_frames_t* t, report_ctx_t* c, uint64_t ip) {
    uint32_t k = idmap_find(&t->ip_numbers, ip);
    if (k)
        return &t->ips[k];
    size_t next = (size_t)t->ip_numbers.n + 1;
    jf_ip_t* grown = md_grow(t->ips, &t->ips_cap, next + 1, sizeof *grown);
    if (!grown)
        return NULL;
    t->ips = grown;
    report_frame_t fr[REPORT_IP_FRAMES_MAX];
    int n = report_ip_frames(c, ip, fr);
    char* text = NULL;
    size_t len = 0;
    FILE* mem = open_memstream(&text, &len);
    if (!mem)
        return NULL;
    for (int i = 0; i < n; i++) {
        if (i)
            fputs(", ", mem);
        write_frame(mem, &fr[i]);
    }
    if (fclose(mem) != 0 || !text || !len || len > UINT32_MAX ||
        idmap_add(&t->ip_numbers, ip) != next) {
        free(text);
        return NULL;
    }
    t->ips[next] = (jf_ip_t){.text_len = (uint32_t)len, .text = text};
    return &t->ips[next];
}

// An inline table's stack, from its addresses; -1 (nothing written) when out of memory.
static int stack_by_ips(FILE* out, json_frames_t* t, report_ctx_t* c, uint32_t stack) {
    uint64_t ips[MD_STACK_DEPTH_MAX];
    uint32_t n = model_stack_ips(report_model(c), stack, ips, MD_STACK_DEPTH_MAX);
    // The texts themselves, not their slots: a later address may grow the table and move them.
    const char* texts[MD_STACK_DEPTH_MAX];
    uint32_t lens[MD_STACK_DEPTH_MAX];
    for (uint32_t i = 0; i < n; i++) {
        const jf_ip_t* e = ip_lookup(t, c, ips[i]);
        if (!e)
            return -1;
        texts[i] = e->text;
        lens[i] = e->text_len;
    }
    flockfile(out);
    putc_unlocked('[', out);
    for (uint32_t i = 0; i < n; i++) {
        if (i)
            fwrite_unlocked(", ", 1, 2, out);
        fwrite_unlocked(texts[i], 1, lens[i], out);
    }
    putc_unlocked(']', out);
    funlockfile(out);
    return 0;
}

// A report writes thousands of frames, each in a few pieces: the stream is locked once per
// stack, not once per piece (the lock was a fifth of a short run's JSON report).
void json_frames_stack(FILE* out, json_frames_t* t, report_ctx_t* c, uint32_t stack) {
    if (t && !t->by_index && stack_by_ips(out, t, c, stack) == 0)
        return;
    const report_frame_t* fr;
    int n = report_stack(c, stack, &fr);
    flockfile(out);
    putc_unlocked('[', out);
    for (int i = 0; i < n; i++) {
        if (i)
            fwrite_unlocked(", ", 1, 2, out);
        const jf_entry_t* e = t && t->by_index ? lookup(t, &fr[i]) : NULL;
        if (e)
            fprintf(out, "%u", e->index - 1);
        else
            write_frame(out, &fr[i]);
    }
    putc_unlocked(']', out);
    funlockfile(out);
}

void json_frames_write_table(FILE* out, const json_frames_t* t) {
    flockfile(out);
    putc_unlocked('[', out);
    for (size_t i = 0; t && i < t->used; i++) {
        const jf_entry_t* e = &t->slots[t->order[i]];
        fputs_unlocked(i ? ",\n    " : "\n    ", out);
        fwrite_unlocked(e->text, 1, e->text_len, out);
    }
    putc_unlocked(']', out);
    funlockfile(out);
}
