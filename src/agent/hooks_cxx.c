// SPDX-License-Identifier: MIT
// hooks_cxx.c - every C++ operator new and delete, defined in C by their Itanium mangled names.
// Each is recorded with its family so a release by the wrong one (new/free, new[]/delete) is a
// heap error. operator new follows the standard: on failure it calls the new_handler and
// retries, and throws std::bad_alloc (through libstdc++) when there is none; the agent holds
// no state across those calls, so an exception unwinds through it cleanly.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

#include "../common/format.h"
#include "../common/compiler.h"
#include "hooks.h"

typedef void (*new_handler_t)(void);

static HL_COLD void* new_failed(int nothrow, int* retry) {
    static new_handler_t (*get_handler)(void);
    static void (*throw_bad_alloc)(void);
    if (!get_handler)
        *(void**)&get_handler = dlsym(RTLD_DEFAULT, "_ZSt15get_new_handlerv");
    new_handler_t h = get_handler ? get_handler() : NULL;
    if (h) {
        h();
        *retry = 1;
        return NULL;
    }
    *retry = 0;
    if (nothrow)
        return NULL;
    if (!throw_bad_alloc)
        *(void**)&throw_bad_alloc = dlsym(RTLD_DEFAULT, "_ZSt17__throw_bad_allocv");
    if (throw_bad_alloc)
        throw_bad_alloc();
    __builtin_trap(); // no libstdc++ to throw with: what std::terminate would do
}

static void* new_impl(size_t size, size_t align, int fn, int nothrow) {
    for (;;) {
        void* p = align ? hook_aligned(align, size, fn) : hook_alloc(size, fn);
        if (hl_likely(p != NULL))
            return p;
        int retry;
        new_failed(nothrow, &retry);
        if (!retry)
            return NULL;
    }
}

// operator new(size_t)
HL_EXPORT void* _Znwm(size_t n) { return new_impl(n, 0, HL_FN_NEW, 0); }
// operator new[](size_t)
HL_EXPORT void* _Znam(size_t n) { return new_impl(n, 0, HL_FN_NEW_ARRAY, 0); }
// operator new(size_t, const std::nothrow_t&)
HL_EXPORT void* _ZnwmRKSt9nothrow_t(size_t n, const void* nt) {
    (void)nt;
    return new_impl(n, 0, HL_FN_NEW, 1);
}
// operator new[](size_t, const std::nothrow_t&)
HL_EXPORT void* _ZnamRKSt9nothrow_t(size_t n, const void* nt) {
    (void)nt;
    return new_impl(n, 0, HL_FN_NEW_ARRAY, 1);
}
// operator new(size_t, std::align_val_t)
HL_EXPORT void* _ZnwmSt11align_val_t(size_t n, size_t al) { return new_impl(n, al, HL_FN_NEW, 0); }
// operator new[](size_t, std::align_val_t)
HL_EXPORT void* _ZnamSt11align_val_t(size_t n, size_t al) {
    return new_impl(n, al, HL_FN_NEW_ARRAY, 0);
}
// operator new(size_t, std::align_val_t, const std::nothrow_t&)
HL_EXPORT void* _ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t al, const void* nt) {
    (void)nt;
    return new_impl(n, al, HL_FN_NEW, 1);
}
// operator new[](size_t, std::align_val_t, const std::nothrow_t&)
HL_EXPORT void* _ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t al, const void* nt) {
    (void)nt;
    return new_impl(n, al, HL_FN_NEW_ARRAY, 1);
}

// operator delete(void*)
HL_EXPORT void _ZdlPv(void* p) { hook_free(p, HL_FN_DELETE); }
// operator delete[](void*)
HL_EXPORT void _ZdaPv(void* p) { hook_free(p, HL_FN_DELETE_ARRAY); }
// operator delete(void*, size_t)
HL_EXPORT void _ZdlPvm(void* p, size_t n) {
    (void)n;
    hook_free(p, HL_FN_DELETE);
}
// operator delete[](void*, size_t)
HL_EXPORT void _ZdaPvm(void* p, size_t n) {
    (void)n;
    hook_free(p, HL_FN_DELETE_ARRAY);
}
// operator delete(void*, const std::nothrow_t&)
HL_EXPORT void _ZdlPvRKSt9nothrow_t(void* p, const void* nt) {
    (void)nt;
    hook_free(p, HL_FN_DELETE);
}
// operator delete[](void*, const std::nothrow_t&)
HL_EXPORT void _ZdaPvRKSt9nothrow_t(void* p, const void* nt) {
    (void)nt;
    hook_free(p, HL_FN_DELETE_ARRAY);
}
// operator delete(void*, std::align_val_t)
HL_EXPORT void _ZdlPvSt11align_val_t(void* p, size_t al) {
    (void)al;
    hook_free(p, HL_FN_DELETE);
}
// operator delete[](void*, std::align_val_t)
HL_EXPORT void _ZdaPvSt11align_val_t(void* p, size_t al) {
    (void)al;
    hook_free(p, HL_FN_DELETE_ARRAY);
}
// operator delete(void*, size_t, std::align_val_t)
HL_EXPORT void _ZdlPvmSt11align_val_t(void* p, size_t n, size_t al) {
    (void)n, (void)al;
    hook_free(p, HL_FN_DELETE);
}
// operator delete[](void*, size_t, std::align_val_t)
HL_EXPORT void _ZdaPvmSt11align_val_t(void* p, size_t n, size_t al) {
    (void)n, (void)al;
    hook_free(p, HL_FN_DELETE_ARRAY);
}
// operator delete(void*, std::align_val_t, const std::nothrow_t&)
HL_EXPORT void _ZdlPvSt11align_val_tRKSt9nothrow_t(void* p, size_t al, const void* nt) {
    (void)al, (void)nt;
    hook_free(p, HL_FN_DELETE);
}
// operator delete[](void*, std::align_val_t, const std::nothrow_t&)
HL_EXPORT void _ZdaPvSt11align_val_tRKSt9nothrow_t(void* p, size_t al, const void* nt) {
    (void)al, (void)nt;
    hook_free(p, HL_FN_DELETE_ARRAY);
}
