// SPDX-License-Identifier: MIT
// scan_held.c - a program that exits holding many small blocks (N, default 300,000, of 16-80
// bytes), every one reachable from a global array, and one lost list of 10 blocks: the exit scan
// judges them all, and its own memory per block sets the traced program's peak.
#include "common.h"

void** held; // not static: the blocks stay reachable, as a program's own data would

static NOINLINE void lose_list(void) {
    void* next = NULL;
    for (int i = 0; i < 10; i++) {
        void** node = malloc(32);
        node[0] = next;
        node[1] = node[2] = node[3] = NULL;
        next = node;
    }
    keep(next);
}

int main(int argc, char** argv) {
    long n = argc > 1 ? atol(argv[1]) : 300000;
    held = malloc((size_t)n * sizeof *held);
    if (!held)
        return 1;
    for (long i = 0; i < n; i++)
        if (!(held[i] = malloc(16 + (size_t)(i % 65))))
            return 1;
    lose_list();
    scrub_stack();
    return 0;
}
