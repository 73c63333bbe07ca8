// SPDX-License-Identifier: MIT
// classify.h - memcheck's leak classification over a set of blocks and root ranges. Pure: it
// reads memory and writes verdicts into caller-provided arrays, so it is unit-tested without
// the agent. Each live block ends as one of HL_LEAK_* (src/common/format.h).
#ifndef HL_CLASSIFY_H
#define HL_CLASSIFY_H

#include <stddef.h>
#include <stdint.h>

typedef struct lc_range_s {
    uintptr_t lo, hi;
} lc_range_t;

typedef struct lc_input_s {
    const uintptr_t* starts; // block start addresses, strictly increasing
    const size_t* sizes;     // requested sizes (the bytes that are scanned)
    size_t nblocks;
    const lc_range_t* roots; // memory holding roots: readable, word-scanned
    size_t nroots;
    // Ranges where a C++ vtable may live (read-only data of loaded objects), for the
    // multiple-inheritance heuristic; may be empty.
    const lc_range_t* vtable_ranges;
    size_t nvtable_ranges;
    // Optional (NULL: every byte of a block is read): calls fn for the runs of [lo, hi) that may
    // hold anything, in address order; 0, or -1 when it cannot tell (the whole range is then
    // read). Asked for blocks of LC_SPARSE_MIN bytes and more, where pages never written (a
    // large calloc used in part) would each cost a fault to read.
    int (*held)(void* arg, uintptr_t lo, uintptr_t hi, void (*fn)(uintptr_t, uintptr_t, void*),
                void* fn_arg);
    void* held_arg;
} lc_input_t;
#define LC_SPARSE_MIN (64u << 10) // a pagemap read costs about what reading 64 KiB does

// Workspace the caller provides: lc_workspace_size(n) bytes, any alignment of 8.
size_t lc_workspace_size(size_t nblocks);

// Classify every block (fewer than LC_NO_LEADER of them). kind[i] receives HL_LEAK_*; leader[i]
// receives, for an indirectly lost block only, the index of the block whose clique took it in
// (the others' are not written: a caller's fresh pages stay untouched where few blocks are lost).
#define LC_NO_LEADER UINT32_MAX
void lc_classify(const lc_input_t* in, uint8_t* kind, uint32_t* leader, void* workspace);

#endif
