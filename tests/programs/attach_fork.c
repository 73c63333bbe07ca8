// attach_fork DIR [THREADS]: a process to attach to that forks. THREADS workers (default 0)
// allocate and release 16 blocks every 0.2 ms each. Writes its pid to DIR/pid, then every 5 ms
// looks for DIR/fork: when it appears (and each time it appears again), makes a 24-byte block,
// forks a child that releases that block, makes 500 blocks of 48 bytes in child_block, releases
// 400 of them and leaks the other 100, then ends with status 0: by exit, or by _exit when
// DIR/fork says "_exit". The parent releases its block, waits for the child, writes the child's
// pid to DIR/forked and removes DIR/fork. Ends with status 0 once DIR/stop exists; once
// DIR/exec exists, makes 50 blocks of 40 bytes in exec_block, releases every other one, and
// execs /bin/true (execl).
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define CHILD_BLOCKS 500
#define CHILD_KEPT 100

static void* blocks[CHILD_BLOCKS];

static NOINLINE void* child_block(void) {
    void* p = malloc(48);
    memset(p, 3, 48);
    keep(p);
    NO_TAIL_CALL();
    return p;
}

static void* from_parent; // made by the parent just before the fork; the child releases it first

static NOINLINE void child_run(void) {
    free(from_parent);
    for (int i = 0; i < CHILD_BLOCKS; i++)
        blocks[i] = child_block();
    for (int i = CHILD_KEPT; i < CHILD_BLOCKS; i++)
        free(blocks[i]);
    for (int i = 0; i < CHILD_KEPT; i++) // lost: no pointer to them stays anywhere
        blocks[i] = NULL;
}

static int stopping; // set (atomically) once the workers are to end

static void* worker(void* arg) {
    (void)arg;
    churn_until(&stopping);
    return NULL;
}

static NOINLINE void exec_block(void) {
    static void* volatile last;
    for (int i = 0; i < 50; i++) {
        void* p = malloc(40);
        last = p;
        if (i % 2)
            free(p);
    }
}


static int write_file(const char* dir, const char* name, long v) {
    char path[4096], tmp[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s/%s.tmp", dir, name);
    FILE* f = fopen(tmp, "w");
    if (!f)
        return -1;
    fprintf(f, "%ld\n", v);
    fclose(f);
    return rename(tmp, path);
}

int main(int argc, char** argv) {
    if (argc < 2)
        return 2;
    int nthreads = argc > 2 ? atoi(argv[2]) : 0;
    pthread_t th[16];
    if (nthreads > 16)
        nthreads = 16;
    for (int i = 0; i < nthreads; i++)
        pthread_create(&th[i], NULL, worker, NULL);
    if (write_file(argv[1], "pid", (long)getpid()) != 0)
        return 3;
    char fork_path[4096];
    snprintf(fork_path, sizeof fork_path, "%s/fork", argv[1]);
    struct timespec ts = {0, 5000000L};
    while (!dir_has(argv[1], "stop")) {
        if (dir_has(argv[1], "exec")) {
            exec_block();
            execl("/bin/true", "true", (char*)NULL);
            return 6;
        }
        if (dir_has(argv[1], "fork")) {
            char how[16] = "";
            FILE* f = fopen(fork_path, "r");
            if (f) {
                if (!fgets(how, sizeof how, f))
                    how[0] = 0;
                fclose(f);
            }
            int by_exit_now = strncmp(how, "_exit", 5) == 0;
            from_parent = malloc(24);
            pid_t pid = fork();
            if (pid < 0)
                return 4;
            if (pid == 0) {
                child_run();
                scrub_stack();
                if (by_exit_now)
                    _exit(0);
                exit(0);
            }
            free(from_parent);
            int status = 0;
            if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return 5;
            unlink(fork_path);
            write_file(argv[1], "forked", (long)pid);
        }
        nanosleep(&ts, NULL);
    }
    __atomic_store_n(&stopping, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    return 0;
}
