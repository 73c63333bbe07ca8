// SPDX-License-Identifier: MIT
// hooks.h - the shared bodies of the allocation hooks (hooks.c), also used by the C++
// operators (hooks_cxx.c).
#ifndef HL_HOOKS_H
#define HL_HOOKS_H

#include <stddef.h>

void* hook_alloc(size_t size, int fn);
void* hook_aligned(size_t align, size_t size, int fn);
void hook_free(void* p, int fn);

#endif
