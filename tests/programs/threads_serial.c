// threads_serial: 2,200 threads made one after another, each allocating one 24-byte block. Thread
// indices are never reused, so from the 2,047th the blocks' records no longer fit a trailer
// (live_header.c: 11 bits of thread index) and go to the direct map; the verdicts must not
// care. Of the blocks, main frees every other one, loses one in ten (leaked: 220 blocks, 5,280
// bytes, definitely lost) and keeps the rest in `slots` (reachable). Each thread also makes one
// temporary block: 2,200 temporary allocations.
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define NTHREADS 2200

void* slots[NTHREADS]; // not static: the blocks stay reachable, as a program's own data would

// Also one temporary block each (freed by its thread before it allocates anything else): that
// is told by the block's owner, which a record must keep exact past index 2,047.
NOINLINE static void* worker(void* arg) {
    long i = (long)arg;
    slots[i] = malloc(24);
    if (slots[i])
        memset(slots[i], 0x11, 24);
    void* brief = malloc(40);
    keep(brief);
    free(brief);
    return NULL;
}

int main(void) {
    for (long i = 0; i < NTHREADS; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, worker, (void*)i) != 0 || pthread_join(t, NULL) != 0)
            return 2;
        if (!slots[i])
            return 3;
    }
    for (long i = 0; i < NTHREADS; i++) {
        if (i % 2 == 0) {
            free(slots[i]);
            slots[i] = NULL;
        } else if (i % 10 == 1) {
            slots[i] = NULL; // lost
        }
    }
    return 0;
}
