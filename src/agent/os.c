// SPDX-License-Identifier: MIT
// os.c - raw system calls for the agent's own needs. They go through syscall(2), never the
// interposed libc names, so the agent's memory is never recorded and never recurses.
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent.h"

// Every region the agent maps, so the leak scan can leave them out of its roots.
#define HL_MAX_AGENT_RANGES 16384
static uintptr_t agent_ranges[HL_MAX_AGENT_RANGES][2];
static _Atomic size_t agent_range_count; // slots ever used; freed slots are reused
static _Atomic int agent_range_lock;

static void remember_range(uintptr_t lo, uintptr_t hi) {
    while (atomic_exchange_explicit(&agent_range_lock, 1, memory_order_acquire))
        ;
    size_t n = atomic_load(&agent_range_count), i = 0;
    while (i < n && agent_ranges[i][1] != 0)
        i++;
    if (i < HL_MAX_AGENT_RANGES) {
        agent_ranges[i][0] = lo;
        agent_ranges[i][1] = hi;
        if (i == n)
            atomic_store(&agent_range_count, n + 1);
    } else {
        hl_log("more than %d agent mappings: the leak scan may take agent pages for roots",
               HL_MAX_AGENT_RANGES);
    }
    atomic_store_explicit(&agent_range_lock, 0, memory_order_release);
}

static void* map_flags(size_t size, int extra) {
    long r = syscall(SYS_mmap, NULL, size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | extra, -1, 0);
    if (r < 0 && r > -4096)
        return NULL;
    remember_range((uintptr_t)r, (uintptr_t)r + size);
    return (void*)r;
}

// For tables that are dense and touched all over as soon as they exist (the live table of a
// program holding millions of blocks): from 1 MiB on they are populated in one call rather
// than one fault per page (a kernel without MADV_POPULATE_WRITE faults lazily). Huge pages
// were slower here: with the usual defrag=madvise setting the kernel compacts memory to find
// them, and the program waits.
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
void* os_map_dense(size_t size) {
    void* p = map_flags(size, 0);
    if (p && size >= (1u << 20))
        syscall(SYS_madvise, p, size, MADV_POPULATE_WRITE);
    return p;
}

void* os_map(size_t size) { return map_flags(size, 0); }
void* os_reserve(size_t size) { return map_flags(size, MAP_NORESERVE); }

void os_unmap(void* p, size_t size) {
    while (atomic_exchange_explicit(&agent_range_lock, 1, memory_order_acquire))
        ;
    size_t n = atomic_load(&agent_range_count);
    for (size_t i = 0; i < n && i < HL_MAX_AGENT_RANGES; i++)
        if (agent_ranges[i][0] == (uintptr_t)p)
            agent_ranges[i][0] = agent_ranges[i][1] = 0;
    atomic_store_explicit(&agent_range_lock, 0, memory_order_release);
    syscall(SYS_munmap, p, size);
}

int os_is_agent_range(uintptr_t lo, uintptr_t hi) {
    size_t n = atomic_load(&agent_range_count);
    for (size_t i = 0; i < n && i < HL_MAX_AGENT_RANGES; i++)
        if (lo < agent_ranges[i][1] && hi > agent_ranges[i][0])
            return 1;
    return 0;
}

size_t os_agent_ranges(uintptr_t (*out)[2], size_t max) {
    size_t n = atomic_load(&agent_range_count), k = 0;
    for (size_t i = 0; i < n && i < HL_MAX_AGENT_RANGES && k < max; i++) {
        if (agent_ranges[i][1] == 0)
            continue;
        out[k][0] = agent_ranges[i][0];
        out[k][1] = agent_ranges[i][1];
        k++;
    }
    return k;
}

long os_write_all(int fd, const void* buf, size_t len) {
    const char* p = buf;
    while (len > 0) {
        long r = syscall(SYS_write, fd, p, len);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (r == 0)
            return -EIO;
        p += r;
        len -= (size_t)r;
    }
    return 0;
}

int os_gettid(void) { return (int)syscall(SYS_gettid); }

void os_futex_wait(_Atomic int* addr, int expected, long timeout_ns) {
    struct timespec ts = {timeout_ns / 1000000000L, timeout_ns % 1000000000L};
    syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, expected, timeout_ns >= 0 ? &ts : NULL, NULL, 0);
}

void os_futex_wake(_Atomic int* addr, int count) {
    syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
}

int os_tgkill(int pid, int tid, int sig) { return (int)syscall(SYS_tgkill, pid, tid, sig); }

// ---------------------------------------------------------------------------------------------
// Mappings the allocator underneath makes for itself (jemalloc, tcmalloc, mimalloc call mmap
// through the interposed name while the agent is inside their malloc): heap and allocator
// metadata, never roots. Stale pointers in a free list would otherwise keep lost blocks alive.
// ---------------------------------------------------------------------------------------------
#define HL_MAX_ALLOCATOR_RANGES 8192
static uintptr_t allocator_ranges[HL_MAX_ALLOCATOR_RANGES][2];
static size_t allocator_range_count;
static _Atomic int allocator_range_lock;

void os_note_allocator_map(uintptr_t lo, uintptr_t hi) {
    while (atomic_exchange_explicit(&allocator_range_lock, 1, memory_order_acquire))
        ;
    size_t i = 0;
    while (i < allocator_range_count && allocator_ranges[i][1] != 0)
        i++;
    if (i < HL_MAX_ALLOCATOR_RANGES) {
        allocator_ranges[i][0] = lo;
        allocator_ranges[i][1] = hi;
        if (i == allocator_range_count)
            allocator_range_count++;
    }
    atomic_store_explicit(&allocator_range_lock, 0, memory_order_release);
}

void os_note_allocator_unmap(uintptr_t lo, uintptr_t hi) {
    while (atomic_exchange_explicit(&allocator_range_lock, 1, memory_order_acquire))
        ;
    for (size_t i = 0; i < allocator_range_count; i++) {
        uintptr_t* r = allocator_ranges[i];
        if (r[1] == 0 || hi <= r[0] || lo >= r[1])
            continue;
        if (lo <= r[0] && hi >= r[1])
            r[0] = r[1] = 0; // gone
        else if (lo <= r[0])
            r[0] = hi;       // the front went
        else if (hi >= r[1])
            r[1] = lo;       // the back went
        // a hole in the middle: keep the whole range (holes are only ever subtracted)
    }
    atomic_store_explicit(&allocator_range_lock, 0, memory_order_release);
}

size_t os_allocator_ranges(uintptr_t (*out)[2], size_t max) {
    size_t k = 0;
    for (size_t i = 0; i < allocator_range_count && k < max; i++) {
        if (allocator_ranges[i][1] == 0)
            continue;
        out[k][0] = allocator_ranges[i][0];
        out[k][1] = allocator_ranges[i][1];
        k++;
    }
    return k;
}
