// SPDX-License-Identifier: MIT
// log.c - the agent's diagnostics: its own small formatter and write(2), because stdio may
// allocate or hold locks the interrupted program owns. At most a few dozen lines per process.
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdint.h>
#include <unistd.h>

#include "agent.h"

static _Atomic int log_lines;
#define HL_LOG_MAX_LINES 32

static char* put_str(char* o, char* end, const char* s) {
    if (!s)
        s = "(null)";
    while (*s && o < end)
        *o++ = *s++;
    return o;
}

static char* put_uint(char* o, char* end, uint64_t v, unsigned base) {
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = "0123456789abcdef"[v % base];
        v /= base;
    } while (v);
    while (n > 0 && o < end)
        *o++ = tmp[--n];
    return o;
}

// Supports %s %d %i %u %x %p %zu %ld %lu %lx %llu and %%: all the agent needs.
static int vfmt(char* buf, size_t cap, const char* fmt, va_list ap) {
    char *o = buf, *end = buf + (cap ? cap - 1 : 0);
    for (const char* f = fmt; *f && o < end; f++) {
        if (*f != '%') {
            *o++ = *f;
            continue;
        }
        f++;
        int longs = 0;
        while (*f == 'l' || *f == 'z') {
            longs++;
            f++;
        }
        switch (*f) {
        case 's':
            o = put_str(o, end, va_arg(ap, const char*));
            break;
        case 'd':
        case 'i': {
            int64_t v = longs ? va_arg(ap, long) : va_arg(ap, int);
            if (v < 0 && o < end) {
                *o++ = '-';
                v = -v;
            }
            o = put_uint(o, end, (uint64_t)v, 10);
            break;
        }
        case 'u':
            o = put_uint(o, end, longs ? va_arg(ap, unsigned long) : va_arg(ap, unsigned), 10);
            break;
        case 'x':
            o = put_uint(o, end, longs ? va_arg(ap, unsigned long) : va_arg(ap, unsigned), 16);
            break;
        case 'p':
            o = put_str(o, end, "0x");
            o = put_uint(o, end, (uintptr_t)va_arg(ap, void*), 16);
            break;
        case '%':
            *o++ = '%';
            break;
        default:
            break;
        }
    }
    if (cap)
        *o = 0;
    return (int)(o - buf);
}

int hl_fmt(char* buf, size_t cap, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vfmt(buf, cap, fmt, ap);
    va_end(ap);
    return n;
}

void hl_log(const char* fmt, ...) {
    if (atomic_fetch_add(&log_lines, 1) >= HL_LOG_MAX_LINES)
        return;
    char buf[512];
    int n = hl_fmt(buf, sizeof buf, "heaplens: ");
    va_list ap;
    va_start(ap, fmt);
    n += vfmt(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    va_end(ap);
    buf[n++] = '\n';
    os_write_all(2, buf, (size_t)n);
}
