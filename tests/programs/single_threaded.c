// single_threaded: a program with one thread must look single-threaded to glibc under heaplens
// as it does natively (glibc then takes its fast paths: malloc without arena locks, mutexes and
// shared_ptr counts without atomics), although the agent runs a writer thread; and once the
// program makes a thread of its own, multi-threaded. It prints glibc's flag (read through
// libc's own symbol) and the executable's copy of __libc_single_threaded, which this program
// has because it names it, at three points.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/single_threaded.h>

#include "common.h"

static void* thread_body(void* arg) { return arg; }

static void show(const char* when) {
    const char* libc_flag = dlsym(RTLD_NEXT, "__libc_single_threaded");
    say(when);
    say(" libc=");
    say(libc_flag ? (*libc_flag ? "1" : "0") : "?");
    say(" exe=");
    say(__libc_single_threaded ? "1" : "0");
    say("\n");
}

int main(void) {
    show("start");
    for (int i = 0; i < 100000; i++) {
        void* p = malloc(32);
        keep(p);
        free(p);
    }
    show("after-mallocs");
    pthread_t t;
    if (pthread_create(&t, NULL, thread_body, NULL) == 0)
        pthread_join(t, NULL);
    show("after-own-thread");
    return 0;
}
