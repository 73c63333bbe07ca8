// SPDX-License-Identifier: MIT
// os.c - raw system calls for the agent's own needs. They go through syscall(2), never the
// interposed libc names, so the agent's memory is never recorded and never recurses.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "log.h"
#include "os.h"

// ---------------------------------------------------------------------------------------------
// Sets of address ranges: the agent's own mappings, and those the allocator underneath makes for
// itself. The leak scan takes neither for roots. A slot freed by a removal is used again.
// ---------------------------------------------------------------------------------------------
typedef struct range_set_s {
    uintptr_t (*r)[2];
    size_t max;
    _Atomic size_t count; // slots ever used
    _Atomic int lock;
    const char* what; // for the one message when the set is full
} range_set_t;

static void set_lock(range_set_t* s) {
    while (atomic_exchange_explicit(&s->lock, 1, memory_order_acquire))
        ;
}
static void set_unlock(range_set_t* s) {
    atomic_store_explicit(&s->lock, 0, memory_order_release);
}

static void range_add(range_set_t* s, uintptr_t lo, uintptr_t hi) {
    set_lock(s);
    size_t n = atomic_load(&s->count), i = 0;
    while (i < n && s->r[i][1] != 0)
        i++;
    if (i < s->max) {
        s->r[i][0] = lo;
        s->r[i][1] = hi;
        if (i == n)
            atomic_store(&s->count, n + 1);
    } else {
        hl_log("more than %zu %s: the leak scan may take some of them for roots", s->max, s->what);
    }
    set_unlock(s);
}

// [lo, hi) is unmapped: ranges inside it go, ranges it cuts at one end shrink (a hole in the
// middle keeps the whole range: holes are only ever subtracted).
static void range_subtract(range_set_t* s, uintptr_t lo, uintptr_t hi) {
    set_lock(s);
    size_t n = atomic_load(&s->count);
    for (size_t i = 0; i < n; i++) {
        uintptr_t* r = s->r[i];
        if (r[1] == 0 || hi <= r[0] || lo >= r[1])
            continue;
        if (lo <= r[0] && hi >= r[1])
            r[0] = r[1] = 0;
        else if (lo <= r[0])
            r[0] = hi;
        else if (hi >= r[1])
            r[1] = lo;
    }
    set_unlock(s);
}

static size_t range_list(range_set_t* s, uintptr_t (*out)[2], size_t max) {
    size_t n = atomic_load(&s->count), k = 0;
    for (size_t i = 0; i < n && k < max; i++) {
        if (s->r[i][1] == 0)
            continue;
        out[k][0] = s->r[i][0];
        out[k][1] = s->r[i][1];
        k++;
    }
    return k;
}

static uintptr_t agent_slots[16384][2];
static range_set_t agent_ranges = {agent_slots, 16384, 0, 0, "agent mappings"};
static uintptr_t allocator_slots[8192][2];
static range_set_t allocator_ranges = {allocator_slots, 8192, 0, 0, "allocator mappings"};

static void* map_flags(size_t size, int extra) {
    long r = syscall(HL_SYS_MMAP, NULL, size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | extra, -1, 0);
    if (r < 0 && r > -4096)
        return NULL;
    range_add(&agent_ranges, (uintptr_t)r, (uintptr_t)r + size);
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
    if (p)
        syscall(SYS_madvise, p, size, MADV_POPULATE_WRITE);
    return p;
}

// A table probed at random all over, larger than the TLB reaches in small pages (the stacks'
// table of a program with millions of call paths): every probe would be a page walk as well as
// a cache miss. Aligned to a huge page and asked for in them; the slack around it stays
// mapped, untouched. Compaction stalls (what made huge pages slower for the live table) are
// paid once per table, which grows four times at a step.
#define HL_HUGE_PAGE (2u << 20)
void* os_map_dense_huge(size_t size) {
    if (size < 2 * HL_HUGE_PAGE)
        return os_map_dense(size);
    uint8_t* p = map_flags(size + HL_HUGE_PAGE, 0);
    if (!p)
        return NULL;
    p = (uint8_t*)(((uintptr_t)p + HL_HUGE_PAGE - 1) & ~(uintptr_t)(HL_HUGE_PAGE - 1));
    syscall(SYS_madvise, p, size, MADV_HUGEPAGE);
    syscall(SYS_madvise, p, size, MADV_POPULATE_WRITE);
    return p;
}

// Any range: the pages holding it, from the one holding its first byte (madvise wants that
// page's start; it rounds the end up itself). sysconf reads the page size from the loader's copy
// of the auxiliary vector: no system call.
int os_populate(void* p, size_t size) {
    static uintptr_t page;
    if (!page)
        page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t from = (uintptr_t)p & ~(page - 1);
    return syscall(SYS_madvise, from, (uintptr_t)p + size - from, MADV_POPULATE_WRITE) == 0 ? 0
                                                                                          : -1;
}

// Memory a fork child has no use for as it stands (a thread's walks and rules, which it starts
// over): at each fork the kernel copies a mapping's page table entries and write-protects its
// pages on both sides, so every page the parent touches again faults once more (bash under the
// agent: 55 faults a fork in the unwinder's state alone). A mapping wiped on fork is neither
// copied nor protected; the child sees zeros, and a kernel without MADV_WIPEONFORK (before
// 4.14) copies it as before: its users accept either.
#ifndef MADV_WIPEONFORK
#define MADV_WIPEONFORK 18
#endif
void os_wipe_on_fork(void* p, size_t size) {
    syscall(SYS_madvise, p, size, MADV_WIPEONFORK);
}

void* os_map(size_t size) {
    return map_flags(size, 0);
}
void* os_reserve(size_t size) {
    return map_flags(size, MAP_NORESERVE);
}

void os_discard(void* p, size_t size) {
    syscall(SYS_madvise, p, size, MADV_DONTNEED);
}

void os_yield(void) {
    syscall(SYS_sched_yield);
}

void os_unmap(void* p, size_t size) {
    range_subtract(&agent_ranges, (uintptr_t)p, (uintptr_t)p + size);
    syscall(SYS_munmap, p, size);
}

size_t os_agent_ranges(uintptr_t (*out)[2], size_t max) {
    return range_list(&agent_ranges, out, max);
}

// A write that would pass RLIMIT_FSIZE (`ulimit -f`) fails with EFBIG and sends SIGXFSZ to the
// writing thread, whose default action kills the process (status 153): the program must never
// die of the agent's writes. SIGXFSZ is blocked around them (raw rt_sigprocmask: the program's
// own sigprocmask may be interposed too), and the one signal a failed write generated is taken
// back with a zero-timeout sigtimedwait. A SIGXFSZ that was already pending (the program's own,
// blocked by it) is left alone: standard signals do not queue, so the write added nothing to it.
#define HL_SIGSET_BYTES 8 // the kernel's sigset_t (64 signals), not glibc's 128-byte one

static uint64_t sig_bit(int sig) {
    return 1ull << (sig - 1);
}

long os_write_all(int fd, const void* buf, size_t len) {
    const uint64_t xfsz = sig_bit(SIGXFSZ);
    uint64_t old_mask = 0, pending = 0;
    int saved_errno = errno; // the program's, when this runs on its thread
    syscall(SYS_rt_sigprocmask, SIG_BLOCK, &xfsz, &old_mask, HL_SIGSET_BYTES);
    syscall(SYS_rt_sigpending, &pending, HL_SIGSET_BYTES);
    const char* p = buf;
    long result = 0;
    while (len > 0) {
        long r = syscall(SYS_write, fd, p, len);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            result = -errno;
            break;
        }
        if (r == 0) {
            result = -EIO;
            break;
        }
        p += r;
        len -= (size_t)r;
    }
    if (result == -EFBIG && !(pending & xfsz)) {
        struct timespec now = {0, 0};
        syscall(SYS_rt_sigtimedwait, &xfsz, NULL, &now, HL_SIGSET_BYTES);
    }
    if (!(old_mask & xfsz))
        syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &xfsz, NULL, HL_SIGSET_BYTES);
    errno = saved_errno;
    return result;
}

int os_gettid(void) {
    return (int)syscall(SYS_gettid);
}

void os_sleep_ns(long ns) {
    struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
    syscall(SYS_nanosleep, &ts, NULL);
}

void os_futex_wait(_Atomic int* addr, int expected, long timeout_ns) {
    struct timespec ts = {timeout_ns / 1000000000L, timeout_ns % 1000000000L};
    syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, expected, timeout_ns >= 0 ? &ts : NULL, NULL, 0);
}

void os_futex_wake(_Atomic int* addr, int count) {
    syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
}

int os_fstat(int fd, struct stat* st) {
#if UINTPTR_MAX == 0xffffffffu
    return fstat(fd, st);
#else
    return (int)syscall(SYS_fstat, fd, st);
#endif
}

int os_tgkill(int pid, int tid, int sig) {
    return (int)syscall(SYS_tgkill, pid, tid, sig);
}

// ---------------------------------------------------------------------------------------------
// Mappings the allocator underneath makes for itself (jemalloc, tcmalloc, mimalloc call mmap
// through the interposed name while the agent is inside their malloc): heap and allocator
// metadata, never roots. Stale pointers in a free list would otherwise keep lost blocks alive.
// ---------------------------------------------------------------------------------------------
void os_note_allocator_map(uintptr_t lo, uintptr_t hi) {
    range_add(&allocator_ranges, lo, hi);
}

void os_note_allocator_unmap(uintptr_t lo, uintptr_t hi) {
    range_subtract(&allocator_ranges, lo, hi);
}

size_t os_allocator_ranges(uintptr_t (*out)[2], size_t max) {
    return range_list(&allocator_ranges, out, max);
}

int os_for_each_task(void (*fn)(int tid, void* arg), void* arg) {
    int fd =
        (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char dents[4096];
    int n = 0;
    long got;
    while ((got = syscall(SYS_getdents64, fd, dents, sizeof dents)) > 0) {
        for (long off = 0; off < got;) {
            struct dirent64* d = (struct dirent64*)(dents + off);
            off += d->d_reclen;
            int tid = 0;
            for (const char* c = d->d_name; *c >= '0' && *c <= '9'; c++)
                tid = tid * 10 + (*c - '0');
            if (tid > 0) {
                fn(tid, arg);
                n++;
            }
        }
    }
    close(fd);
    return n;
}
