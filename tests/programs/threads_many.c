// threads_many: 20 rounds of 50 threads, 1,000 threads in all, each doing 2,000 malloc/free
// pairs and returning a 10-byte block; main frees the blocks of the odd rounds only, then
// prints through stdio. Definitely lost: exactly the 500 blocks of the even rounds (5,000
// bytes); stdout's buffer stays reachable however many thread stacks glibc keeps cached.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "common.h"

NOINLINE static void* worker(void* arg) {
    (void)arg;
    for (int i = 0; i < 2000; i++) {
        char* p = malloc(32 + i % 100);
        keep(p);
        free(p);
    }
    char* r = malloc(10);
    keep(r);
    return r;
}

int main(void) {
    for (int round = 0; round < 20; round++) {
        pthread_t t[50];
        for (int i = 0; i < 50; i++)
            pthread_create(&t[i], NULL, worker, NULL);
        for (int i = 0; i < 50; i++) {
            void* r;
            pthread_join(t[i], &r);
            if (round % 2)
                free(r);
        }
    }
    puts("threads_many done");
    scrub_stack();
    return 0;
}
