// threads_flat_out: 6 threads each make malloc/free pairs of pseudo-random sizes (1..4000 bytes)
// over 1024 slots of their own, as fast as they can: their rings fill faster than the writer
// drains them, so at any moment some thread waits for ring space. Each frees its slots at the
// end. Without DIR, 400,000 pairs each; with DIR, until DIR/go exists (remote_sink.sh: the
// collector leaves while the threads run flat out, and the trace goes on in a local file).
// Nothing of the program's is in use at the end.
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "common.h"

#define WORKERS 6
#define NSLOTS 1024
#define PAIRS 400000
#define CUE_EVERY 4096 // pairs between two looks for the cue file

static const char* cue_dir;

NOINLINE static void* worker(void* arg) {
    void* slots[NSLOTS] = {0};
    uint64_t x = 88172645463325252ull + (uintptr_t)arg;
    for (int i = 0; cue_dir || i < PAIRS; i++) {
        if (cue_dir && i % CUE_EVERY == 0 && dir_has(cue_dir, "go"))
            break;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        size_t k = (size_t)(x >> 40) % NSLOTS;
        free(slots[k]);
        slots[k] = malloc(1 + (size_t)(x % 4000));
        keep(slots[k]);
    }
    for (int k = 0; k < NSLOTS; k++)
        free(slots[k]);
    return NULL;
}

int main(int argc, char** argv) {
    cue_dir = argc > 1 ? argv[1] : NULL;
    pthread_t t[WORKERS];
    for (long i = 0; i < WORKERS; i++)
        if (pthread_create(&t[i], NULL, worker, (void*)i) != 0)
            return 2;
    for (int i = 0; i < WORKERS; i++)
        pthread_join(t[i], NULL);
    say("threads_flat_out done\n");
    return 0;
}
