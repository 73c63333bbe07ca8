// SPDX-License-Identifier: MIT
// demangle.h - C++ names demangled by libstdc++'s __cxa_demangle, loaded the first time a name
// needs it (demangle.c): heaplens links no C++ runtime, so `heaplens run` starts and waits for
// its program without one (libstdc++ and what it brings were a third of the CLI's memory), and
// a machine without libstdc++ gets its names left mangled.
#ifndef HL_DEMANGLE_H
#define HL_DEMANGLE_H

// The demangled name (malloc'd, the caller frees it), or NULL: not a C++ name, no demangler, or
// no memory (*oom says which of the last, when oom is not NULL).
char* hl_demangle(const char* name, int* oom);

// The demangler's code, for naming the code a symbol cache's answers came from; NULL when there
// is none.
const void* hl_demangler(void);

#endif
