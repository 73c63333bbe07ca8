// SPDX-License-Identifier: MIT
// demangle.c - libstdc++'s demangler, looked up once (dlopen, then dlsym), by the first thread
// that needs it.
#define _GNU_SOURCE
#include "demangle.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>

// The C++ ABI's: the status is 0 for a demangled name, -1 for no memory, -2 for a name that is
// not a mangled one.
typedef char* (*cxa_demangle_fn)(const char* mangled, char* buf, size_t* len, int* status);

#define LIBSTDCXX "libstdc++.so.6"

static cxa_demangle_fn demangler;
static pthread_once_t looked_up = PTHREAD_ONCE_INIT;

static void look_up(void) {
    // Already in the process (a test linked with it, or a library that brought it), or loaded
    // here; never unloaded: the function stays valid for the life of the process.
    void* lib = dlopen(LIBSTDCXX, RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE);
    if (lib)
        demangler = (cxa_demangle_fn)dlsym(lib, "__cxa_demangle");
}

const void* hl_demangler(void) {
    pthread_once(&looked_up, look_up);
    return (const void*)demangler;
}

char* hl_demangle(const char* name, int* oom) {
    if (oom)
        *oom = 0;
    if (name[0] != '_' || name[1] != 'Z' || !hl_demangler())
        return NULL;
    int status = 0;
    char* out = demangler(name, NULL, NULL, &status);
    if (oom)
        *oom = status == -1;
    if (status != 0) {
        free(out);
        return NULL;
    }
    return out;
}
