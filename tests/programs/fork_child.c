// fork_child: forks first; the child leaks 300 B in child_only_leak and exits 0; the parent
// leaks 200 B in parent_only_leak, waits for the child and returns 0. Nothing is allocated
// before the fork, so neither process inherits the other's blocks. Prints "child PID".
#include <stdlib.h>
#include <sys/wait.h>

#include "common.h"

NOINLINE static void child_only_leak(void) {
    char* p = malloc(300);
    p[0] = 1;
    keep(p);
}

NOINLINE static void parent_only_leak(void) {
    char* p = malloc(200);
    p[0] = 2;
    keep(p);
}

int main(void) {
    pid_t pid = fork();
    if (pid < 0)
        return 2;
    if (pid == 0) {
        child_only_leak();
        scrub_stack();
        exit(0);
    }
    parent_only_leak();
    say_num("child ", pid);
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return 1;
    scrub_stack();
    return 0;
}
