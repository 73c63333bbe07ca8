// live_server DIR [THREADS]: a long-running server for the live tests. Writes its pid to
// DIR/pid, then every 5 ms leaks 100 bytes from leak_early (200 bytes from leak_late once
// DIR/late exists), keeps a 64-byte block on a list (still reachable) and makes a temporary;
// THREADS workers (default 0) allocate and release meanwhile, 16 blocks every 0.2 ms each.
// Before it writes its pid it makes 100 blocks of 40 bytes and a holder block; once DIR/late
// exists it releases one of the 100 per round, and puts a new 77-byte block in the holder (its
// only pointer is in a block older than any attach: still reachable). Ends with status 7,
// printing "served 1", once DIR/stop exists.
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

struct node {
    struct node* next;
    char pad[56];
};
static struct node* kept;

static NOINLINE void leak_early(void) {
    char* p = malloc(100);
    memset(p, 1, 100);
    keep(p);
}

static NOINLINE void leak_late(void) {
    char* p = malloc(200);
    memset(p, 2, 200);
    keep(p);
}

static NOINLINE void keep_one(void) {
    struct node* n = malloc(sizeof *n);
    n->next = kept;
    kept = n;
}

static int stopping; // set (atomically) once the workers are to end
static void* early[100];
static void** holder;

static void* worker(void* arg) {
    (void)arg;
    churn_until(&stopping);
    return NULL;
}


int main(int argc, char** argv) {
    if (argc < 2)
        return 2;
    char path[4096], buf[32];
    for (int i = 0; i < 100; i++)
        early[i] = malloc(40);
    holder = malloc(64);
    holder[0] = NULL;
    int nearly = 100;
    snprintf(path, sizeof path, "%s/pid.tmp", argv[1]);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int n = snprintf(buf, sizeof buf, "%d\n", (int)getpid());
    if (fd < 0 || write(fd, buf, (size_t)n) != n)
        return 3;
    close(fd);
    char early_path[4096];
    snprintf(early_path, sizeof early_path, "%s/early", argv[1]); // released first once late
    FILE* f = fopen(early_path, "w");
    if (f) {
        fprintf(f, "%p\n", early[99]);
        fclose(f);
    }
    char final[4096];
    snprintf(final, sizeof final, "%s/pid", argv[1]);
    rename(path, final);
    int nthreads = argc > 2 ? atoi(argv[2]) : 0;
    pthread_t th[64];
    if (nthreads > 64)
        nthreads = 64;
    for (int i = 0; i < nthreads; i++)
        pthread_create(&th[i], NULL, worker, NULL);
    long served = 0;
    struct timespec ts = {0, 5000000L};
    while (!dir_has(argv[1], "stop")) {
        if (dir_has(argv[1], "late")) {
            leak_late();
            if (!holder[0])
                holder[0] = malloc(77);
            if (nearly > 0)
                free(early[--nearly]);
        } else
            leak_early();
        NO_TAIL_CALL();
        keep_one();
        void* t = malloc(32);
        keep(t);
        free(t);
        served++;
        nanosleep(&ts, NULL);
    }
    __atomic_store_n(&stopping, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    n = snprintf(buf, sizeof buf, "served %ld\n", served > 0 ? 1L : 0L);
    say(buf);
    return 7;
}
