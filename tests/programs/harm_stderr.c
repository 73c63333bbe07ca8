// harm_stderr: the program's descriptor 2 is its own. It closes 2 and opens its data file there
// (DATA, argv[2]), writes two lines into it around a few thousand allocations of pseudo-random
// sizes (a trace that compresses poorly: enough to fill a small disk or file size limit, which
// makes the agent complain), then dlopen + dlclose (the agent writes the trace from here) and
// exits 0. DATA must hold exactly "data line 1\ndata line 2\n" afterwards.
//   harm_stderr plain DATA   as above
//   harm_stderr reuse DATA   also puts DATA on every other descriptor it finds open from 3 up
//                            (a hostile daemon reusing numbers): the agent's own included
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define NSLOTS 256
#define ROUNDS 20000
#define MAX_FD 1024
static void* slots[NSLOTS];

NOINLINE static void churn(void) {
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < ROUNDS; i++) {
        churn_random_pair(&x, slots, NSLOTS);
    }
    for (int k = 0; k < NSLOTS; k++)
        free(slots[k]);
}

static void put(const char* s) {
    write(2, s, strlen(s));
}

int main(int argc, char** argv) {
    if (argc < 3)
        return 2;
    close(2);
    if (open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644) != 2)
        return 3;
    if (strcmp(argv[1], "reuse") == 0)
        for (int fd = 3; fd < MAX_FD; fd++)
            if (fcntl(fd, F_GETFD) >= 0)
                dup2(2, fd);
    put("data line 1\n");
    churn();
    void* lib = dlopen("libm.so.6", RTLD_NOW);
    if (lib)
        dlclose(lib);
    put("data line 2\n");
    say("harm_stderr done\n");
    return 0;
}
