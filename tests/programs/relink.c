// relink DIR: blocks reported lost that later turn out reachable, for `leaks leak`. Makes 10
// blocks of 48 bytes (group A) and 5 of 24 (group B) whose only pointers are kept XOR-masked,
// so a scan finds them definitely lost; writes its pid to DIR/pid. Once DIR/step exists: makes
// 4 blocks of 96 (group C, masked too), puts A's pointers back in plain view (reachable again),
// releases 2 of B, and writes DIR/stepped. Ends with status 0, printing "relinked", once DIR/stop
// exists.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define MASK ((uintptr_t)0x5a5a5a5a5a5a5a5aull) // no masked pointer looks like a heap address
enum { NA = 10, NB = 5, NC = 4 };
static uintptr_t masked_a[NA], masked_b[NB], masked_c[NC];
void* relinked[NA]; // extern: stores the compiler must keep

static NOINLINE void make(uintptr_t* masked, int n, size_t size) {
    for (int i = 0; i < n; i++) {
        char* p = malloc(size);
        memset(p, i, size);
        masked[i] = (uintptr_t)p ^ MASK;
    }
}

static NOINLINE void step(void) {
    make(masked_c, NC, 96);
    for (int i = 0; i < NA; i++)
        relinked[i] = (void*)(masked_a[i] ^ MASK);
    for (int i = 0; i < 2; i++)
        free((void*)(masked_b[i] ^ MASK));
}

static int exists(const char* dir, const char* name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

static int write_file(const char* dir, const char* name, const char* text) {
    char tmp[4096], path[4096];
    snprintf(tmp, sizeof tmp, "%s/%s.tmp", dir, name);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
        return -1;
    close(fd);
    return rename(tmp, path);
}

int main(int argc, char** argv) {
    if (argc < 2)
        return 2;
    make(masked_a, NA, 48);
    NO_TAIL_CALL();
    make(masked_b, NB, 24);
    NO_TAIL_CALL();
    scrub_stack();
    char buf[32];
    snprintf(buf, sizeof buf, "%d\n", (int)getpid());
    if (write_file(argv[1], "pid", buf) != 0)
        return 3;
    struct timespec ts = {0, 2000000L};
    int stepped = 0;
    while (!exists(argv[1], "stop")) {
        if (!stepped && exists(argv[1], "step")) {
            step();
            NO_TAIL_CALL();
            scrub_stack();
            stepped = write_file(argv[1], "stepped", "1\n") == 0;
        }
        nanosleep(&ts, NULL);
    }
    say("relinked\n");
    return 0;
}
