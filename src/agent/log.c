// SPDX-License-Identifier: MIT
// log.c - the agent's diagnostics: its own small formatter and write(2), because stdio may
// allocate or hold locks the interrupted program owns. At most a few dozen lines per process.
//
// They go to the agent's own duplicate of the stderr the image started with, never to
// descriptor 2 itself: a program may close 2 and open a file of its own there (its data, its
// log), and the agent must never write into a descriptor it does not own. The duplicate sits
// above the program's usual numbers and is checked by identity before each message, as the
// trace's descriptor is (sink.c): a program that closes every descriptor may reuse its number.
// It is close-on-exec: an exec'd image's agent starts again from that image's descriptor 2.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "os.h"

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
        // The argument's width: int, long, long long or size_t (they differ on 32-bit systems).
        int longs = 0, is_size = 0;
        for (; *f == 'l' || *f == 'z'; f++) {
            longs += *f == 'l';
            is_size |= *f == 'z';
        }
        switch (*f) {
        case 's':
            o = put_str(o, end, va_arg(ap, const char*));
            break;
        case 'd':
        case 'i': {
            int64_t v = longs > 1 ? va_arg(ap, long long)
                        : longs   ? va_arg(ap, long)
                        : is_size ? (int64_t)va_arg(ap, ssize_t)
                                  : va_arg(ap, int);
            if (v < 0 && o < end) {
                *o++ = '-';
                v = -v;
            }
            o = put_uint(o, end, (uint64_t)v, 10);
            break;
        }
        case 'u':
        case 'x': {
            uint64_t v = longs > 1 ? va_arg(ap, unsigned long long)
                         : longs   ? va_arg(ap, unsigned long)
                         : is_size ? va_arg(ap, size_t)
                                   : va_arg(ap, unsigned);
            o = put_uint(o, end, v, *f == 'u' ? 10 : 16);
            break;
        }
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

// Descriptors from here up are left to the agent (sink.c's trace takes the same floor): programs
// number theirs from 0 upward, and a daemon that closes them all is caught by the identity check.
#define HL_LOG_FD_FLOOR 700
// Under a lower RLIMIT_NOFILE the duplicate takes the top quarter of what the program may open.
#define HL_LOG_FD_TOP_SHARE 4

static _Atomic int log_ready; // log_init ran (log_fd may still be -1: no messages)
static _Atomic int log_fd = -1;
static _Atomic int log_repairing;
static dev_t log_dev; // what the image's descriptor 2 was at start
static ino_t log_ino;

static int dup_high(int fd) {
    int high = (int)syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, HL_LOG_FD_FLOOR);
    if (high >= 0)
        return high;
    struct rlimit lim;
    if (syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, NULL, &lim) != 0 ||
        lim.rlim_cur < 2 * HL_LOG_FD_TOP_SHARE)
        return -1;
    long floor = (long)(lim.rlim_cur - lim.rlim_cur / HL_LOG_FD_TOP_SHARE);
    return (int)syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, floor);
}

static int same_file(int fd) {
    struct stat st;
    return os_fstat(fd, &st) == 0 && st.st_dev == log_dev && st.st_ino == log_ino;
}

// Once, as the agent starts (before the program's main): no stderr then, no messages ever.
void log_init(void) {
    if (atomic_exchange(&log_ready, 1))
        return;
    struct stat st;
    if (os_fstat(2, &st) != 0)
        return;
    log_dev = st.st_dev;
    log_ino = st.st_ino;
    atomic_store(&log_fd, dup_high(2));
}

void log_close(void) {
    int fd = atomic_exchange(&log_fd, -1);
    if (fd >= 0 && same_file(fd))
        close(fd);
    atomic_store(&log_ready, 0);
}

// The descriptor to write a message to, or -1. When the program closed the agent's duplicate
// (and may have reused its number: it is never closed or written then), a new one is made from
// descriptor 2 if that is still the file the image started with.
static int log_target(void) {
    if (!atomic_load(&log_ready))
        log_init();
    int fd = atomic_load(&log_fd);
    if (fd < 0 || same_file(fd))
        return fd;
    if (atomic_exchange(&log_repairing, 1))
        return -1; // another thread (or the code this handler interrupted) is at it
    fd = same_file(2) ? dup_high(2) : -1;
    atomic_store(&log_fd, fd);
    atomic_store(&log_repairing, 0);
    return fd;
}

void hl_log(const char* fmt, ...) {
    if (atomic_fetch_add(&log_lines, 1) >= HL_LOG_MAX_LINES)
        return;
    int fd = log_target();
    if (fd < 0)
        return;
    char buf[512];
    int n = hl_fmt(buf, sizeof buf, "heaplens: ");
    va_list ap;
    va_start(ap, fmt);
    n += vfmt(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    va_end(ap);
    buf[n++] = '\n';
    os_write_all(fd, buf, (size_t)n);
}
