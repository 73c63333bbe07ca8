// SPDX-License-Identifier: MIT
// debuginfod_gate.c - no debuginfod client where no debuginfod server is named.
//
// libdw 0.188 (Debian 12's) loads libdebuginfod the first time a module has no debug file on
// this machine, whether or not a server is named: with it come libcurl and some 25 libraries of
// their own, 4 ms of every report that names a stripped program (/bin/sh, /bin/true: 70% of a
// short run's JSON report). The client then finds DEBUGINFOD_URLS unset or empty and does
// nothing. Later elfutils look at DEBUGINFOD_URLS before they load it; heaplens does so here, in
// front of the dlopen the library calls: with no server named, libdebuginfod is not loaded, and
// libdw goes on as it does where that library is not installed. With a server named it is
// loaded and asked, as before.
//
// A definition of dlopen in the executable is the one its libraries call. Not in builds under a
// sanitizer, whose runtime defines dlopen of its own.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "debuginfod_gate.h"

#ifndef __has_feature
#define __has_feature(x) 0
#endif
#if !defined(__SANITIZE_ADDRESS__) && !__has_feature(address_sanitizer) &&                         \
    !__has_feature(memory_sanitizer) && !__has_feature(thread_sanitizer)
#define HL_DLOPEN_GATE 1
#endif

// The name libdebuginfod's own client reads its servers from (debuginfod.h's
// DEBUGINFOD_URLS_ENV_VAR); unset or empty, it asks none.
#define SERVERS_VARIABLE "DEBUGINFOD_URLS"
#define CLIENT_LIBRARY "libdebuginfod" // libdebuginfod.so.1, libdebuginfod-0.188.so

int debuginfod_wanted(void) {
    const char* urls = getenv(SERVERS_VARIABLE);
    return urls && urls[0];
}

int debuginfod_gate_declines(const char* file) {
    if (!file || debuginfod_wanted())
        return 0;
    const char* base = strrchr(file, '/');
    base = base ? base + 1 : file;
    return strncmp(base, CLIENT_LIBRARY, strlen(CLIENT_LIBRARY)) == 0;
}

#ifdef HL_DLOPEN_GATE
// Looked up on each call (a dozen in a report), so no state is shared between threads. glibc's
// dlopen takes its caller (for the caller's RUNPATH, $ORIGIN and namespace) from its return
// address: the call below is a tail call at -O2, so the caller stays the library that called
// this one. Were it not (-O0), that caller would be the heaplens executable, which has no RUNPATH
// and lives in the same namespace as libdw: the same search. A declined load sets no dlerror().
void* dlopen(const char* file, int mode) {
    if (debuginfod_gate_declines(file))
        return NULL; // as when it is not installed
    void* (*real_dlopen)(const char*, int) =
        (void* (*)(const char*, int))dlsym(RTLD_NEXT, "dlopen");
    return real_dlopen ? real_dlopen(file, mode) : NULL;
}
#endif
