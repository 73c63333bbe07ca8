// reach_tls: pointers held only in __thread variables are still reachable.
//   store_in_main_tls:    321 B, in the main thread's TLS
//   store_in_worker_tls:  654 B, in the TLS of a worker thread that is blocked (alive) at exit
#include <pthread.h>
#include <semaphore.h>
#include <stdlib.h>

#include "common.h"

static __thread char* tls_slot;
static sem_t worker_ready;

NOINLINE static void store_in_main_tls(void) {
    tls_slot = malloc(321);
    tls_slot[0] = 1;
}

NOINLINE static void store_in_worker_tls(void) {
    tls_slot = malloc(654);
    tls_slot[0] = 2;
}

NOINLINE static void block_forever(void) {
    for (;;)
        pause();
}

static void* worker(void* arg) {
    (void)arg;
    store_in_worker_tls();
    scrub_stack();
    sem_post(&worker_ready);
    block_forever();
    return NULL;
}

int main(void) {
    sem_init(&worker_ready, 0, 0);
    store_in_main_tls();
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) != 0)
        return 2;
    while (sem_wait(&worker_ready) != 0) {
    }
    scrub_stack();
    say("reach_tls done\n");
    return tls_slot[0] == 1 ? 0 : 1;
}
