// fork_quiet MODE: keeps 2,000 blocks live (a heap for the child to inherit), leaks 123 B in
// inherited_leak, then forks once. The child, by MODE:
//   exec   execs exec_target (next to this executable) with "5" at once, without a heap event,
//          as a spawn by fork then exec does
//   exit   ends by _exit(3) without a heap event
//   event  allocates and frees a block, then execs exec_target with "5"
// The parent waits for the child, prints "child PID" and returns 0 when the child ended as
// its mode says (5, 3, 5), else 1.
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

#define KEPT 2000

void* kept[KEPT]; // not static: the stores stay, and the blocks reachable from it

NOINLINE static void inherited_leak(void) {
    char* p = malloc(123);
    p[0] = 1;
    keep(p);
}

NOINLINE static void child_event(void) {
    char* p = malloc(50);
    keep(p);
    free(p);
}

static void child(const char* mode) {
    static char path[4096];
    if (!strcmp(mode, "exit"))
        _exit(3);
    if (!strcmp(mode, "event"))
        child_event();
    if (exe_dir(path, sizeof path - 32) != 0)
        _exit(98);
    strcat(path, "/exec_target");
    char* argv[] = {"exec_target", "5", NULL};
    execv(path, argv);
    _exit(99);
}

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "exec";
    for (int i = 0; i < KEPT; i++)
        kept[i] = malloc(16 + i % 64);
    inherited_leak();
    pid_t pid = fork();
    if (pid < 0)
        return 2;
    if (pid == 0)
        child(mode);
    say_num("child ", pid);
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
        return 1;
    scrub_stack();
    return WEXITSTATUS(status) == (!strcmp(mode, "exit") ? 3 : 5) ? 0 : 1;
}
