// harm_clone: children made by clone() and vfork(), whose allocations must land in the right
// trace, under the right thread, without disturbing the parent's.
//   harm_clone fork    clone(SIGCHLD): a process of its own; its trace is its own. The child
//                      mallocs 3 x 111 (freed) and 222 (lost, child_leak), returns 7.
//   harm_clone vm      clone(CLONE_VM | SIGCHLD): runs in the parent's memory, a thread of its
//                      own: 3 x 444 freed and 444 kept in `shared_kept` (reachable), returns 0.
//   harm_clone thread  clone(CLONE_VM | CLONE_THREAD | ...) with its own tid word, as a thread
//                      library would: 3 x 555 freed, 555 kept in `shared_kept`.
//   harm_clone vfork   vfork(); the child _exits at once with status 5: the parent's trace goes
//                      on. Then clone(CLONE_VM | CLONE_VFORK | SIGCHLD) whose child execs
//                      "harm_clone exec-target": no EXEC in the parent's trace.
//   harm_clone spawn   posix_spawn("harm_clone exec-target"): it writes a trace of its own.
// In every mode the parent then mallocs 333 and frees it, prints what it saw, and exits 0;
// "main" is the parent's thread (the first), the child's allocations are all in child_work.
#define _GNU_SOURCE
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "common.h"

#define CHILD_STACK (256 * 1024)
static char child_stack[CHILD_STACK] __attribute__((aligned(16)));
static char* self_path;
void* shared_kept; // the CLONE_VM children leave a block here: reachable at exit
extern char** environ;

NOINLINE static void child_leak(void) {
    char* p = malloc(222);
    p[0] = 1;
    keep(p);
}

NOINLINE static void child_work(size_t size, int leak_it) {
    for (int i = 0; i < 3; i++) {
        void* p = malloc(size);
        keep(p);
        free(p);
    }
    if (leak_it)
        child_leak();
    else
        shared_kept = malloc(size);
}

static int child_fork(void* arg) {
    (void)arg;
    child_work(111, 1);
    scrub_stack();
    return 7;
}

static int child_vm(void* arg) {
    child_work((size_t)(long)arg, 0);
    return 0;
}

static int child_exec(void* arg) {
    (void)arg;
    execl(self_path, self_path, "exec-target", (char*)NULL);
    _exit(127);
}

static void wait_status(pid_t pid, const char* what) {
    int st = 0;
    if (waitpid(pid, &st, __WALL) != pid) {
        say("waitpid failed\n");
        exit(3);
    }
    char line[128];
    snprintf(line, sizeof line, "%s: status %d\n", what, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    say(line);
}

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "fork";
    self_path = argv[0];
    char* top = child_stack + CHILD_STACK;
    if (strcmp(mode, "exec-target") == 0) {
        void* p = malloc(666);
        keep(p);
        free(p);
        say("exec-target ran\n");
        return 0;
    } else if (strcmp(mode, "fork") == 0) {
        pid_t pid = clone(child_fork, top, SIGCHLD, NULL);
        if (pid < 0)
            return 2;
        wait_status(pid, "fork child");
    } else if (strcmp(mode, "vm") == 0) {
        pid_t pid = clone(child_vm, top, CLONE_VM | SIGCHLD, (void*)444L);
        if (pid < 0)
            return 2;
        wait_status(pid, "vm child");
    } else if (strcmp(mode, "thread") == 0) {
        static _Atomic pid_t tid_word;
        int flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
                    CLONE_SYSVSEM | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID;
        pid_t tid = clone(child_vm, top, flags, (void*)555L, &tid_word, NULL, &tid_word);
        if (tid < 0)
            return 2;
        // The kernel clears the word and wakes it when the thread is gone (bounded: 10 s).
        for (int i = 0; i < 1000; i++) {
            pid_t now = tid_word;
            if (now == 0)
                break;
            struct timespec ts = {0, 10000000L};
            syscall(SYS_futex, &tid_word, FUTEX_WAIT, now, &ts, NULL, 0);
        }
        say(tid_word == 0 ? "thread child: done\n" : "thread child: still running\n");
    } else if (strcmp(mode, "vfork") == 0) {
        pid_t pid = vfork();
        if (pid == 0)
            _exit(5);
        wait_status(pid, "vfork child");
        pid = clone(child_exec, top, CLONE_VM | CLONE_VFORK | SIGCHLD, NULL);
        if (pid < 0)
            return 2;
        wait_status(pid, "clone-vfork child");
    } else if (strcmp(mode, "spawn") == 0) {
        pid_t pid;
        char* args[] = {self_path, "exec-target", NULL};
        if (posix_spawn(&pid, self_path, NULL, NULL, args, environ) != 0)
            return 2;
        wait_status(pid, "spawned child");
    }
    void* p = malloc(333);
    keep(p);
    free(p);
    say("parent done\n");
    return 0;
}
