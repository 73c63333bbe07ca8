// SPDX-License-Identifier: MIT
// trace_window.c - a program whose memory grows while it keeps allocating: the trace's zstd
// window must grow with it (1 MiB while it is small, 4 MiB once its RSS passes 256 MiB), each
// larger window from a new frame at a chunk's end, and the trace must still read back whole.
// Three phases of 400,000 malloc/free pairs (some 1.7 MiB of raw trace each), each followed by
// a pause of 300 ms in which the writer catches up and ends a chunk; before the second phase the
// program holds 96 MiB, before the third 416 MiB, all touched. Leaks 3 blocks of 48 bytes.
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "common.h"

#define PAIRS 400000
#define MIB (1024 * 1024)

static NOINLINE void churn_site(int i) {
    // Sizes vary so that the trace is not one repeat the compressor folds to nothing.
    void* p = malloc(16 + (size_t)(i * 7919u % 200));
    keep(p);
    free(p);
    NO_TAIL_CALL();
}

static NOINLINE void churn(void) {
    for (int i = 0; i < PAIRS; i++)
        churn_site(i);
    struct timespec pause = {0, 300 * 1000 * 1000};
    nanosleep(&pause, NULL);
    NO_TAIL_CALL();
}

// `trace_window tight`, run under a limit of address space (ulimit -v): before the third phase
// the program takes what address space is left and gives 1 MiB back, less than the 4 MiB window
// its memory calls for needs. The trace must go on, in the window it had. The space is taken
// before the 320 MiB are touched: until then the program is small, so no chunk ended meanwhile
// can have taken the larger window already.
#define FILL_MAPS_MAX 16384 // 16 GiB: far beyond any limit the test sets
// Given back after the fill: with the window's previous workspace (zstd frees it before it makes
// the next), less than the 4 MiB window's 4.5 MiB.
#define GIVE_BACK_MIB 1
static int fill_address_space(void) {
    void* last[GIVE_BACK_MIB] = {0};
    int n = 0;
    while (n < FILL_MAPS_MAX) {
        void* p = mmap(NULL, MIB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            break;
        last[n++ % GIVE_BACK_MIB] = p;
    }
    if (n == FILL_MAPS_MAX || n < GIVE_BACK_MIB)
        return -1;
    for (int k = 0; k < GIVE_BACK_MIB; k++)
        munmap(last[k], MIB);
    return 0;
}

// Resident memory the program holds to the end (reachable from a global); with `tight`, the
// address space is filled between the allocation and the first touch of its pages.
static char* held[2];
static NOINLINE int grow(int k, size_t bytes, int tight) {
    held[k] = malloc(bytes);
    if (tight && fill_address_space() != 0)
        return -1;
    if (held[k])
        for (size_t i = 0; i < bytes; i += 4096)
            held[k][i] = 1;
    NO_TAIL_CALL();
    return 0;
}

static NOINLINE void leak_three(void) {
    for (int i = 0; i < 3; i++)
        keep(malloc(48));
    NO_TAIL_CALL();
}

int main(int argc, char** argv) {
    int tight = argc > 1 && strcmp(argv[1], "tight") == 0;
    churn();
    grow(0, 96 * (size_t)MIB, 0);
    churn();
    if (grow(1, 320 * (size_t)MIB, tight) != 0) {
        say("no limit of address space to fill\n");
        return 2;
    }
    churn();
    leak_three();
    say("done\n");
    scrub_stack();
    return 0;
}
