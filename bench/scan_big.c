// SPDX-License-Identifier: MIT
// scan_big.c - the exit-time scan on a big heap: 10 million 100-byte blocks (about 1 GiB),
// each pointing to the previous one, the array of them kept in a global with every tenth
// entry cleared. Everything stays reachable through the chain, so the scan must visit it all.
#include <stdio.h>
#include <stdlib.h>

void** keep;

int main(int argc, char** argv) {
    long n = argc > 1 ? atol(argv[1]) : 10000000;
    keep = malloc((size_t)n * sizeof(void*));
    for (long i = 0; i < n; i++) {
        keep[i] = malloc(100);
        ((void**)keep[i])[0] = i ? keep[i - 1] : 0;
    }
    for (long i = 0; i < n; i += 10)
        keep[i] = 0;
    printf("%ld blocks\n", n);
    return 0;
}
