// fork_walks: a parent that allocates through 48 stacks, one recursion level apart, and forks
// 20 children between rounds of them. Each child leaks one 40-byte block at each of 1 to 48
// levels (48 blocks, stacks cut at the trace's depth) and exits 0. The parent waits for each,
// then prints "parent_faults_per_fork N": its own minor page faults during the forking rounds,
// per fork, and "child_faults N", a child's on average. Under the agent those count the parent's pages made read-only by each fork and
// written again after it: the unwinder's state, wiped on fork, is not among them.
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "common.h"

#define LEVELS 48
#define FORKS 20
#define WARM_ROUNDS 4

// A block of `bytes` allocated `levels` calls down: each level is its own frame and stack
// pointer, so each level count is its own stack.
NOINLINE static void* descend(int levels, size_t bytes) {
    void* p = levels > 1 ? descend(levels - 1, bytes) : malloc(bytes);
    NO_TAIL_CALL();
    return p;
}

NOINLINE static void churn(void) {
    for (int k = 1; k <= LEVELS; k++) {
        char* p = descend(k, 24);
        p[0] = (char)k;
        keep(p);
        free(p);
    }
}

NOINLINE static void child_leaks(void) {
    for (int k = 1; k <= LEVELS; k++) {
        char* p = descend(k, 40);
        p[0] = (char)k;
        keep(p);
    }
}

static long minor_faults(void) {
    struct rusage u;
    return getrusage(RUSAGE_SELF, &u) == 0 ? u.ru_minflt : -1;
}

int main(void) {
    for (int r = 0; r < WARM_ROUNDS; r++)
        churn();
    long before = minor_faults(), child_faults = 0;
    for (int i = 0; i < FORKS; i++) {
        churn();
        pid_t pid = fork();
        if (pid < 0)
            return 2;
        if (pid == 0) {
            child_leaks();
            scrub_stack();
            exit(0);
        }
        int status = 0;
        struct rusage child;
        if (wait4(pid, &status, 0, &child) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            return 1;
        child_faults += child.ru_minflt;
    }
    long after = minor_faults();
    say_num("parent_faults_per_fork ", (after - before) / FORKS);
    say_num("child_faults ", child_faults / FORKS);
    scrub_stack();
    return 0;
}
