// exit_raw [SLEEP_MS]: 16,000 mallocs of 100 bytes (every other one freed), then, after SLEEP_MS
// (default 50), the exit_group system call itself, as Go's runtime and syscall(2) users end: no
// handler, no destructor, nothing the agent can see. Exit status 4. The trace must say its end
// is missing (trace_complete false), and hold every event older than the writer's flush period.
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

int main(int argc, char** argv) {
    long sleep_ms = argc > 1 ? atol(argv[1]) : 50;
    for (int i = 0; i < 16000; i++) {
        void* p = malloc(100);
        keep(p);
        if (i % 2)
            free(p);
    }
    struct timespec ts = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    syscall(SYS_exit_group, 4);
    return 0;
}
