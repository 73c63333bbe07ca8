// SPDX-License-Identifier: MIT
// addr_sort.h - the exit scan's blocks put in address order where they lie (addr_sort.c): their
// addresses, with their sizes moved along. No memory but the caller's small workspace, so a
// scan of millions of blocks takes no second copy of them.
#ifndef HL_ADDR_SORT_H
#define HL_ADDR_SORT_H

#include <stddef.h>
#include <stdint.h>

// Workspace addr_sort needs, in bytes (any alignment of 8).
size_t addr_sort_workspace_size(void);

// Sorts keys[0, n) ascending, moving sizes[i] with keys[i]. Equal keys keep no particular order
// among them.
void addr_sort(uintptr_t* keys, size_t* sizes, size_t n, void* workspace);

#endif
