// kill_progress FILE: allocates without end (64-127 bytes, every other block freed at once) and
// after each malloc publishes, in FILE (shared mapping), how many mallocs it has made and when
// (CLOCK_MONOTONIC ns), so a test that kills it with SIGKILL at a random moment knows exactly
// what it did: what the trace lacks is what was lost. Ends by itself after 20 s.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

typedef struct progress_s {
    _Atomic uint64_t mallocs;  // made so far
    _Atomic uint64_t start_ns; // when the first was made
    _Atomic uint64_t last_ns;  // when the latest was made
    _Atomic int64_t pid;
} progress_t;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#define RUN_NS (20ull * 1000000000ull)

int main(int argc, char** argv) {
    if (argc < 2)
        return 2;
    int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || ftruncate(fd, 4096) != 0)
        return 2;
    progress_t* pr = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (pr == MAP_FAILED)
        return 2;
    pr->pid = getpid();
    uint64_t start = now_ns();
    pr->start_ns = start;
    void* held = NULL;
    for (uint64_t i = 0;; i++) {
        void* p = malloc(64 + (i & 63));
        keep(p);
        uint64_t t = now_ns();
        pr->last_ns = t;
        pr->mallocs = i + 1;
        if (i & 1)
            free(p);
        else {
            free(held);
            held = p;
        }
        if ((i & 1023) == 0 && t - start > RUN_NS)
            break;
    }
    return 0;
}
