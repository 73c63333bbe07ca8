// SPDX-License-Identifier: MIT
// tiny_malloc.c - the smallest program that uses the heap: a few allocations, one kept to the
// end (a leak the tracer reports). bench/procs.sh starts it hundreds of times: the cost it
// measures is the tracer's per-process start and end, not the allocations.
#include <stdlib.h>
#include <string.h>

int main(void) {
    char* kept = malloc(64);
    for (int i = 0; i < 16; i++) {
        char* p = malloc(32 + (size_t)i * 16);
        if (!p)
            return 1;
        memset(p, i, 32);
        free(p);
    }
    return kept ? 0 : 1;
}
