// harm_pthread_exit: main() ends with pthread_exit(); natively the process exits 0 once its last
// thread is gone (glibc calls exit(0) on that thread: atexit handlers and destructors run).
//   harm_pthread_exit alone   main is the only thread
//   harm_pthread_exit worker  a thread outlives main: it allocates after main has exited
//   harm_pthread_exit quiet   a thread that never allocates outlives main
// main: malloc(100) freed, malloc(300) kept in a global (still reachable, keep_global); the worker
// thread: malloc(200) x 4, three freed, one lost (worker_leak). The atexit handler frees nothing
// and prints "atexit ran"; the destructor prints "destructor ran".
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"

void* kept; // still reachable at exit
static _Atomic int main_gone;

static void on_exit_handler(void) {
    say("atexit ran\n");
}
__attribute__((destructor)) static void on_unload(void) {
    say("destructor ran\n");
}

NOINLINE static void keep_global(void) {
    kept = malloc(300);
    keep(kept);
}

NOINLINE static void worker_leak(void) {
    char* p = malloc(200);
    p[0] = 1;
    keep(p);
}

static void pause_ms(long ms) {
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

static void* worker(void* arg) {
    (void)arg;
    // Waits until main has called pthread_exit (bounded: 5 s), so the thread outlives it.
    for (int i = 0; i < 500 && !main_gone; i++)
        pause_ms(10);
    pause_ms(50);
    for (int i = 0; i < 3; i++) {
        void* p = malloc(200);
        keep(p);
        free(p);
    }
    worker_leak();
    scrub_stack();
    say("worker done\n");
    return NULL;
}

static void* quiet(void* arg) {
    (void)arg;
    for (int i = 0; i < 500 && !main_gone; i++)
        pause_ms(10);
    pause_ms(50);
    say("quiet done\n");
    return NULL;
}

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "alone";
    atexit(on_exit_handler);
    void* p = malloc(100);
    keep(p);
    free(p);
    keep_global();
    pthread_t t;
    if (strcmp(mode, "worker") == 0 && pthread_create(&t, NULL, worker, NULL) != 0)
        return 2;
    if (strcmp(mode, "quiet") == 0 && pthread_create(&t, NULL, quiet, NULL) != 0)
        return 2;
    say("main exits its thread\n");
    main_gone = 1;
    pthread_exit(NULL);
}
