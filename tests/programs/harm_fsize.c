// harm_fsize: a small RLIMIT_FSIZE (`ulimit -f`) must not change the program's life under
// heaplens: the agent's trace writes fail there, never the program. Each mode runs a few
// thousand allocations of pseudo-random sizes (a trace that compresses poorly, several KiB),
// then dlopen + dlclose (dlclose makes the agent write the trace from this thread).
//   harm_fsize quiet FILE    just that; prints "harm_fsize done", exits 0
//   harm_fsize own FILE      with a SIGXFSZ handler, writes 64 KiB to FILE itself first: its
//                            own write is cut and its own signal counted ("SIGXFSZ seen 1")
//   harm_fsize blocked FILE  SIGXFSZ blocked, its own write past the limit leaves its own signal
//                            pending, which must still be there after the agent's writes
//   harm_fsize die FILE      writes past the limit with the default action: killed by SIGXFSZ
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define NSLOTS 256
#define ROUNDS 4000
static void* slots[NSLOTS];
static volatile sig_atomic_t seen;

static void on_xfsz(int sig) {
    (void)sig;
    seen++;
}

NOINLINE static void churn(void) {
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < ROUNDS; i++) {
        churn_random_pair(&x, slots, NSLOTS);
    }
    for (int k = 0; k < NSLOTS; k++)
        free(slots[k]);
}

// Its own file, 64 KiB in one write: cut at the limit, and the next write fails with EFBIG.
static void write_own(const char* path) {
    static char data[65536];
    memset(data, 'x', sizeof data);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        say("cannot open FILE\n");
        exit(3);
    }
    long first = write(fd, data, sizeof data);
    long second = write(fd, data, sizeof data);
    int err = errno;
    close(fd);
    char line[128];
    snprintf(line, sizeof line, "own write: %s then %s\n", first > 0 ? "cut" : "failed",
             second < 0 && err == EFBIG ? "EFBIG" : "something else");
    say(line);
}

int main(int argc, char** argv) {
    if (argc < 3)
        return 2;
    const char* mode = argv[1];
    sigset_t xfsz;
    sigemptyset(&xfsz);
    sigaddset(&xfsz, SIGXFSZ);
    if (strcmp(mode, "own") == 0) {
        signal(SIGXFSZ, on_xfsz);
        write_own(argv[2]);
    } else if (strcmp(mode, "blocked") == 0) {
        sigprocmask(SIG_BLOCK, &xfsz, NULL);
        write_own(argv[2]);
    } else if (strcmp(mode, "die") == 0) {
        write_own(argv[2]);
    }
    churn();
    void* lib = dlopen("libm.so.6", RTLD_NOW);
    if (lib)
        dlclose(lib);
    if (strcmp(mode, "own") == 0) {
        char line[64];
        snprintf(line, sizeof line, "SIGXFSZ seen %d\n", (int)seen);
        say(line);
    } else if (strcmp(mode, "blocked") == 0) {
        sigset_t pending;
        sigpending(&pending);
        say(sigismember(&pending, SIGXFSZ) ? "own SIGXFSZ pending\n" : "own SIGXFSZ lost\n");
        struct timespec zero = {0, 0};
        say(sigtimedwait(&xfsz, NULL, &zero) == SIGXFSZ ? "taken\n" : "not there\n");
    }
    say("harm_fsize done\n");
    return 0;
}
