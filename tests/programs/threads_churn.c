// threads_churn: volume across threads, more events than any per-thread buffer holds.
//   phase 1: 8 threads at once, each 20000 x (malloc(16 + i % 64), free) in churn_pairs, and
//            each passes 500 blocks (malloc(24), in churn_handoff) to its neighbour through a
//            shared table; the neighbour frees them after a barrier.
//   phase 2: 16 short-lived threads one after another (their slots are recycled), each leaking
//            one 10-byte block in short_lived_leak.
// calls.malloc = 8 * 20500 + 16 = 164016; calls.free = 8 * 20500 = 164000.
// Lost: 16 blocks, 160 B, all in short_lived_leak.
// Usage: threads_churn [DIR]: with DIR, phase 2 begins once DIR/go exists (remote_sink.sh sends
// the agent's trace to a collector that leaves in between, so that phase 2 is traced after the
// switch to a local file however late the writer sent phase 1 on a loaded machine).
#include <pthread.h>
#include <stdlib.h>

#include "common.h"

#define WORKERS 8
#define PAIRS 20000
#define HANDOFF 500
#define SHORT_LIVED 16

static void* table[WORKERS][HANDOFF];
static pthread_barrier_t barrier;

NOINLINE static void churn_pairs(void) {
    for (int i = 0; i < PAIRS; i++) {
        char* p = malloc(16 + (size_t)(i % 64));
        p[0] = (char)i;
        keep(p);
        free(p);
    }
}

NOINLINE static void churn_handoff(int me) {
    for (int i = 0; i < HANDOFF; i++) {
        char* p = malloc(24);
        p[0] = (char)me;
        table[me][i] = p;
    }
}

NOINLINE static void free_neighbour(int me) {
    int other = (me + 1) % WORKERS;
    for (int i = 0; i < HANDOFF; i++) {
        free(table[other][i]);
        table[other][i] = NULL;
    }
}

static void* churn_worker(void* arg) {
    int me = (int)(long)arg;
    churn_handoff(me);
    churn_pairs();
    pthread_barrier_wait(&barrier);
    free_neighbour(me);
    return NULL;
}

NOINLINE static void short_lived_leak(void) {
    char* p = malloc(10);
    p[9] = 1;
    keep(p);
}

static void* short_lived(void* arg) {
    (void)arg;
    short_lived_leak();
    scrub_stack();
    return NULL;
}

int main(int argc, char** argv) {
    pthread_t t[WORKERS];
    pthread_barrier_init(&barrier, NULL, WORKERS);
    for (long i = 0; i < WORKERS; i++)
        if (pthread_create(&t[i], NULL, churn_worker, (void*)i) != 0)
            return 2;
    for (int i = 0; i < WORKERS; i++)
        pthread_join(t[i], NULL);
    if (argc > 1)
        wait_for_go(argv[1]);
    for (int i = 0; i < SHORT_LIVED; i++) {
        pthread_t s;
        if (pthread_create(&s, NULL, short_lived, NULL) != 0)
            return 3;
        pthread_join(s, NULL);
    }
    scrub_stack();
    say("threads_churn done\n");
    return 0;
}
