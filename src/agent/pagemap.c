// SPDX-License-Identifier: MIT
// pagemap.c - runs of held pages, from /proc/self/pagemap (one 64-bit entry per page). No
// memory is allocated and no lock is taken: the leak scan calls this with the program's other
// threads stopped, one of them perhaps inside the allocator.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pagemap.h"

#define HL_PAGEMAP_PRESENT (1ull << 63)
#define HL_PAGEMAP_SWAPPED (1ull << 62)
#define HL_PAGEMAP_BATCH 512 // entries a read: 4 KiB, the span of 2 MiB of memory

int pagemap_open(hl_pagemap_t* pm) {
    long page = sysconf(_SC_PAGESIZE);
    pm->page = page > 0 ? (uintptr_t)page : 4096;
    pm->fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    return pm->fd >= 0 ? 0 : -1;
}

void pagemap_close(hl_pagemap_t* pm) {
    if (pm->fd >= 0)
        close(pm->fd);
    pm->fd = -1;
}

int pagemap_held(hl_pagemap_t* pm, uintptr_t lo, uintptr_t hi,
                 void (*fn)(uintptr_t lo, uintptr_t hi, void* arg), void* arg) {
    // One caller at a time: every scan holds the writer lock.
    static uint64_t entries[HL_PAGEMAP_BATCH];
    uintptr_t run = 0;
    int in_run = 0;
    for (uintptr_t at = lo & ~(pm->page - 1); at < hi;) {
        uintptr_t pages = (hi - at + pm->page - 1) / pm->page;
        size_t n = pages < HL_PAGEMAP_BATCH ? (size_t)pages : HL_PAGEMAP_BATCH;
        ssize_t got;
        do
            got = pread64(pm->fd, entries, n * sizeof *entries,
                          (off64_t)(at / pm->page) * (off64_t)sizeof *entries);
        while (got < 0 && errno == EINTR);
        if (got != (ssize_t)(n * sizeof *entries))
            return -1;
        for (size_t k = 0; k < n; k++, at += pm->page) {
            int held = (entries[k] & (HL_PAGEMAP_PRESENT | HL_PAGEMAP_SWAPPED)) != 0;
            if (held && !in_run) {
                run = at > lo ? at : lo;
                in_run = 1;
            } else if (!held && in_run) {
                fn(run, at, arg);
                in_run = 0;
            }
        }
    }
    if (in_run)
        fn(run, hi, arg);
    return 0;
}
