// SPDX-License-Identifier: MIT
// utf8.h - telling valid UTF-8 from the bytes a trace may carry (paths and arguments are bytes
// to the kernel, not text). JSON, XML (SVG) and protobuf strings must be UTF-8: their writers
// pass valid sequences through and write every other byte as the four characters \xHH (a
// strict parser accepts the document, and a person still sees which byte it was).
#ifndef HL_UTF8_H
#define HL_UTF8_H

#include <stddef.h>

// The length (1 to 4) of the valid UTF-8 sequence that s[0 .. n) starts with, or 0 when it
// starts none: a stray continuation byte, an overlong form, a UTF-16 surrogate, a code point
// beyond U+10FFFF, or a sequence cut short (RFC 3629, as strict decoders check it).
static inline size_t utf8_seq_len(const unsigned char* s, size_t n) {
    if (n == 0)
        return 0;
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    size_t len;
    unsigned lo = 0x80, hi = 0xbf; // the range of the second byte
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0)
            lo = 0xa0; // overlong below U+0800
        else if (c == 0xed)
            hi = 0x9f; // surrogates U+D800..DFFF
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0)
            lo = 0x90; // overlong below U+10000
        else if (c == 0xf4)
            hi = 0x8f; // beyond U+10FFFF
    } else {
        return 0;
    }
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return len;
}

#endif
