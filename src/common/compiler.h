// SPDX-License-Identifier: MIT
// compiler.h - attribute and branch-hint macros shared by the agent and the analyzer.
#ifndef HL_COMPILER_H
#define HL_COMPILER_H

#define hl_likely(x) __builtin_expect(!!(x), 1)
#define hl_unlikely(x) __builtin_expect(!!(x), 0)
#define HL_NOINLINE __attribute__((noinline))
#define HL_COLD __attribute__((noinline, cold))
#define HL_INLINE static inline __attribute__((always_inline))
#define HL_HIDDEN __attribute__((visibility("hidden")))
#define HL_EXPORT __attribute__((visibility("default")))
#define HL_UNUSED __attribute__((unused))
// Initial-exec TLS: one %fs-relative load, and no __tls_get_addr call that could allocate.
#define HL_TLS __thread __attribute__((tls_model("initial-exec")))
#define HL_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

// Requests the cache line of p for writing (ownership, not a shared copy). gcc's
// __builtin_prefetch(p, 1) is a read prefetch on x86-64 unless built with -mprfchw; PREFETCHW
// is decoded by every x86-64 CPU (as a no-op by older ones).
HL_INLINE void hl_prefetch_own(const void* p) {
#if defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("prefetchw %0" : : "m"(*(const char*)p));
#else
    __builtin_prefetch(p, 1);
#endif
}

#endif
