// exit_sigkill: 20 allocations of 600 bytes kept in a global (the last in alloc_before_kill),
// a pause so a tracer may flush, then SIGKILL to itself: no handler can run, the trace is cut.
#include <signal.h>
#include <stdlib.h>
#include <time.h>

#include "common.h"

void* blocks[20]; // not static: a write-only static array would let gcc drop the mallocs

NOINLINE static void alloc_before_kill(void) {
    for (int i = 0; i < 20; i++) {
        char* p = malloc(600);
        p[0] = (char)i;
        blocks[i] = p;
    }
}

NOINLINE static void kill_myself(void) {
    say("exit_sigkill: SIGKILL\n");
    struct timespec ts = {0, 300 * 1000 * 1000};
    nanosleep(&ts, NULL);
    kill(getpid(), SIGKILL);
}

int main(void) {
    alloc_before_kill();
    kill_myself();
    return 0;
}
