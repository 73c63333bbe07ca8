// fork_busy [FORKS]: four threads allocate and release as fast as they can, each keeping its
// last 256 blocks, while the main thread forks FORKS times (default 100), a millisecond apart.
// Each child exits at once: its trace, written at its end, holds the blocks it inherited and the
// exit scan's verdict on each. A fork lands while some thread is in the middle of recording a
// block; the child must see that block either whole or not at all. Prints "forks N".
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>

#include "common.h"

#define THREADS 4
#define KEEP 256

static void* kept[THREADS][KEEP];
static atomic_int stop;

NOINLINE static void* busy_alloc(size_t n) {
    void* p = malloc(n);
    keep(p);
    NO_TAIL_CALL();
    return p;
}

static void* worker(void* arg) {
    int t = (int)(long)arg;
    for (unsigned i = 0; !atomic_load_explicit(&stop, memory_order_relaxed); i++) {
        void* p = busy_alloc(16 + (i % 5) * 8 + (size_t)t);
        unsigned k = i % KEEP;
        free(kept[t][k]);
        kept[t][k] = p;
    }
    return NULL;
}

int main(int argc, char** argv) {
    int forks = argc > 1 ? atoi(argv[1]) : 100;
    pthread_t th[THREADS];
    for (long t = 0; t < THREADS; t++)
        if (pthread_create(&th[t], NULL, worker, (void*)t) != 0)
            return 2;
    struct timespec ms = {0, 1000000};
    int made = 0;
    for (int i = 0; i < forks; i++) {
        nanosleep(&ms, NULL);
        pid_t pid = fork();
        if (pid < 0)
            break;
        if (pid == 0)
            exit(0);
        int status = 0;
        if (waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0)
            made++;
    }
    atomic_store(&stop, 1);
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < THREADS; t++)
        for (int k = 0; k < KEEP; k++)
            free(kept[t][k]);
    say_num("forks ", made);
    return made == forks ? 0 : 1;
}
