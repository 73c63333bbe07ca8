// SPDX-License-Identifier: MIT
// report_flame.c - call sites as a tree of frames, outermost first: written as folded stacks
// ("main;f;g VALUE", what flamegraph.pl, speedscope and inferno read) or drawn as a standalone
// SVG flame graph (no script, no external resource: <rect>+<text> with <title> tooltips).
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "aggregate.h"
#include "utf8.h"

typedef struct fnode_s {
    char* name;
    uint64_t total, self;
    int first_child, next_sibling; // indices, -1: none
    int depth;
} fnode_t;

typedef struct ftree_s {
    fnode_t* v;
    size_t n, cap;
    int max_depth;
} ftree_t;

static int fnode_new(ftree_t* t, const char* name, int depth) {
    fnode_t* fresh = md_grow(t->v, &t->cap, t->n + 1, sizeof *fresh);
    if (!fresh)
        return -1;
    t->v = fresh;
    char* dup = strdup(name);
    if (!dup)
        return -1;
    t->v[t->n] = (fnode_t){.name = dup, .first_child = -1, .next_sibling = -1, .depth = depth};
    if (depth > t->max_depth)
        t->max_depth = depth;
    return (int)t->n++;
}

static int fnode_child(ftree_t* t, int parent, const char* name) {
    int last = -1;
    for (int c = t->v[parent].first_child; c >= 0; c = t->v[c].next_sibling) {
        if (!strcmp(t->v[c].name, name))
            return c;
        last = c;
    }
    int c = fnode_new(t, name, t->v[parent].depth + 1);
    if (c < 0)
        return -1;
    if (last < 0)
        t->v[parent].first_child = c;
    else
        t->v[last].next_sibling = c;
    return c;
}

static void ftree_free(ftree_t* t) {
    for (size_t i = 0; i < t->n; i++)
        free(t->v[i].name);
    free(t->v);
}

// The tree of the kept sites by metric. Node 0 is the root ("all").
static int ftree_build(ftree_t* t, report_ctx_t* c, const aggregate_t* a, int metric) {
    memset(t, 0, sizeof *t);
    if (fnode_new(t, "all", 0) < 0)
        return -ENOMEM;
    for (size_t i = 0; i < a->nsites; i++) {
        const ag_site_t* s = &a->sites[i];
        uint64_t v = s->is_kept ? ag_site_metric(s, metric) : 0;
        if (!v)
            continue;
        const report_frame_t* fr;
        int n = report_stack(c, s->stack, &fr);
        int node = 0;
        t->v[0].total += v;
        if (n == 0) {
            node = fnode_child(t, 0, "[no stack]");
            if (node < 0)
                return -ENOMEM;
            t->v[node].total += v;
        }
        for (int j = n - 1; j >= 0; j--) {
            char buf[64];
            node = fnode_child(t, node, ag_frame_name(&fr[j], buf, sizeof buf));
            if (node < 0)
                return -ENOMEM;
            t->v[node].total += v;
        }
        t->v[node].self += v;
    }
    return 0;
}

// ---------------------------------------------------------------------------------------------
// Folded stacks
// ---------------------------------------------------------------------------------------------
static void folded_name(FILE* out, const char* s) {
    for (; *s; s++)
        fputc(*s == ';' ? ':' : (unsigned char)*s < 0x20 ? ' ' : *s, out);
}

static void folded_walk(FILE* out, const ftree_t* t, int node, int* path, int depth) {
    path[depth] = node;
    const fnode_t* f = &t->v[node];
    if (f->self && depth > 0) {
        for (int i = 1; i <= depth; i++) {
            if (i > 1)
                fputc(';', out);
            folded_name(out, t->v[path[i]].name);
        }
        fprintf(out, " %llu\n", (unsigned long long)f->self);
    }
    for (int ch = f->first_child; ch >= 0; ch = t->v[ch].next_sibling)
        folded_walk(out, t, ch, path, depth + 1);
}

int ag_write_collapsed(FILE* out, report_ctx_t* c, const aggregate_t* a, int metric) {
    ftree_t t;
    int rc = ftree_build(&t, c, a, metric);
    int* path = rc == 0 ? calloc((size_t)t.max_depth + 2, sizeof *path) : NULL;
    if (path)
        folded_walk(out, &t, 0, path, 0);
    else
        rc = -ENOMEM;
    free(path);
    ftree_free(&t);
    if (rc == 0 && ferror(out))
        rc = -EIO;
    return rc;
}

// ---------------------------------------------------------------------------------------------
// SVG
// ---------------------------------------------------------------------------------------------
#define SVG_WIDTH 1200
#define SVG_PAD 10
#define SVG_FRAME 16
#define SVG_TOP 48
#define SVG_CHAR_W 7.0

// At most max characters of s as XML text. XML wants UTF-8 without control characters (nor
// U+FFFE, U+FFFF): a byte that is not part of valid UTF-8 is written as the text \xHH (utf8.h),
// and a character is never cut in half.
static void xml_text(FILE* out, const char* s, size_t max) {
    size_t left = strlen(s);
    for (size_t chars = 0; left > 0 && chars < max; chars++) {
        const unsigned char* p = (const unsigned char*)s;
        size_t n = utf8_seq_len(p, left);
        int is_noncharacter = n == 3 && p[0] == 0xef && p[1] == 0xbf && p[2] >= 0xbe;
        if (n == 0 || is_noncharacter) {
            fprintf(out, "\\x%02X", *p);
            n = 1;
        } else if (n > 1) {
            fwrite(p, 1, n, out);
        }
        s += n;
        left -= n;
        if (n > 1 || p[0] >= 0x80)
            continue;
        unsigned char ch = p[0];
        switch (ch) {
        case '&':
            fputs("&amp;", out);
            break;
        case '<':
            fputs("&lt;", out);
            break;
        case '>':
            fputs("&gt;", out);
            break;
        case '"':
            fputs("&quot;", out);
            break;
        case '\'':
            fputs("&apos;", out);
            break;
        default:
            fputc(ch < 0x20 || ch == 0x7f ? ' ' : ch, out);
        }
    }
}

static uint32_t name_hash(const char* s) {
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

typedef struct svg_s {
    FILE* out;
    const ftree_t* t;
    double scale; // pixels per unit of metric
    int height;
    const char* unit;
} svg_t;

static void svg_walk(svg_t* g, int node, double x) {
    const fnode_t* f = &g->t->v[node];
    double w = (double)f->total * g->scale;
    if (w < 0.1)
        return;
    // A frame is never wider than the whole graph, even in a trace whose sizes wrapped the
    // root's total around (a damaged one): its label's length is an int.
    if (w > SVG_WIDTH - 2 * SVG_PAD)
        w = SVG_WIDTH - 2 * SVG_PAD;
    double y = g->height - SVG_PAD - (f->depth + 1) * SVG_FRAME;
    uint32_t h = name_hash(f->name);
    int r = 205 + (int)(h % 50), gr = (int)((h >> 8) % 230), b = (int)((h >> 16) % 55);
    if (node == 0)
        r = 230, gr = 230, b = 230;
    double share = g->t->v[0].total ? 100.0 * (double)f->total / (double)g->t->v[0].total : 0;
    fputs("<g><title>", g->out);
    xml_text(g->out, f->name, (size_t)-1);
    fprintf(g->out, " (%llu %s, %.2f%%)</title>", (unsigned long long)f->total, g->unit, share);
    fprintf(g->out,
            "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"rgb(%d,%d,%d)\" "
            "rx=\"2\" ry=\"2\"/>",
            x, y, w, SVG_FRAME - 1, r, gr, b);
    int chars = (int)((w - 6) / SVG_CHAR_W);
    if (chars >= 3) {
        size_t len = strlen(f->name);
        fprintf(g->out, "<text x=\"%.1f\" y=\"%.1f\">", x + 3, y + 11.5);
        if (len <= (size_t)chars) {
            xml_text(g->out, f->name, len);
        } else {
            xml_text(g->out, f->name, (size_t)chars - 2);
            fputs("..", g->out);
        }
        fputs("</text>", g->out);
    }
    fputs("</g>\n", g->out);
    double cx = x;
    for (int ch = f->first_child; ch >= 0; ch = g->t->v[ch].next_sibling) {
        svg_walk(g, ch, cx);
        cx += (double)g->t->v[ch].total * g->scale;
    }
}

int ag_write_flamegraph(FILE* out, report_ctx_t* c, const aggregate_t* a, int metric,
                        const char* title) {
    ftree_t t;
    int rc = ftree_build(&t, c, a, metric);
    if (rc != 0) {
        ftree_free(&t);
        return rc;
    }
    int height = SVG_TOP + (t.max_depth + 1) * SVG_FRAME + SVG_PAD * 2;
    const char* unit = metric == AG_METRIC_ALLOCATIONS || metric == AG_METRIC_TEMPORARY
                           ? "allocations"
                           : "bytes";
    fprintf(out,
            "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
            "<svg version=\"1.1\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
            "xmlns=\"http://www.w3.org/2000/svg\">\n"
            "<style>text { font-family: Verdana, sans-serif; font-size: 12px; fill: #000; }\n"
            "rect:hover { stroke: #000; stroke-width: 0.5; }\n"
            ".title { font-size: 17px; } .sub { fill: #555; }</style>\n"
            "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#f8f8f8\"/>\n"
            "<text class=\"title\" x=\"%d\" y=\"24\" text-anchor=\"middle\">",
            SVG_WIDTH, height, SVG_WIDTH, height, SVG_WIDTH, height, SVG_WIDTH / 2);
    xml_text(out, title ? title : "heaplens", (size_t)-1);
    fprintf(out,
            "</text>\n<text class=\"sub\" x=\"%d\" y=\"40\" text-anchor=\"middle\">%s: %llu %s"
            "</text>\n",
            SVG_WIDTH / 2, ag_metric_name(metric), (unsigned long long)t.v[0].total, unit);
    if (t.v[0].total) {
        svg_t g = {.out = out,
                   .t = &t,
                   .scale = (double)(SVG_WIDTH - 2 * SVG_PAD) / (double)t.v[0].total,
                   .height = height,
                   .unit = unit};
        svg_walk(&g, 0, SVG_PAD);
    } else {
        fprintf(out, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">(nothing to show)</text>\n",
                SVG_WIDTH / 2, height - SVG_PAD - 4);
    }
    fputs("</svg>\n", out);
    ftree_free(&t);
    return ferror(out) ? -EIO : 0;
}
