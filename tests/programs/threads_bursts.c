// threads_bursts: 32 threads make allocations in bursts, as a server's workers do: each makes 60
// bursts of 150 malloc/free pairs, 2 ms apart (18,000 pairs, more events than the largest ring
// holds, made slowly enough for the writer to keep up), and leaks one block of 100 bytes in
// leak_once. One more thread makes 200,000 pairs flat out meanwhile. At the end the program
// prints its peak RSS ("vmhwm_kb N"): run.sh compares it with a run without heaplens.
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"

#define BURSTY 32
#define BURSTS 60
#define BURST_PAIRS 150
#define FLAT_OUT_PAIRS 200000
#define NSLOTS 64

// The block is written whole: its bytes left as glibc hands them out hold what its free lists
// kept there (chunk addresses), and a leaked block's stale word that lands inside another
// thread's leaked block made that one indirectly lost in about 1 run of 75, with trailers or the
// direct map alike (memcheck's own allocator leaves no such words).
NOINLINE static void leak_once(void) {
    char* p = malloc(100);
    memset(p, 1, 100); // not 0: malloc and a zero fill would be compiled as calloc
    keep(p);
}

NOINLINE static void* bursty(void* arg) {
    void* slots[NSLOTS] = {0};
    uint64_t x = 88172645463325252ull + (uintptr_t)arg;
    struct timespec pause = {0, 2000000L};
    for (int b = 0; b < BURSTS; b++) {
        for (int i = 0; i < BURST_PAIRS; i++)
            churn_random_pair(&x, slots, NSLOTS);
        nanosleep(&pause, NULL);
    }
    for (int k = 0; k < NSLOTS; k++)
        free(slots[k]);
    leak_once();
    scrub_stack();
    return NULL;
}

NOINLINE static void* flat_out(void* arg) {
    (void)arg;
    void* slots[NSLOTS] = {0};
    uint64_t x = 2463534242ull;
    for (int i = 0; i < FLAT_OUT_PAIRS; i++)
        churn_random_pair(&x, slots, NSLOTS);
    for (int k = 0; k < NSLOTS; k++)
        free(slots[k]);
    return NULL;
}

int main(void) {
    pthread_t fast;
    if (pthread_create(&fast, NULL, flat_out, NULL) != 0)
        return 2;
    if (run_workers(BURSTY, bursty) != 0)
        return 2;
    pthread_join(fast, NULL);
    say_num("vmhwm_kb ", self_status_kb("VmHWM:"));
    return 0;
}
