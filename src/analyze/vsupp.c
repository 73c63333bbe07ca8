// SPDX-License-Identifier: MIT
// vsupp.c - suppression files in Valgrind's format (its manual, "Suppressing errors"), so that
// the files a project keeps for memcheck keep working under heaplens memcheck.
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "demangle.h"
#include "report_valgrind.h"

typedef enum { VS_FUN, VS_OBJ, VS_SRC, VS_ANY } vs_frame_kind_t; // VS_ANY: "..."

typedef struct vs_pattern_s {
    vs_frame_kind_t kind;
    char* text;      // the pattern (VS_SRC: the file part)
    char* demangled; // VS_FUN: a mangled pattern without wildcards, demangled; else NULL
    unsigned line;   // VS_SRC: 0 for any line
} vs_pattern_t;

typedef struct vs_entry_s {
    char* name;
    char* where;         // FILE:LINE of the name
    char* kind;          // "Leak", "Free", ...; NULL when the entry is for another tool
    unsigned leak_kinds; // bit per HL_LEAK_*; Leak entries without the line match every kind
    vs_pattern_t* pats;
    size_t npats;
} vs_entry_t;

struct vsupp_s {
    vs_entry_t* v;
    size_t n;
};

// Frames a suppression may name: Valgrind's own bound (VG_DEEPEST_BACKTRACE).
#define VS_MAX_FRAMES 500
#define VS_LINE_MAX 4096

// ---------------------------------------------------------------------------------------------
// Glob with * (any run) and ? (any one character), anchored at both ends.
static int glob_match(const char* p, const char* s) {
    const char *star = NULL, *resume = NULL;
    while (*s) {
        if (*p == '?' || (*p && *p != '*' && *p == *s)) {
            p++;
            s++;
        } else if (*p == '*') {
            star = p++;
            resume = s;
        } else if (star) {
            p = star + 1;
            s = ++resume;
        } else {
            return 0;
        }
    }
    while (*p == '*')
        p++;
    return *p == 0;
}

static const char* base_name(const char* p) {
    const char* slash = p ? strrchr(p, '/') : NULL;
    return slash ? slash + 1 : p;
}

static int frame_matches(const vs_pattern_t* pt, const vg_frame_t* f) {
    switch (pt->kind) {
    case VS_FUN: {
        const char* fn = f->fn ? f->fn : "???";
        if (glob_match(pt->text, fn) || (f->mangled && glob_match(pt->text, f->mangled)))
            return 1;
        // glibc exports many functions under two names of one address (__strdup, strdup):
        // memcheck names the public one, so files written for it say fun:strdup.
        if (!strncmp(fn, "__", 2) && fn[2] && glob_match(pt->text, fn + 2))
            return 1;
        return pt->demangled && f->fn && strcmp(pt->demangled, f->fn) == 0;
    }
    case VS_OBJ:
        return glob_match(pt->text, f->obj ? f->obj : "???");
    case VS_SRC:
        return f->file && glob_match(pt->text, base_name(f->file)) &&
               (!pt->line || pt->line == f->line);
    case VS_ANY:
        return 1;
    }
    return 0;
}

// Do patterns [pi..) match frames [fi..)? The stack may go on beyond the last pattern.
static int stack_matches(const vs_entry_t* e, size_t pi, const vg_frame_t* fr, int n, int fi) {
    for (; pi < e->npats; pi++, fi++) {
        if (e->pats[pi].kind == VS_ANY) {
            while (pi + 1 < e->npats && e->pats[pi + 1].kind == VS_ANY)
                pi++;
            if (pi + 1 == e->npats)
                return 1;
            for (int k = fi; k < n; k++)
                if (stack_matches(e, pi + 1, fr, n, k))
                    return 1;
            return 0;
        }
        if (fi >= n || !frame_matches(&e->pats[pi], &fr[fi]))
            return 0;
    }
    return 1;
}

int vsupp_match(const vsupp_t* s, const char* kind, int leak_kind, const vg_frame_t* frames,
                int n) {
    for (size_t i = 0; s && i < s->n; i++) {
        const vs_entry_t* e = &s->v[i];
        if (!e->kind || strcmp(e->kind, kind) != 0)
            continue;
        if (!strcmp(kind, "Leak") && !(e->leak_kinds & (1u << leak_kind)))
            continue;
        if (stack_matches(e, 0, frames, n, 0))
            return (int)i;
    }
    return -1;
}

size_t vsupp_count(const vsupp_t* s) {
    return s ? s->n : 0;
}
const char* vsupp_name(const vsupp_t* s, size_t i) {
    return s->v[i].name;
}
const char* vsupp_where(const vsupp_t* s, size_t i) {
    return s->v[i].where;
}

// ---------------------------------------------------------------------------------------------
static void entry_free(vs_entry_t* e) {
    free(e->name);
    free(e->where);
    free(e->kind);
    for (size_t i = 0; i < e->npats; i++) {
        free(e->pats[i].text);
        free(e->pats[i].demangled);
    }
    free(e->pats);
    memset(e, 0, sizeof *e);
}

void vsupp_free(vsupp_t* s) {
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        entry_free(&s->v[i]);
    free(s->v);
    free(s);
}

// "definite,possible", "all", "none" -> bits; -1 on an unknown word.
static int parse_leak_kinds(char* list) {
    static const char* names[] = {"definite", "indirect", "possible", "reachable"};
    int bits = 0;
    for (char* tok = strtok(list, ", \t"); tok; tok = strtok(NULL, ", \t")) {
        int found = 0;
        if (!strcmp(tok, "all"))
            bits |= (1 << HL_LEAK_COUNT) - 1, found = 1;
        else if (!strcmp(tok, "none"))
            found = 1;
        for (int k = 0; k < HL_LEAK_COUNT; k++)
            if (!strcmp(tok, names[k]))
                bits |= 1 << k, found = 1;
        if (!found)
            return -1;
    }
    return bits;
}

// "Memcheck:Leak", "Memcheck,Addrcheck:Free": the kind when memcheck is among the tools, else
// NULL in *kind (an entry for another tool). -1 when the line is no TOOL:KIND.
static int parse_tool_kind(const char* line, char** kind) {
    const char* colon = strchr(line, ':');
    *kind = NULL;
    if (!colon || colon == line || !colon[1])
        return -1;
    for (const char* t = line; t < colon;) {
        const char* comma = memchr(t, ',', (size_t)(colon - t));
        size_t len = comma ? (size_t)(comma - t) : (size_t)(colon - t);
        if ((len == 8 && !strncmp(t, "Memcheck", 8)) || (len == 1 && *t == '*')) {
            *kind = strdup(colon + 1);
            return *kind ? 0 : -1;
        }
        t += len + (comma ? 1 : 0);
    }
    return 0;
}

static int add_pattern(vs_entry_t* e, const char* line) {
    vs_pattern_t pt = {0};
    if (!strcmp(line, "...")) {
        pt.kind = VS_ANY;
    } else if (!strncmp(line, "fun:", 4)) {
        pt.kind = VS_FUN;
        pt.text = strdup(line + 4);
        if (!strpbrk(line + 4, "*?"))
            pt.demangled = hl_demangle(line + 4, NULL);
    } else if (!strncmp(line, "obj:", 4)) {
        pt.kind = VS_OBJ;
        pt.text = strdup(line + 4);
    } else if (!strncmp(line, "src:", 4)) {
        pt.kind = VS_SRC;
        pt.text = strdup(line + 4);
        char* colon = pt.text ? strrchr(pt.text, ':') : NULL;
        if (colon) {
            char* end;
            unsigned long n = strtoul(colon + 1, &end, 10);
            if (!*end && end != colon + 1) {
                pt.line = (unsigned)n;
                *colon = 0;
            }
        }
    } else {
        return -1;
    }
    if (pt.kind != VS_ANY && !pt.text)
        return -1;
    vs_pattern_t* fresh = realloc(e->pats, (e->npats + 1) * sizeof *fresh);
    if (!fresh) {
        free(pt.text);
        free(pt.demangled);
        return -1;
    }
    e->pats = fresh;
    e->pats[e->npats++] = pt;
    return 0;
}

// The next line with something on it, trimmed, comments skipped; NULL at the end.
static char* next_line(FILE* f, char* buf, size_t cap, int* lineno) {
    while (fgets(buf, (int)cap, f)) {
        (*lineno)++;
        char* p = buf;
        while (*p == ' ' || *p == '\t')
            p++;
        size_t n = strcspn(p, "\r\n");
        while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
            n--;
        p[n] = 0;
        if (*p && *p != '#')
            return p;
    }
    return NULL;
}

// One entry after its "{": name, TOOL:KIND, an optional extra line, frames, "}". 0 or -1 with
// err set.
static int parse_entry(FILE* f, const char* path, int* lineno, vs_entry_t* e, char* err,
                       size_t errlen) {
    char buf[VS_LINE_MAX];
    char* line = next_line(f, buf, sizeof buf, lineno);
    if (!line || !strcmp(line, "}")) {
        snprintf(err, errlen, "%s:%d: a suppression needs a name", path, *lineno);
        return -1;
    }
    e->name = strdup(line);
    char where[VS_LINE_MAX + 32];
    snprintf(where, sizeof where, "%s:%d", path, *lineno);
    e->where = strdup(where);
    line = next_line(f, buf, sizeof buf, lineno);
    if (!line || parse_tool_kind(line, &e->kind) != 0) {
        snprintf(err, errlen, "%s:%d: expected TOOL:KIND (such as Memcheck:Leak)", path, *lineno);
        return -1;
    }
    e->leak_kinds = (1u << HL_LEAK_COUNT) - 1;
    int is_first = 1;
    while ((line = next_line(f, buf, sizeof buf, lineno))) {
        if (!strcmp(line, "}"))
            return 0;
        if (is_first && !strncmp(line, "match-leak-kinds:", 17)) {
            int bits = parse_leak_kinds(line + 17);
            if (bits < 0) {
                snprintf(err, errlen, "%s:%d: match-leak-kinds: unknown kind", path, *lineno);
                return -1;
            }
            e->leak_kinds = (unsigned)bits;
        } else if (is_first && e->kind && !strcmp(e->kind, "Param")) {
            // The system call's parameter: heaplens reports no Param errors.
        } else if (e->npats >= VS_MAX_FRAMES || add_pattern(e, line) != 0) {
            snprintf(err, errlen, "%s:%d: expected fun:, obj:, src:, ... or }", path, *lineno);
            return -1;
        }
        is_first = 0;
    }
    snprintf(err, errlen, "%s:%d: the suppression '%s' has no closing }", path, *lineno, e->name);
    return -1;
}

vsupp_t* vsupp_load(vsupp_t* s, const char* path, char* err, size_t errlen) {
    FILE* f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    int is_new = s == NULL;
    if (is_new && !(s = calloc(1, sizeof *s))) {
        fclose(f);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    size_t had = s->n;
    char buf[VS_LINE_MAX];
    int lineno = 0, failed = 0;
    char* line;
    while (!failed && (line = next_line(f, buf, sizeof buf, &lineno))) {
        if (strcmp(line, "{") != 0) {
            snprintf(err, errlen, "%s:%d: expected { to start a suppression", path, lineno);
            failed = 1;
            break;
        }
        vs_entry_t* fresh = realloc(s->v, (s->n + 1) * sizeof *fresh);
        if (!fresh) {
            snprintf(err, errlen, "out of memory");
            failed = 1;
            break;
        }
        s->v = fresh;
        vs_entry_t* e = &s->v[s->n++];
        memset(e, 0, sizeof *e);
        failed = parse_entry(f, path, &lineno, e, err, errlen) != 0;
    }
    fclose(f);
    if (!failed)
        return s;
    while (s->n > had)
        entry_free(&s->v[--s->n]);
    if (is_new)
        vsupp_free(s);
    return NULL;
}
