// SPDX-License-Identifier: MIT
// clock.h - the event clock. The hot path reads the CPU's invariant time-stamp counter (a few
// cycles, no syscall); the writer thread converts ticks to nanoseconds by sampling
// CLOCK_MONOTONIC against it. Other architectures read CLOCK_MONOTONIC directly.
#ifndef HL_CLOCK_H
#define HL_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t clock_mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#if defined(__x86_64__) || defined(__i386__)
#define HL_CLOCK_IS_TSC 1
static inline uint64_t clock_ticks(void) {
    uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return ((uint64_t)hi << 32) | lo;
}
#else
#define HL_CLOCK_IS_TSC 0
static inline uint64_t clock_ticks(void) { return clock_mono_ns(); }
#endif

#endif
