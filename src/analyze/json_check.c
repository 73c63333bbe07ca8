// SPDX-License-Identifier: MIT
// json_check.c - a JSON syntax checker (json_check.h): a recursive descent over the grammar of
// RFC 8259 that keeps nothing but where it is.
#include "json_check.h"

#include <string.h>

#include "utf8.h"

typedef struct jp_s {
    const unsigned char* p;
    const unsigned char* start;
    const unsigned char* end;
    json_check_t* c;
} jp_t;

static int fail(jp_t* j, const char* why) {
    if (!j->c->error) {
        j->c->error = why;
        j->c->error_at = (size_t)(j->p - j->start);
    }
    return -1;
}

static void skip_ws(jp_t* j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static int is_hex(unsigned char ch) {
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
}

// A string at j->p (its opening quote); *key (may be NULL) is set to its raw bytes.
static int string(jp_t* j, const unsigned char** key, size_t* keylen) {
    const unsigned char* from = ++j->p;
    while (j->p < j->end && *j->p != '"') {
        unsigned char ch = *j->p;
        if (ch < 0x20)
            return fail(j, "a control character inside a string");
        if (ch == '\\') {
            if (j->end - j->p < 2)
                return fail(j, "a string cut short");
            unsigned char e = j->p[1];
            if (e == 'u') {
                if (j->end - j->p < 6 || !is_hex(j->p[2]) || !is_hex(j->p[3]) || !is_hex(j->p[4]) ||
                    !is_hex(j->p[5]))
                    return fail(j, "a bad \\u escape");
                j->p += 6;
            } else if (e && strchr("\"\\/bfnrt", e)) {
                j->p += 2;
            } else {
                return fail(j, "a bad escape");
            }
            continue;
        }
        size_t n = utf8_seq_len(j->p, (size_t)(j->end - j->p));
        if (n == 0)
            return fail(j, "a byte that is not UTF-8");
        j->p += n;
    }
    if (j->p >= j->end)
        return fail(j, "a string without its closing quote");
    if (key) {
        *key = from;
        *keylen = (size_t)(j->p - from);
    }
    j->p++;
    return 0;
}

static int digits(jp_t* j) {
    const unsigned char* from = j->p;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
        j->p++;
    return j->p > from ? 0 : fail(j, "a number without digits");
}

static int number(jp_t* j) {
    if (*j->p == '-')
        j->p++;
    if (j->p < j->end && *j->p == '0')
        j->p++;
    else if (digits(j) != 0)
        return -1;
    if (j->p < j->end && *j->p == '.') {
        j->p++;
        if (digits(j) != 0)
            return -1;
    }
    if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
        j->p++;
        if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
            j->p++;
        if (digits(j) != 0)
            return -1;
    }
    return 0;
}

static int literal(jp_t* j, const char* word) {
    size_t n = strlen(word);
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, word, n) != 0)
        return fail(j, "an unexpected character");
    j->p += n;
    return 0;
}

static int value(jp_t* j, int depth);

static void note_key(jp_t* j, const unsigned char* key, size_t len) {
    for (int i = 0; j->c->keys && j->c->keys[i] && i < JSON_CHECK_KEYS_MAX; i++)
        if (strlen(j->c->keys[i]) == len && memcmp(j->c->keys[i], key, len) == 0)
            j->c->found |= 1u << i;
}

// An object or array at j->p (its opening bracket).
static int container(jp_t* j, int depth) {
    int is_object = *j->p == '{';
    unsigned char close = is_object ? '}' : ']';
    if (depth >= JSON_CHECK_DEPTH_MAX)
        return fail(j, "nested too deep");
    j->p++;
    skip_ws(j);
    if (j->p < j->end && *j->p == close) {
        j->p++;
        return 0;
    }
    for (;;) {
        skip_ws(j);
        if (is_object) {
            const unsigned char* key = NULL;
            size_t len = 0;
            if (j->p >= j->end || *j->p != '"')
                return fail(j, "an object key that is not a string");
            if (string(j, &key, &len) != 0)
                return -1;
            if (depth == 0)
                note_key(j, key, len);
            skip_ws(j);
            if (j->p >= j->end || *j->p != ':')
                return fail(j, "a key without ':'");
            j->p++;
        }
        if (value(j, depth + 1) != 0)
            return -1;
        skip_ws(j);
        if (j->p < j->end && *j->p == ',') {
            j->p++;
            continue;
        }
        if (j->p < j->end && *j->p == close) {
            j->p++;
            return 0;
        }
        return fail(j, is_object ? "an object without its '}'" : "an array without its ']'");
    }
}

static int value(jp_t* j, int depth) {
    skip_ws(j);
    if (j->p >= j->end)
        return fail(j, "a value missing");
    switch (*j->p) {
    case '{':
    case '[':
        return container(j, depth);
    case '"':
        return string(j, NULL, NULL);
    case 't':
        return literal(j, "true");
    case 'f':
        return literal(j, "false");
    case 'n':
        return literal(j, "null");
    default:
        if (*j->p == '-' || (*j->p >= '0' && *j->p <= '9'))
            return number(j);
        return fail(j, "an unexpected character");
    }
}

int json_check(const char* s, size_t n, json_check_t* c) {
    c->is_object = 0;
    c->found = 0;
    c->error = NULL;
    c->error_at = 0;
    jp_t j = {.p = (const unsigned char*)s,
              .start = (const unsigned char*)s,
              .end = (const unsigned char*)s + n,
              .c = c};
    skip_ws(&j);
    c->is_object = j.p < j.end && *j.p == '{';
    if (value(&j, 0) != 0)
        return -1;
    skip_ws(&j);
    if (j.p != j.end)
        return fail(&j, "more after the value");
    return 0;
}
