// SPDX-License-Identifier: MIT
// measure.c - run one command and report its wall time and memory, for bench/run.sh.
//   measure [-r RESULT] [-i STDIN] [-o STDOUT] [-e STDERR] [-t TIMEOUT_S] [-v VMEM_MB]
//           [-s SAMPLE_MS] -- CMD ARGS...
// Prints one line (to RESULT, else to stderr):
//   wall=SECONDS maxrss_kb=KB treerss_kb=KB status=N signal=N timeout=0|1 cpu=SECONDS
// wall: monotonic clock, fork to reap (SIGCHLD wakes us at once, no polling granularity).
// maxrss_kb: getrusage(RUSAGE_CHILDREN) - the peak RSS of the LARGEST single process of the
//   tree (every descendant that was waited for), not a sum.
// treerss_kb: the peak of the SUM of the RSS of every live process in the tree, sampled every
//   SAMPLE_MS (default 25; 0 disables) from /proc - may miss short spikes.
// cpu: user + system time of the tree (every descendant that was waited for), from the same
//   getrusage: on a shared machine it varies less than wall time.
// -v sets RLIMIT_AS (virtual memory) for the command so a runaway tool fails instead of
// taking the machine down; -t kills the whole process group after TIMEOUT_S seconds.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

// Sum of RSS (KB) of pid `root` and all its live descendants.
#define MAXP 65536
static long tree_rss_kb(pid_t root) {
    static pid_t pids[MAXP], ppids[MAXP];
    static long rss[MAXP];
    static char inset[MAXP];
    long page_kb = sysconf(_SC_PAGESIZE) / 1024;
    int n = 0;
    DIR* d = opendir("/proc");
    if (!d)
        return 0;
    struct dirent* e;
    while ((e = readdir(d)) && n < MAXP) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        char path[300], buf[1024];
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        int fd = open(path, O_RDONLY);
        if (fd < 0)
            continue;
        ssize_t len = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (len <= 0)
            continue;
        buf[len] = 0;
        char* p = strrchr(buf, ')'); // comm may hold spaces
        if (!p)
            continue;
        // after ")": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
        // utime stime cutime cstime priority nice threads itreal starttime vsize rss
        char state;
        int ppid;
        unsigned long vsize;
        long r;
        if (sscanf(p + 2, "%c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d "
                          "%*d %*d %*u %lu %ld",
                   &state, &ppid, &vsize, &r) != 4)
            continue;
        pids[n] = atoi(e->d_name);
        ppids[n] = ppid;
        rss[n] = state == 'Z' ? 0 : r * page_kb;
        inset[n] = pids[n] == root;
        n++;
    }
    closedir(d);
    // Mark descendants: iterate to a fixed point (trees are shallow).
    for (int changed = 1; changed;) {
        changed = 0;
        for (int i = 0; i < n; i++) {
            if (inset[i])
                continue;
            for (int j = 0; j < n; j++)
                if (inset[j] && pids[j] == ppids[i]) {
                    inset[i] = 1;
                    changed = 1;
                    break;
                }
        }
    }
    long sum = 0;
    for (int i = 0; i < n; i++)
        if (inset[i])
            sum += rss[i];
    return sum;
}

static void usage(void) {
    fprintf(stderr, "usage: measure [-r RESULT] [-i STDIN] [-o STDOUT] [-e STDERR] "
                    "[-t TIMEOUT_S] [-v VMEM_MB] [-s SAMPLE_MS] -- CMD ARGS...\n");
    exit(2);
}

int main(int argc, char** argv) {
    const char *result = NULL, *in = NULL, *out = NULL, *err = NULL;
    double timeout = 0;
    long vmem_mb = 0, sample_ms = 25;
    int opt;
    while ((opt = getopt(argc, argv, "+r:i:o:e:t:v:s:")) != -1) {
        switch (opt) {
        case 'r': result = optarg; break;
        case 'i': in = optarg; break;
        case 'o': out = optarg; break;
        case 'e': err = optarg; break;
        case 't': timeout = atof(optarg); break;
        case 'v': vmem_mb = atol(optarg); break;
        case 's': sample_ms = atol(optarg); break;
        default: usage();
        }
    }
    if (optind >= argc)
        usage();

    sigset_t chld, old;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, &old);

    double t0 = now();
    pid_t pid = fork();
    if (pid < 0) {
        perror("measure: fork");
        return 2;
    }
    if (pid == 0) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        setpgid(0, 0);
        const char* files[3] = {in, out, err};
        for (int fd = 0; fd < 3; fd++) {
            if (!files[fd])
                continue;
            int f = fd == 0 ? open(files[fd], O_RDONLY)
                            : open(files[fd], O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (f < 0) {
                perror(files[fd]);
                _exit(126);
            }
            dup2(f, fd);
            close(f);
        }
        if (vmem_mb > 0) {
            struct rlimit rl = {(rlim_t)vmem_mb << 20, (rlim_t)vmem_mb << 20};
            setrlimit(RLIMIT_AS, &rl);
        }
        execvp(argv[optind], argv + optind);
        fprintf(stderr, "measure: exec %s: %s\n", argv[optind], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid); // both sides, to win the race

    int status = 0, timed_out = 0;
    long peak_tree = 0;
    long step_ms = sample_ms > 0 ? sample_ms : 200;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            break;
        if (sample_ms > 0) {
            long t = tree_rss_kb(pid);
            if (t > peak_tree)
                peak_tree = t;
        }
        if (timeout > 0 && now() - t0 > timeout && !timed_out) {
            timed_out = 1;
            kill(-pid, SIGKILL);
        }
        struct timespec ts = {step_ms / 1000, (step_ms % 1000) * 1000000L};
        sigtimedwait(&chld, NULL, &ts); // returns at once when a child changes state
    }
    double wall = now() - t0;
    if (!timed_out)
        kill(-pid, SIGKILL); // stragglers left in the group (a helper that outlived its parent)
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru);

    FILE* f = result ? fopen(result, "w") : stderr;
    if (!f)
        f = stderr;
    double cpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                 (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
    fprintf(f, "wall=%.4f maxrss_kb=%ld treerss_kb=%ld status=%d signal=%d timeout=%d cpu=%.4f\n",
            wall, ru.ru_maxrss, peak_tree, WIFEXITED(status) ? WEXITSTATUS(status) : -1,
            WIFSIGNALED(status) ? WTERMSIG(status) : 0, timed_out, cpu);
    if (f != stderr)
        fclose(f);
    return 0;
}
