// exit_raw [SLEEP_MS [asm]]: 16,000 mallocs of 100 bytes (every other one freed), then, after
// SLEEP_MS (default 50), the exit_group system call: through the C library's syscall(), or with
// "asm" by the instruction itself, as Go's runtime ends: no handler, no destructor, nothing the
// agent can see. Exit status 4. Through syscall() the trace ends and is scanned as after _exit;
// by the instruction the trace must say its end is missing (trace_complete false), and hold
// every event older than the writer's flush period.
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

static void exit_group_instruction(int status) {
#if defined(__x86_64__)
    __asm__ volatile("syscall" : : "a"((long)SYS_exit_group), "D"((long)status) : "rcx", "r11");
#elif defined(__aarch64__)
    register long x8 __asm__("x8") = SYS_exit_group, x0 __asm__("x0") = status;
    __asm__ volatile("svc 0" : : "r"(x8), "r"(x0));
#endif
    syscall(SYS_exit_group, status);
}

int main(int argc, char** argv) {
    long sleep_ms = argc > 1 ? atol(argv[1]) : 50;
    int by_instruction = argc > 2 && strcmp(argv[2], "asm") == 0;
    for (int i = 0; i < 16000; i++) {
        void* p = malloc(100);
        keep(p);
        if (i % 2)
            free(p);
    }
    struct timespec ts = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    if (by_instruction)
        exit_group_instruction(4);
    syscall(SYS_exit_group, 4);
    return 0;
}
