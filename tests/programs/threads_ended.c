// SPDX-License-Identifier: MIT
// threads_ended.c - threads that ended before the program. Two ran at once and were joined:
// glibc keeps their two stacks cached, each with its thread's TLS vector (a heap block), and
// its __libc_freeres releases those at exit, so memcheck reports none of them. A third then
// took one of the cached stacks and ended unjoined: its stack and TLS vector stay in use, and
// memcheck reports that vector possibly lost. Each thread leaks one 24-byte block.
// Usage: threads_ended [term]   (term: the program ends by SIGTERM instead, where memcheck has
// glibc release nothing and reports both cached vectors possibly lost too)
#define _GNU_SOURCE
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "common.h"

static NOINLINE void leak_in_thread(void) {
    char* p = malloc(24);
    memset(p, 1, 24);
    keep(p);
}

static _Atomic long last_tid;
static pthread_barrier_t both;

static void* run(void* arg) {
    leak_in_thread();
    NO_TAIL_CALL();
    if (arg) // the first two: both running at once, so that each has a stack of its own
        pthread_barrier_wait(&both);
    last_tid = syscall(SYS_gettid);
    return NULL;
}

// Until the kernel says the thread is gone (its task directory goes with it).
static void wait_ended(long tid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%ld", tid);
    struct stat st;
    while (stat(path, &st) == 0)
        usleep(1000);
}

int main(int argc, char** argv) {
    pthread_t t[2], last;
    pthread_barrier_init(&both, NULL, 2);
    for (int i = 0; i < 2; i++)
        if (pthread_create(&t[i], NULL, run, &both) != 0)
            return 1;
    for (int i = 0; i < 2; i++)
        if (pthread_join(t[i], NULL) != 0)
            return 1;
    last_tid = 0;
    if (pthread_create(&last, NULL, run, NULL) != 0)
        return 1;
    while (!last_tid)
        usleep(1000);
    wait_ended(last_tid);
    scrub_stack();
    if (argc > 1 && !strcmp(argv[1], "term"))
        raise(SIGTERM);
    return 0;
}
