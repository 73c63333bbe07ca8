// SPDX-License-Identifier: MIT
// common.h - helpers shared by the integration test programs (C and C++). Not a program itself:
// the Makefile builds only *.c, *.cc and *.f90 from this directory.
//
// Rules every program follows so that the numbers the integration runner checks are exact:
//  - output goes through write(2) (say/say_num), never stdio, so libc allocates no buffer;
//  - a pointer to a block meant to be lost never reaches main's frame or a callee-saved register
//    of main, and scrub_stack() zeroes the dead stack below main before it returns, so no stale
//    copy of the pointer is left where the exit-time scan looks (the stack from the stack pointer
//    up, and the registers of the thread that exits);
//  - keep() makes the compiler believe a block is used, so malloc/free pairs are not elided.
#ifndef HL_TEST_COMMON_H
#define HL_TEST_COMMON_H

#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

// The block escapes as far as the compiler knows (no store anywhere).
static inline void keep(const void* p) { __asm__ volatile("" : : "r"(p) : "memory"); }

// Placed after a call, keeps it from being compiled as a tail call (a jump that would leave the
// calling function's frame out of every backtrace).
#define NO_TAIL_CALL() __asm__ volatile("" : : : "memory")

static inline void say(const char* s) {
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t w = write(1, s, n);
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

static inline void say_num(const char* prefix, long v) {
    char buf[64];
    char tmp[24];
    int n = 0;
    unsigned long u = v < 0 ? (unsigned long)(-v) : (unsigned long)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    size_t len = strlen(prefix);
    if (len > 32)
        len = 32;
    memcpy(buf, prefix, len);
    if (v < 0)
        buf[len++] = '-';
    while (n)
        buf[len++] = tmp[--n];
    buf[len++] = '\n';
    buf[len] = 0;
    say(buf);
}

// A figure of this process's own memory, in KiB, from /proc/self/status ("VmRSS:", "VmHWM:"),
// read without stdio (no block of libc's made for it); -1 when it cannot be read.
static inline long self_status_kb(const char* field) {
    char buf[4096];
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    const char* at = strstr(buf, field);
    return at ? strtol(at + strlen(field), NULL, 10) : -1;
}

// Zero 64 KiB of the stack below the caller: stale copies of pointers left there by earlier
// calls are gone before the exit path reuses that memory for its own frames.
__attribute__((unused)) static NOINLINE void scrub_stack(void) {
    volatile char buf[65536];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = 0;
    __asm__ volatile("" : : "r"(buf) : "memory");
}

// Does DIR/NAME exist? (The programs the live tests drive take their cues from files.)
static inline int dir_has(const char* dir, const char* name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

// One malloc/free pair of pseudo-random size (1..4000 bytes) into one of the n slots picked by
// *x (xorshift64), whose block is freed first: a trace that compresses poorly.
__attribute__((unused)) static inline void churn_random_pair(uint64_t* x, void** slots, size_t n) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    size_t k = (size_t)(*x >> 40) % n;
    free(slots[k]);
    slots[k] = malloc(1 + (size_t)(*x % 4000));
    keep(slots[k]);
}

// Runs fn((void*)0) .. fn((void*)(n - 1)) on n threads at once and waits for them all: 0, or -1
// when not every thread could be made (the ones made are waited for).
#define HL_MAX_WORKERS 64
__attribute__((unused)) static int run_workers(int n, void* (*fn)(void*)) {
    pthread_t t[HL_MAX_WORKERS];
    int made = 0;
    while (made < n && made < HL_MAX_WORKERS &&
           pthread_create(&t[made], NULL, fn, (void*)(long)made) == 0)
        made++;
    for (int i = 0; i < made; i++)
        pthread_join(t[i], NULL);
    return made == n ? 0 : -1;
}

// Until DIR/go exists, at most HL_CUE_WAIT_MS (then on anyway: the test that waits fails).
#define HL_CUE_WAIT_MS 30000
__attribute__((unused)) static void wait_for_go(const char* dir) {
    struct timespec ms = {0, 1000000L};
    for (int waited = 0; waited < HL_CUE_WAIT_MS && !dir_has(dir, "go"); waited++)
        nanosleep(&ms, NULL);
}

// Allocates and releases 16 blocks of 16 to 256 bytes every 0.2 ms until *stop is set: what the
// other threads of those programs do meanwhile.
static inline void churn_until(const int* stop) {
    void* held[16];
    struct timespec ts = {0, 200000L};
    while (!__atomic_load_n(stop, __ATOMIC_RELAXED)) {
        nanosleep(&ts, NULL);
        for (int i = 0; i < 16; i++)
            held[i] = malloc(16 + 16 * (size_t)i);
        for (int i = 0; i < 16; i++)
            free(held[i]);
    }
}

// The directory this program's executable lives in (no trailing slash), from /proc/self/exe.
static inline int exe_dir(char* out, size_t cap) {
    ssize_t n = readlink("/proc/self/exe", out, cap - 1);
    if (n <= 0)
        return -1;
    out[n] = 0;
    char* slash = strrchr(out, '/');
    if (!slash)
        return -1;
    *slash = 0;
    return 0;
}

#endif
