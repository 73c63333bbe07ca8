// threads_alloc: 4 worker threads allocate at once; blocks cross threads; each thread leaks one.
//   main:           malloc of the 4 x 6 handoff table (1 block, 192 B), freed at the end
//   each worker i:  worker_alloc_batch: 8 x malloc(64); frees 2 itself (worker_free_own),
//                   hands 6 to main, which frees them after join (frees of another thread's
//                   blocks); per_thread_leak: malloc(1000 + i), lost.
// calls.malloc = 1 + 4 * 9 = 37; calls.free = 1 + 4 * 8 = 33 (all the program's own: libc's
// thread bookkeeping uses calloc, never malloc). Lost: 4 blocks, 1000+1001+1002+1003 = 4006 B.
#include <pthread.h>
#include <stdlib.h>

#include "common.h"

#define WORKERS 4
#define BATCH 8
#define HANDOFF 6

static void** handoff; // WORKERS x HANDOFF

NOINLINE static void worker_alloc_batch(void** out, int n) {
    for (int i = 0; i < n; i++) {
        char* p = malloc(64);
        p[0] = (char)i;
        out[i] = p;
    }
}

NOINLINE static void worker_free_own(void** blocks, int n) {
    for (int i = 0; i < n; i++)
        free(blocks[i]);
}

NOINLINE static void per_thread_leak(size_t size) {
    char* p = malloc(size);
    p[0] = 1;
    p[size - 1] = 2;
    keep(p);
}

static void* worker(void* arg) {
    int index = (int)(long)arg;
    void* batch[BATCH];
    worker_alloc_batch(batch, BATCH);
    worker_free_own(batch, BATCH - HANDOFF);
    for (int i = 0; i < HANDOFF; i++)
        handoff[index * HANDOFF + i] = batch[BATCH - HANDOFF + i];
    per_thread_leak(1000 + (size_t)index);
    scrub_stack();
    return NULL;
}

NOINLINE static void main_frees_handoff(void) {
    for (int i = 0; i < WORKERS * HANDOFF; i++)
        free(handoff[i]);
    free(handoff);
    handoff = NULL;
}

int main(void) {
    handoff = malloc(WORKERS * HANDOFF * sizeof(void*));
    if (run_workers(WORKERS, worker) != 0)
        return 2;
    main_frees_handoff();
    scrub_stack();
    say("threads_alloc done\n");
    return 0;
}
