// SPDX-License-Identifier: MIT
// dlsearch.h - a dlopen by bare name as the program's own call would resolve it (dlsearch.c).
#ifndef HL_DLSEARCH_H
#define HL_DLSEARCH_H

#include <stddef.h>

// The loader searches the calling object's DT_RUNPATH (or DT_RPATH) for a name without '/',
// and the agent's hook is the caller the loader sees. When the real call failed, this looks
// for file in the directories of the object holding caller ($ORIGIN expanded); 0 with the
// path in out (cap bytes), or -1.
int dlsearch_caller_path(const void* caller, const char* file, char* out, size_t cap);

#endif
