// SPDX-License-Identifier: MIT
// live_big.c - a process holding a big heap while it waits, for the live leak scan
// (bench/live_scan.py): N blocks (default 1,000,000) of mixed sizes, 16 B to 4 KiB, most of
// them small; each odd block points to the one before it, so the scan follows pointers between
// blocks and not only from the array. The array that keeps them is a global; every hundredth
// block (an odd one: no other block points to it) is dropped from it, a definite leak.
//   live_big [N [PIDFILE GOFILE]]
// With PIDFILE and GOFILE it writes its pid to PIDFILE once every block is made, then waits
// (1 ms naps) until GOFILE exists and returns: the time from GOFILE to its exit is its exit.
// Without them it returns at once.
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define LEAK_EVERY 100 // every hundredth block is dropped from the array
#define LEAK_AT 51     // ...this one of each hundred: odd, so no block points to it
#define NAP_NS 1000000 // the wait polls GOFILE every millisecond: the exit's timing granularity

void** keep;

// Mixed sizes from a fixed sequence: 15 of 16 blocks 16-256 B, 1 of 16 up to 4 KiB (about
// 250 MiB in all for 1M blocks).
static size_t size_of(unsigned long i) {
    unsigned long h = i * 2654435761ul;
    h ^= h >> 13;
    return (h & 15) ? 16 + (h >> 3) % 241 : 16 + (h >> 3) % 4081;
}

int main(int argc, char** argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    if (n < 2 || argc == 3) {
        fprintf(stderr, "usage: live_big [N [PIDFILE GOFILE]]\n");
        return 2;
    }
    keep = malloc((size_t)n * sizeof(void*));
    if (!keep)
        return 1;
    for (long i = 0; i < n; i++) {
        keep[i] = malloc(size_of((unsigned long)i));
        if (!keep[i])
            return 1;
        ((void**)keep[i])[0] = (i & 1) ? keep[i - 1] : NULL;
    }
    long leaked = 0;
    for (long i = LEAK_AT; i < n; i += LEAK_EVERY, leaked++)
        keep[i] = NULL;
    printf("%ld blocks, %ld leaked\n", n, leaked);
    fflush(stdout);
    if (argc < 4)
        return 0;
    FILE* f = fopen(argv[2], "w");
    if (!f)
        return 1;
    fprintf(f, "%d\n", (int)getpid());
    if (fclose(f) != 0)
        return 1;
    struct timespec nap = {0, NAP_NS};
    while (access(argv[3], F_OK) != 0)
        nanosleep(&nap, NULL);
    return 0;
}
