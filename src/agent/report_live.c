// SPDX-License-Identifier: MIT
// report_live.c - the live heap by allocation stack, written straight to a descriptor. The
// walk copies (stack, size) of each matching block into agent pages under the live table's
// locks; everything slow (sorting, dladdr, formatting, write) comes after they are released.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/format.h"
#include "epoch.h"
#include "live.h"
#include "log.h"
#include "os.h"
#include "report_live.h"
#include "stacks.h"

// Room for blocks made between counting and walking; more are counted and said, not shown.
#define HL_REPORT_SLACK 4096
#define HL_REPORT_FRAMES 64 // frames shown per stack (a report is read, not re-symbolized)

typedef struct item_s {
    uint32_t stack;
    uint64_t bytes;  // one block's size, then a group's sum
    uint64_t blocks; // 1, then a group's count
} item_t;

typedef struct walk_s {
    item_t* items;
    size_t n, cap, missed;
    uint64_t missed_bytes;
    uint32_t since;
} walk_t;

static void take_one(const hl_block_t* b, void* arg) {
    walk_t* w = arg;
    if (b->is_internal || (w->since && !epoch_is_since(b->epoch, w->since)))
        return;
    if (w->n == w->cap) {
        w->missed++;
        w->missed_bytes += b->size;
        return;
    }
    w->items[w->n++] = (item_t){.stack = b->stack, .bytes = b->size, .blocks = 1};
}

// Shell sort (no allocation, no recursion): by stack, or by bytes descending.
static int by_stack(const item_t* a, const item_t* b) {
    return a->stack > b->stack;
}
static int by_bytes(const item_t* a, const item_t* b) {
    return a->bytes < b->bytes || (a->bytes == b->bytes && a->stack > b->stack);
}
static void sort_items(item_t* v, size_t n, int (*after)(const item_t*, const item_t*)) {
    size_t gap = 1;
    while (gap < n / 3)
        gap = gap * 3 + 1;
    for (; gap > 0; gap /= 3)
        for (size_t i = gap; i < n; i++) {
            item_t x = v[i];
            size_t j = i;
            for (; j >= gap && after(&v[j - gap], &x); j -= gap)
                v[j] = v[j - gap];
            v[j] = x;
        }
}

// ---------------------------------------------------------------------------------------------
// Output: a buffer on the caller's stack, written out when full
// ---------------------------------------------------------------------------------------------
typedef struct out_s {
    int fd, failed;
    size_t len;
    char buf[4096];
} out_t;

static void out_flush(out_t* o) {
    size_t off = 0;
    while (off < o->len && !o->failed) {
        long n = syscall(SYS_write, o->fd, o->buf + off, o->len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            o->failed = 1;
        else
            off += (size_t)n;
    }
    o->len = 0;
}
static void out_put(out_t* o, const char* s, size_t n) {
    while (n) {
        if (o->len == sizeof o->buf)
            out_flush(o);
        size_t k = sizeof o->buf - o->len < n ? sizeof o->buf - o->len : n;
        memcpy(o->buf + o->len, s, k);
        o->len += k, s += k, n -= k;
    }
}
static void out_str(out_t* o, const char* s) {
    out_put(o, s, strlen(s));
}
#define out_fmt(o, ...)                                                                          \
    do {                                                                                         \
        char line_[512];                                                                         \
        int n_ = hl_fmt(line_, sizeof line_, __VA_ARGS__);                                       \
        out_put(o, line_, n_ < 0 ? 0 : (size_t)n_ < sizeof line_ ? (size_t)n_ : sizeof line_ - 1); \
    } while (0)
static void out_json_string(out_t* o, const char* s) {
    if (!s) {
        out_str(o, "null");
        return;
    }
    out_put(o, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            out_put(o, e, 2);
        } else if (c < 0x20) {
            out_fmt(o, "\\u%s%x", c < 16 ? "000" : "00", c);
        } else {
            out_put(o, (const char*)&c, 1);
        }
    }
    out_put(o, "\"", 1);
}

// A frame as the analyzer's JSON writes one, from what dladdr knows (no file and line: those
// are the analyzer's, from the trace).
static void frame_json(out_t* o, uintptr_t ip) {
    Dl_info di;
    int known = dladdr((void*)(ip - 1), &di) != 0;
    out_str(o, "{\"function\": ");
    out_json_string(o, known ? di.dli_sname : NULL);
    out_str(o, ", \"file\": null, \"line\": 0, \"module\": ");
    out_json_string(o, known ? di.dli_fname : NULL);
    out_fmt(o, ", \"address\": \"0x%lx\", \"inlined\": false}", (unsigned long)ip);
}

static void frame_text(out_t* o, uintptr_t ip, int first) {
    Dl_info di;
    out_fmt(o, "==heaplens==    %s 0x%lx: ", first ? "at" : "by", (unsigned long)ip);
    if (dladdr((void*)(ip - 1), &di) && di.dli_fname) {
        if (di.dli_sname)
            out_fmt(o, "%s+0x%lx ", di.dli_sname, (unsigned long)(ip - (uintptr_t)di.dli_saddr));
        const char* base = strrchr(di.dli_fname, '/');
        out_fmt(o, "(%s)\n", base ? base + 1 : di.dli_fname);
    } else {
        out_str(o, "???\n");
    }
}

static void group_out(out_t* o, const item_t* g, int format, int first) {
    if (format == HL_REPORT_JSON)
        out_fmt(o, "%s\n    {\"bytes\": %llu, \"blocks\": %llu, \"stack\": [", first ? "" : ",",
                (unsigned long long)g->bytes, (unsigned long long)g->blocks);
    else
        out_fmt(o, "==heaplens== %llu bytes in %llu blocks allocated\n",
                (unsigned long long)g->bytes, (unsigned long long)g->blocks);
    uint32_t id = g->stack;
    for (int k = 0; id && k < HL_REPORT_FRAMES; k++) {
        uintptr_t ip;
        uint32_t parent;
        if (stack_node(id, &ip, &parent) != 0)
            break;
        if (format == HL_REPORT_JSON) {
            if (k)
                out_str(o, ", ");
            frame_json(o, ip);
        } else {
            frame_text(o, ip, k == 0);
        }
        id = parent;
    }
    out_str(o, format == HL_REPORT_JSON ? "]}" : "==heaplens==\n");
}

int report_live_write(int fd, int format, uint32_t since_epoch, int top_n) {
    walk_t w = {.since = since_epoch};
    w.cap = (size_t)live_count() + HL_REPORT_SLACK;
    size_t map_bytes = w.cap * sizeof(item_t);
    w.items = os_map(map_bytes);
    if (!w.items) {
        errno = ENOMEM;
        return -1;
    }
    epoch_lock(); // no rebase half done under the walk
    live_lock_all();
    live_for_each(take_one, &w);
    live_unlock_all();
    epoch_unlock();

    uint64_t bytes = 0, blocks = 0;
    sort_items(w.items, w.n, by_stack);
    size_t ng = 0;
    for (size_t i = 0; i < w.n; i++) {
        bytes += w.items[i].bytes, blocks++;
        if (ng && w.items[ng - 1].stack == w.items[i].stack) {
            w.items[ng - 1].bytes += w.items[i].bytes;
            w.items[ng - 1].blocks++;
        } else {
            w.items[ng++] = w.items[i];
        }
    }
    sort_items(w.items, ng, by_bytes);
    size_t shown = top_n > 0 && (size_t)top_n < ng ? (size_t)top_n : ng;

    out_t o = {.fd = fd};
    if (format == HL_REPORT_JSON) {
        out_fmt(&o, "{\"live\": {\"since_epoch\": %u, \"epoch\": %u, \"bytes\": %llu, "
                    "\"blocks\": %llu, \"stacks\": %zu, \"not_shown\": {\"bytes\": %llu, "
                    "\"blocks\": %llu}},\n  \"sites\": [",
                since_epoch, epoch_now(), (unsigned long long)bytes, (unsigned long long)blocks,
                ng, (unsigned long long)w.missed_bytes, (unsigned long long)w.missed);
    } else {
        if (since_epoch)
            out_fmt(&o, "==heaplens== live since mark %u: ", since_epoch);
        else
            out_str(&o, "==heaplens== live: ");
        out_fmt(&o, "%llu bytes in %llu blocks from %zu stacks\n", (unsigned long long)bytes,
                (unsigned long long)blocks, ng);
        if (w.missed)
            out_fmt(&o, "==heaplens== (%llu bytes in %zu blocks made during the walk not shown)\n",
                    (unsigned long long)w.missed_bytes, w.missed);
    }
    for (size_t g = 0; g < shown; g++)
        group_out(&o, &w.items[g], format, g == 0);
    if (format == HL_REPORT_JSON)
        out_str(&o, "\n  ]}\n");
    else if (shown < ng)
        out_fmt(&o, "==heaplens== (%zu more stacks)\n", ng - shown);
    out_flush(&o);
    os_unmap(w.items, map_bytes);
    if (o.failed) {
        errno = EIO;
        return -1;
    }
    return 0;
}
