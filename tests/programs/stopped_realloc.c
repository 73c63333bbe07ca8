// SPDX-License-Identifier: MIT
// stopped_realloc DIR: a small block moved by realloc while tracing is stopped (the agent passes
// the call through, and the block's slot in the live table still says live), then, tracing
// started again, a header block handed out at that very address and freed. The release must
// find the header block, not the small block's stale slot: freeing from the wrong pointer makes
// glibc abort. Writes its pid to DIR/pid; waits for DIR/stopped (after `stop`) and DIR/started
// (after `start`). Run with glibc's tcache and fastbins off
// (GLIBC_TUNABLES=glibc.malloc.tcache_count=0:glibc.malloc.mxfast=0): the blocks around the small
// one then merge into the top chunk, and the program carves it so that a header block lands on
// the small block's address, trying sizes around the one the agent's layout gives. Prints
// "same 1" once one did (0: none did, the case was not made), then "done".
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define HEADED_SIZE 20000 // larger than any free chunk a young process has: carved from the top

static void wait_for(const char* dir, const char* name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    while (access(path, F_OK) != 0)
        usleep(10000);
}

int main(int argc, char** argv) {
    if (argc < 2)
        return 2;
    char* before = malloc(40000); // a header block, the chunk before the small one
    char* small = malloc(100);    // a slot of the direct map
    char* after = malloc(1000);   // keeps realloc from growing the small block in place
    memset(before, 1, 40000);
    memset(small, 2, 100);
    memset(after, 3, 1000);
    char path[512];
    snprintf(path, sizeof path, "%s/pid", argv[1]);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0)
        return 2;
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
    if (write(fd, pid, (size_t)n) != n)
        return 2;
    close(fd);
    wait_for(argv[1], "stopped");
    uintptr_t small_at = (uintptr_t)small, before_at = (uintptr_t)before;
    free(realloc(small, 5000)); // passed through: the slot of `small` still says live
    wait_for(argv[1], "started");
    free(before);
    free(after); // all three merge into the top chunk
    // A block ending 32 bytes before small_at, then the header block: its allocator's pointer
    // 16 bytes before small_at, the program's at small_at (a 16-byte header, an 8-byte guard).
    long guess = (long)(small_at - before_at) - 40;
    int same = 0;
    for (long size = guess - 64; size <= guess + 64 && !same; size += 8) {
        char* filler = malloc((size_t)size);
        char* headed = malloc(HEADED_SIZE);
        if (!filler || !headed)
            return 3;
        same = (uintptr_t)headed == small_at;
        memset(headed, 5, HEADED_SIZE);
        free(headed); // the header block's release, wherever it landed
        free(filler);
    }
    say_num("same ", same);
    say("done\n");
    return 0;
}
