// SPDX-License-Identifier: MIT
// pagemap.h - which pages of the process's own memory hold anything (pagemap.c), read from
// /proc/self/pagemap: a page is held when it is present or swapped out. One that is neither was
// never written since it was mapped (anonymous memory reads as zeros, a private file page as the
// file), or is not mapped at all.
#ifndef HL_PAGEMAP_H
#define HL_PAGEMAP_H

#include <stdint.h>

typedef struct hl_pagemap_s {
    int fd;
    uintptr_t page; // the page size
} hl_pagemap_t;

int pagemap_open(hl_pagemap_t* pm); // 0, or -1 when pagemap cannot be read
void pagemap_close(hl_pagemap_t* pm);
// Calls fn for each run of held pages of [lo, hi), cut to [lo, hi), in address order. 0, or -1
// when pagemap could not be read (some runs may have been given).
int pagemap_held(hl_pagemap_t* pm, uintptr_t lo, uintptr_t hi,
                 void (*fn)(uintptr_t lo, uintptr_t hi, void* arg), void* arg);

#endif
