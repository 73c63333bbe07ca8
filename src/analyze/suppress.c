// SPDX-License-Identifier: MIT
// suppress.c - LeakSanitizer-style suppressions: "leak:PATTERN" lines; a pattern matches a
// frame's function, source file or module as a substring, with * for any run of characters,
// ^ anchoring at the start and $ at the end. '#' starts a comment.
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

struct suppressions_s {
    char** patterns;
    size_t n;
};

static int match_here(const char* pat, const char* s, int anchored_end);

// Glob with '*' against s starting exactly at s.
static int match_here(const char* pat, const char* s, int anchored_end) {
    for (; *pat; pat++, s++) {
        if (*pat == '*') {
            while (pat[1] == '*')
                pat++;
            if (!pat[1])
                return 1;
            for (; *s; s++)
                if (match_here(pat + 1, s, anchored_end))
                    return 1;
            return match_here(pat + 1, s, anchored_end);
        }
        if (*s != *pat)
            return 0;
    }
    return anchored_end ? *s == 0 : 1;
}

static int template_match(const char* pat, const char* s) {
    if (!s || !*s)
        return 0;
    size_t len = strlen(pat);
    int anchored_start = pat[0] == '^';
    int anchored_end = len > 0 && pat[len - 1] == '$';
    char buf[1024];
    size_t off = anchored_start ? 1 : 0, blen = len - off - (size_t)anchored_end;
    if (blen >= sizeof buf)
        return 0;
    memcpy(buf, pat + off, blen);
    buf[blen] = 0;
    if (anchored_start)
        return match_here(buf, s, anchored_end);
    for (const char* p = s; *p; p++)
        if (match_here(buf, p, anchored_end))
            return 1;
    return 0;
}

suppressions_t* suppressions_load(const char* path, char* err, size_t errlen) {
    FILE* f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    suppressions_t* s = calloc(1, sizeof *s);
    char line[2048];
    int lineno = 0;
    while (s && fgets(line, sizeof line, f)) {
        lineno++;
        char* p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        p[strcspn(p, "\r\n")] = 0;
        if (!*p || *p == '#')
            continue;
        if (strncmp(p, "leak:", 5) != 0) {
            snprintf(err, errlen, "%s:%d: expected leak:PATTERN", path, lineno);
            suppressions_free(s);
            fclose(f);
            return NULL;
        }
        char** fresh = realloc(s->patterns, (s->n + 1) * sizeof *fresh);
        if (!fresh)
            break;
        s->patterns = fresh;
        s->patterns[s->n++] = strdup(p + 5);
    }
    fclose(f);
    return s;
}

void suppressions_free(suppressions_t* s) {
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        free(s->patterns[i]);
    free(s->patterns);
    free(s);
}

int suppressions_match(const suppressions_t* s, const report_frame_t* fr, int n) {
    for (size_t i = 0; s && i < s->n; i++)
        for (int k = 0; k < n; k++)
            if (template_match(s->patterns[i], fr[k].function) ||
                template_match(s->patterns[i], fr[k].file) ||
                template_match(s->patterns[i], fr[k].module))
                return 1;
    return 0;
}
