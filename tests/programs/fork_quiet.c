// fork_quiet MODE: keeps 2,000 blocks live (a heap for the child to inherit), leaks 123 B in
// inherited_leak, then forks once. The child, by MODE:
//   exec   execs exec_target (next to this executable) with "5" at once, without a heap event,
//          as a spawn by fork then exec does
//   exit   ends by _exit(3) without a heap event
//   event  allocates and frees a block, then execs exec_target with "5"; before the exec it
//          must be the only thread of its process, as without heaplens (else _exit(97))
//   lives  allocates and frees a block every millisecond for 60 ms, then ends by _exit(3)
//   idle   allocates one block, then sleeps 100 ms without a heap event and ends by _exit(3)
//   thread allocates and frees a block, has a thread of its own do it 10 times, then sleeps
//          60 ms without a heap event and ends by _exit(3)
//   clone  allocates and frees a block, then a child of clone(CLONE_VM) (its memory shared)
//          does it 3 times and returns (a raw exit of that task alone); waited for, the child
//          does it 20,000 times more and ends by _exit(3)
//   killed allocates 5 blocks and waits for a signal: the parent sends SIGKILL after 200 ms
// The parent waits for the child, prints "child PID" and returns 0 when the child ended as
// its mode says (5, 3, 5, 3, 3, 3, 3, killed by SIGKILL), else 1.
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
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

// The threads of this process, from /proc/self/task by system calls alone (no heap event).
static int count_tasks(void) {
    char buf[4096];
    int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int n = 0;
    long got;
    while ((got = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0) {
        for (long off = 0; off < got;) {
            const char* name = buf + off + 19; // struct linux_dirent64: d_name at 19
            unsigned short reclen = *(unsigned short*)(buf + off + 16);
            if (name[0] != '.')
                n++;
            off += reclen;
        }
    }
    close(fd);
    return n;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

void* idle_block; // not static: the store stays, and the block reachable from it

static char clone_stack[64 << 10] __attribute__((aligned(16)));

static int three_events(void* arg) {
    for (int i = 0; i < 3; i++)
        child_event();
    return arg != NULL;
}

static void* ten_events(void* arg) {
    for (int i = 0; i < 10; i++)
        child_event();
    return arg;
}

static void child(const char* mode) {
    static char path[4096];
    if (!strcmp(mode, "exit"))
        _exit(3);
    if (!strcmp(mode, "lives")) {
        for (int i = 0; i < 60; i++) {
            child_event();
            sleep_ms(1);
        }
        _exit(3);
    }
    if (!strcmp(mode, "thread")) {
        child_event();
        pthread_t th;
        if (pthread_create(&th, NULL, ten_events, NULL) != 0 || pthread_join(th, NULL) != 0)
            _exit(96);
        sleep_ms(60);
        _exit(3);
    }
    if (!strcmp(mode, "clone")) {
        child_event();
        pid_t task = clone(three_events, clone_stack + sizeof clone_stack, CLONE_VM | SIGCHLD, NULL);
        if (task < 0 || waitpid(task, NULL, 0) != task)
            _exit(95);
        for (int i = 0; i < 20000; i++)
            child_event();
        _exit(3);
    }
    if (!strcmp(mode, "killed")) {
        for (int i = 0; i < 5; i++)
            kept[i] = malloc(32);
        for (;;)
            pause();
    }
    if (!strcmp(mode, "idle")) {
        idle_block = malloc(77);
        keep(idle_block);
        sleep_ms(100);
        _exit(3);
    }
    if (!strcmp(mode, "event")) {
        child_event();
        if (count_tasks() != 1)
            _exit(97);
    }
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
    if (!strcmp(mode, "killed")) {
        sleep_ms(200);
        kill(pid, SIGKILL);
        return waitpid(pid, &status, 0) == pid && WIFSIGNALED(status) &&
                       WTERMSIG(status) == SIGKILL ? 0 : 1;
    }
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
        return 1;
    scrub_stack();
    int ends_by_exit = !strcmp(mode, "exit") || !strcmp(mode, "lives") || !strcmp(mode, "idle") ||
                       !strcmp(mode, "thread") || !strcmp(mode, "clone");
    return WEXITSTATUS(status) == (ends_by_exit ? 3 : 5) ? 0 : 1;
}
