// SPDX-License-Identifier: MIT
// report_pprof.c - call sites as pprof's profile.proto (github.com/google/pprof, proto/
// profile.proto), encoded by hand: sample types alloc_objects, alloc_space, inuse_objects,
// inuse_space (in use = live at the end), symbolized locations with their inlined lines,
// mappings from the trace's modules. Wrapped in gzip with stored deflate blocks: no zlib needed.
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../common/hash.h"
#include "aggregate.h"
#include "bytebuf.h"
#include "utf8.h"

// ---------------------------------------------------------------------------------------------
// CRC-32 (IEEE, reflected, as gzip wants) and a gzip member of stored blocks
// ---------------------------------------------------------------------------------------------
uint32_t ag_crc32(uint32_t crc, const void* data, size_t len) {
    static uint32_t table[256];
    static int ready;
    if (!ready) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
        ready = 1;
    }
    const uint8_t* p = data;
    crc = ~crc;
    for (size_t i = 0; i < len; i++)
        crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

static void put_le32(uint8_t* p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

int ag_write_gzip_stored(FILE* out, const void* data, size_t len) {
    // ID1 ID2 CM=deflate FLG=0 MTIME=0 XFL=0 OS=3 (Unix)
    static const uint8_t header[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};
    fwrite(header, 1, sizeof header, out);
    const uint8_t* p = data;
    size_t left = len;
    do {
        size_t n = left > 65535 ? 65535 : left;
        uint8_t bh[5];
        bh[0] = n == left ? 1 : 0; // BFINAL, BTYPE=00 (stored); the rest of the byte is padding
        bh[1] = (uint8_t)n;
        bh[2] = (uint8_t)(n >> 8);
        bh[3] = (uint8_t)~n;
        bh[4] = (uint8_t)(~n >> 8);
        fwrite(bh, 1, sizeof bh, out);
        if (n)
            fwrite(p, 1, n, out);
        p += n;
        left -= n;
    } while (left);
    uint8_t trailer[8];
    put_le32(trailer, ag_crc32(0, data, len));
    put_le32(trailer + 4, (uint32_t)len);
    fwrite(trailer, 1, sizeof trailer, out);
    return ferror(out) ? -EIO : 0;
}

// ---------------------------------------------------------------------------------------------
// Protobuf encoding
// ---------------------------------------------------------------------------------------------
typedef bytebuf_t pb_t;

enum { PB_VARINT = 0, PB_LEN = 2 };


static void pb_varint(pb_t* b, uint64_t v) {
    uint8_t tmp[10];
    int n = 0;
    while (v >= 0x80) {
        tmp[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    tmp[n++] = (uint8_t)v;
    bytebuf_put(b, tmp, (size_t)n);
}

static void pb_uint(pb_t* b, int field, uint64_t v) {
    pb_varint(b, (uint64_t)field << 3 | PB_VARINT);
    pb_varint(b, v);
}

static void pb_bytes(pb_t* b, int field, const void* data, size_t len) {
    pb_varint(b, (uint64_t)field << 3 | PB_LEN);
    pb_varint(b, len);
    bytebuf_put(b, data, len);
}

static void pb_msg(pb_t* b, int field, pb_t* sub) {
    if (sub->failed)
        b->failed = 1;
    pb_bytes(b, field, sub->p, sub->len);
    sub->len = 0; // reused by the caller
}

// ---------------------------------------------------------------------------------------------
// Interning: strings, functions, locations (open addressing, keys never removed)
// ---------------------------------------------------------------------------------------------
typedef struct map_s {
    uint64_t* keys; // key + 1; 0 = empty
    uint64_t* vals;
    size_t cap, used;
} map_t;

static uint64_t mix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
}

static int map_grow(map_t* m) {
    size_t cap = m->cap ? m->cap * 2 : 256;
    uint64_t* keys = calloc(cap, sizeof *keys);
    uint64_t* vals = calloc(cap, sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i])
            continue;
        size_t j = mix(m->keys[i]) & (cap - 1);
        while (keys[j])
            j = (j + 1) & (cap - 1);
        keys[j] = m->keys[i];
        vals[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    return 0;
}

// Returns the slot of key (found or empty: *found tells), or NULL on out-of-memory.
static uint64_t* map_slot(map_t* m, uint64_t key, int* found) {
    if ((m->used + 1) * 2 > m->cap && map_grow(m) != 0)
        return NULL;
    size_t i = mix(key + 1) & (m->cap - 1);
    while (m->keys[i] && m->keys[i] != key + 1)
        i = (i + 1) & (m->cap - 1);
    *found = m->keys[i] != 0;
    if (!*found) {
        m->keys[i] = key + 1;
        m->used++;
    }
    return &m->vals[i];
}

static void map_free(map_t* m) {
    free(m->keys);
    free(m->vals);
}

typedef struct prof_s {
    pb_t out; // the Profile message
    pb_t tmp, tmp2;
    map_t strs;  // hash -> index (collisions checked against strings[])
    char** strings;
    size_t nstrings, strings_cap;
    map_t funcs; // (name << 32 | file) -> id
    map_t locs;  // ip -> id
    uint64_t nfuncs, nlocs;
    int oom;
} prof_t;

static int is_utf8(const char* s) {
    size_t len = strlen(s), n;
    for (const unsigned char* p = (const unsigned char*)s; len > 0; p += n, len -= n)
        if ((n = utf8_seq_len(p, len)) == 0)
            return 0;
    return 1;
}

// s as valid UTF-8 (a proto3 string must be; pprof's Go reader refuses the profile otherwise):
// a byte that is not is written as the text \xHH (utf8.h). A malloc'd copy, or NULL.
static char* utf8_clean(const char* s) {
    size_t len = strlen(s), n;
    char* out = malloc(len * 4 + 1); // \xHH for every byte at worst
    if (!out)
        return NULL;
    char* o = out;
    for (const unsigned char* p = (const unsigned char*)s; len > 0; p += n, len -= n) {
        n = utf8_seq_len(p, len);
        if (n == 0) {
            o += sprintf(o, "\\x%02X", *p);
            n = 1;
        } else {
            memcpy(o, p, n);
            o += n;
        }
    }
    *o = 0;
    return out;
}

static uint64_t intern_clean(prof_t* p, const char* s);

// Index of s in the string table (0 is "").
static uint64_t intern(prof_t* p, const char* s) {
    if (!s || !*s)
        return 0;
    if (is_utf8(s))
        return intern_clean(p, s);
    char* clean = utf8_clean(s);
    if (!clean) {
        p->oom = 1;
        return 0;
    }
    uint64_t i = intern_clean(p, clean);
    free(clean);
    return i;
}

// Collisions probe onward by rehashing with a salt.
static uint64_t intern_clean(prof_t* p, const char* s) {
    uint64_t h = hl_str_hash(s);
    for (int salt = 0; salt < 64; salt++) {
        int found;
        uint64_t* v = map_slot(&p->strs, mix(h + (uint64_t)salt), &found);
        if (!v) {
            p->oom = 1;
            return 0;
        }
        if (found) {
            if (!strcmp(p->strings[*v], s))
                return *v;
            continue;
        }
        if (p->nstrings == p->strings_cap) {
            size_t cap = p->strings_cap ? p->strings_cap * 2 : 256;
            char** fresh = realloc(p->strings, cap * sizeof *fresh);
            if (!fresh) {
                p->oom = 1;
                return 0;
            }
            p->strings = fresh;
            p->strings_cap = cap;
        }
        p->strings[p->nstrings] = strdup(s);
        if (!p->strings[p->nstrings]) {
            p->oom = 1;
            return 0;
        }
        *v = p->nstrings++;
        return *v;
    }
    p->oom = 1;
    return 0;
}

static uint64_t function_id(prof_t* p, const char* name, const char* file) {
    uint64_t n = intern(p, name), f = intern(p, file);
    int found;
    uint64_t* v = map_slot(&p->funcs, n << 32 | f, &found);
    if (!v) {
        p->oom = 1;
        return 0;
    }
    if (found)
        return *v;
    *v = ++p->nfuncs;
    // Function: id=1 name=2 system_name=3 filename=4
    pb_uint(&p->tmp, 1, *v);
    pb_uint(&p->tmp, 2, n);
    pb_uint(&p->tmp, 3, n);
    pb_uint(&p->tmp, 4, f);
    pb_msg(&p->out, 5, &p->tmp);
    return *v;
}

// The location of frames[0..n) (one code address: inlined frames, then their caller).
static uint64_t location_id(prof_t* p, const model_t* m, const report_frame_t* fr, int n) {
    uint64_t ip = fr[0].address;
    int found;
    uint64_t* v = map_slot(&p->locs, ip, &found);
    if (!v) {
        p->oom = 1;
        return 0;
    }
    if (found)
        return *v;
    uint64_t id = *v = ++p->nlocs;
    pb_t* loc = &p->tmp2;
    // Location: id=1 mapping_id=2 address=3 line=4 (Line: function_id=1 line=2)
    pb_uint(loc, 1, id);
    const md_module_t* md = model_module_of(m, ip);
    if (md)
        pb_uint(loc, 2, (uint64_t)(md - m->mods) + 1);
    pb_uint(loc, 3, ip);
    for (int i = 0; i < n; i++) {
        char buf[64];
        uint64_t fid = function_id(p, ag_frame_name(&fr[i], buf, sizeof buf), fr[i].file);
        pb_uint(&p->tmp, 1, fid);
        if (fr[i].line)
            pb_uint(&p->tmp, 2, fr[i].line);
        pb_msg(loc, 4, &p->tmp);
    }
    pb_msg(&p->out, 4, loc);
    return id;
}

static void value_type(prof_t* p, int field, const char* type, const char* unit) {
    pb_uint(&p->tmp, 1, intern(p, type));
    pb_uint(&p->tmp, 2, intern(p, unit));
    pb_msg(&p->out, field, &p->tmp);
}

static int build_profile(prof_t* p, report_ctx_t* c, const aggregate_t* a) {
    model_t* m = report_model(c);
    p->strings = calloc(256, sizeof *p->strings);
    if (!p->strings)
        return -ENOMEM;
    p->strings_cap = 256;
    p->strings[p->nstrings++] = strdup("");
    value_type(p, 1, "alloc_objects", "count");
    value_type(p, 1, "alloc_space", "bytes");
    value_type(p, 1, "inuse_objects", "count");
    value_type(p, 1, "inuse_space", "bytes");

    // Mappings: id=1 memory_start=2 memory_limit=3 file_offset=4 filename=5 build_id=6
    // has_functions=7 has_filenames=8 has_line_numbers=9 has_inline_frames=10
    for (size_t i = 0; i < m->nmods; i++) {
        const md_module_t* md = &m->mods[i];
        uint64_t lo = UINT64_MAX, hi = 0;
        for (uint32_t s = 0; s < md->nsegs; s++) {
            uint64_t start = md->bias + md->segs[s][0], end = start + md->segs[s][1];
            lo = start < lo ? start : lo;
            hi = end > hi ? end : hi;
        }
        if (lo > hi)
            lo = hi = md->bias;
        char bid[2 * 64 + 1] = "";
        for (size_t k = 0; k < md->build_id_len && k < 64; k++)
            snprintf(bid + 2 * k, 3, "%02x", md->build_id[k]);
        pb_uint(&p->tmp, 1, i + 1);
        pb_uint(&p->tmp, 2, lo);
        pb_uint(&p->tmp, 3, hi);
        pb_uint(&p->tmp, 4, 0);
        pb_uint(&p->tmp, 5, intern(p, md->path));
        pb_uint(&p->tmp, 6, intern(p, bid));
        for (int f = 7; f <= 10; f++)
            pb_uint(&p->tmp, f, 1);
        pb_msg(&p->out, 3, &p->tmp);
    }

    // Samples: location_id=1 (packed, leaf first), value=2 (packed)
    uint64_t* ids = NULL;
    size_t ids_cap = 0;
    pb_t packed = {0};
    for (size_t i = 0; i < a->nsites && !p->oom; i++) {
        const ag_site_t* s = &a->sites[i];
        if (!s->is_kept || (!s->allocations && !s->leaked_blocks))
            continue;
        const report_frame_t* fr;
        int n = report_stack(c, s->stack, &fr);
        size_t nids = 0;
        if ((size_t)n + 1 > ids_cap) {
            ids_cap = (size_t)n + 16;
            uint64_t* fresh = realloc(ids, ids_cap * sizeof *ids);
            if (!fresh) {
                p->oom = 1;
                break;
            }
            ids = fresh;
        }
        for (int j = 0; j < n;) {
            int k = j;
            while (k < n - 1 && fr[k].is_inlined && fr[k + 1].address == fr[j].address)
                k++;
            ids[nids++] = location_id(p, m, fr + j, k - j + 1);
            j = k + 1;
        }
        if (nids == 0) {
            report_frame_t none = {.function = "[no stack]"};
            ids[nids++] = location_id(p, m, &none, 1);
        }
        for (size_t j = 0; j < nids; j++)
            pb_varint(&packed, ids[j]);
        pb_bytes(&p->tmp, 1, packed.p, packed.len);
        packed.len = 0;
        pb_varint(&packed, s->allocations);
        pb_varint(&packed, s->bytes);
        pb_varint(&packed, s->leaked_blocks);
        pb_varint(&packed, s->leaked_bytes);
        pb_bytes(&p->tmp, 2, packed.p, packed.len);
        packed.len = 0;
        if (packed.failed)
            p->oom = 1;
        pb_msg(&p->out, 2, &p->tmp);
    }
    free(ids);
    free(packed.p);

    // time_nanos=9 duration_nanos=10 period_type=11 period=12 comment=13 default_sample_type=14
    pb_uint(&p->out, 9, m->start_realtime_ns + (uint64_t)a->start_ns);
    pb_uint(&p->out, 10, (uint64_t)(a->end_ns - a->start_ns));
    value_type(p, 11, "space", "bytes");
    pb_uint(&p->out, 12, 1);
    char comment[512];
    snprintf(comment, sizeof comment, "heaplens: %s (pid %llu)", m->exe ? m->exe : "?",
             (unsigned long long)m->pid);
    pb_uint(&p->out, 13, intern(p, comment));
    pb_uint(&p->out, 14, intern(p, "alloc_space"));
    // The string table last: every index above is final by now.
    for (size_t i = 0; i < p->nstrings; i++)
        pb_bytes(&p->out, 6, p->strings[i] ? p->strings[i] : "",
                 p->strings[i] ? strlen(p->strings[i]) : 0);
    return p->oom || p->out.failed || p->tmp.failed || p->tmp2.failed ? -ENOMEM : 0;
}

int ag_write_pprof(FILE* out, report_ctx_t* c, const aggregate_t* a) {
    prof_t p;
    memset(&p, 0, sizeof p);
    int rc = build_profile(&p, c, a);
    if (rc == 0)
        rc = ag_write_gzip_stored(out, p.out.p ? (const void*)p.out.p : "", p.out.len);
    for (size_t i = 0; i < p.nstrings; i++)
        free(p.strings[i]);
    free(p.strings);
    free(p.out.p);
    free(p.tmp.p);
    free(p.tmp2.p);
    map_free(&p.strs);
    map_free(&p.funcs);
    map_free(&p.locs);
    return rc;
}
