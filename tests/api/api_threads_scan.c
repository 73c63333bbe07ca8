// api_threads_scan: threads start and end without pause while the main thread stops the world
// again and again (heaplens_leak_check): a stop's signal lands on threads making their agent
// state or ending, while they hold the agent's thread registry. Every scan must come back, and
// the program must end.
// Usage: api_threads_scan [SCANS] (default 1500). Prints "scans N of N" (0 done untraced).
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "heaplens.h"

#define SPAWNERS 3

static int stop;

static void* short_lived(void* arg) {
    (void)arg;
    void* volatile p = malloc(32);
    free(p);
    return NULL;
}

static void* spawner(void* arg) {
    (void)arg;
    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
        pthread_t t;
        if (pthread_create(&t, NULL, short_lived, NULL) == 0)
            pthread_join(t, NULL);
    }
    return NULL;
}

int main(int argc, char** argv) {
    int scans = argc > 1 ? atoi(argv[1]) : 1500;
    pthread_t s[SPAWNERS];
    for (int i = 0; i < SPAWNERS; i++)
        if (pthread_create(&s[i], NULL, spawner, NULL) != 0)
            return 2;
    int done = 0;
    struct heaplens_leak_counts c;
    for (int i = 0; i < scans; i++)
        done += heaplens_leak_check(&c) == 0;
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < SPAWNERS; i++)
        pthread_join(s[i], NULL);
    printf("scans %d of %d\n", done, scans);
    return 0;
}
