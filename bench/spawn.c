// SPDX-License-Identifier: MIT
// spawn.c - benchmark workload: a program holding a large heap starts short programs, one after
// the other, by fork then exec, as build tools and test runners do (cmake and node through
// libuv, bash, Python's os.fork + exec). The heap is what each child inherits until its exec.
// Usage: spawn N BLOCKS PROG [ARGS...]   (N children of PROG, BLOCKS live blocks of 16-80 B)
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

void** spawn_heap; // not static: the blocks stay reachable, as a program's own data would

int main(int argc, char** argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: spawn N BLOCKS PROG [ARGS...]\n");
        return 2;
    }
    long n = atol(argv[1]), blocks = atol(argv[2]);
    spawn_heap = malloc((size_t)blocks * sizeof *spawn_heap);
    if (!spawn_heap)
        return 1;
    for (long i = 0; i < blocks; i++)
        if (!(spawn_heap[i] = malloc(16 + (size_t)(i % 65))))
            return 1;
    for (long i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid < 0)
            return 1;
        if (pid == 0) {
            execv(argv[3], argv + 3);
            _exit(127);
        }
        int status;
        if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            return 1;
    }
    return 0;
}
