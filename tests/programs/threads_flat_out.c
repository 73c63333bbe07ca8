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
        churn_random_pair(&x, slots, NSLOTS);
    }
    for (int k = 0; k < NSLOTS; k++)
        free(slots[k]);
    return NULL;
}

int main(int argc, char** argv) {
    cue_dir = argc > 1 ? argv[1] : NULL;
    if (run_workers(WORKERS, worker) != 0)
        return 2;
    say("threads_flat_out done\n");
    return 0;
}
