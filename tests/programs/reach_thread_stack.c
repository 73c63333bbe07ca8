// reach_thread_stack: a worker thread allocates 555 bytes in thread_stack_holder, keeps the
// pointer only in a local variable on its own stack, and blocks forever. main returns: the
// block is still reachable (the live thread's stack is a root), nothing is lost.
#include <pthread.h>
#include <semaphore.h>
#include <stdlib.h>

#include "common.h"

static sem_t holder_ready;

NOINLINE static void block_forever(void) {
    for (;;)
        pause();
}

NOINLINE static void thread_stack_holder(void) {
    char* volatile held = malloc(555); // volatile: the pointer lives in this frame's stack slot
    held[0] = 1;
    sem_post(&holder_ready);
    block_forever();
    held[1] = 2; // not reached; keeps the slot in use after the call above
}

static void* worker(void* arg) {
    (void)arg;
    thread_stack_holder();
    return NULL;
}

int main(void) {
    sem_init(&holder_ready, 0, 0);
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL) != 0)
        return 2;
    while (sem_wait(&holder_ready) != 0) {
    }
    scrub_stack();
    say("reach_thread_stack done\n");
    return 0;
}
