// SPDX-License-Identifier: MIT
// json_check.h - is a document one valid JSON value (RFC 8259, in strict UTF-8)? For input that
// must be a JSON report before a page is made of it (heaplens html), and for the tests that
// check what the writers make. Reads without building anything: memory is a few words whatever
// the input, and nesting deeper than JSON_CHECK_DEPTH_MAX is refused (no report nests that far).
#ifndef HL_JSON_CHECK_H
#define HL_JSON_CHECK_H

#include <stddef.h>

#define JSON_CHECK_DEPTH_MAX 256
#define JSON_CHECK_KEYS_MAX 8

typedef struct json_check_s {
    // in: top-level keys to look for (NULL-terminated, at most JSON_CHECK_KEYS_MAX), or NULL
    const char* const* keys;
    // out
    int is_object;     // the value is an object
    unsigned found;    // bit i: keys[i] is one of the object's own keys
    size_t error_at;   // byte offset of the first error
    const char* error; // what it is, NULL when valid
} json_check_t;

// 0 when s[0 .. n) is one JSON value with nothing but white space around it; -1 otherwise, with
// c->error and c->error_at set.
int json_check(const char* s, size_t n, json_check_t* c);

#endif
