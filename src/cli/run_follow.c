// SPDX-License-Identifier: MIT
// run_follow.c - heaplens run reads its program's trace while the program runs: a thread of
// the CLI decodes the chunks the agent has written and takes their records into the model as
// they come, so that when the program ends only its last chunks are left to read before the
// report. Reading takes 15-30 ns a record, which a program making millions of heap calls
// otherwise waited for at its end (sqlite3 inserting 200,000 rows: 0.25 s, a sixth of its own
// time; cxx.cc: 0.10 s, a quarter).
//
// The thread runs at a lower priority (nice): it takes what the program and the agent's
// writer leave of the machine. Once the program has ended, the rest is read on the main thread
// at the CLI's own priority (and the symbolizer's thread, which opens the modules the reading
// meets for a JSON, HTML or SARIF report, was made at that priority too). A trace that is not
// the one reported on (the program exec'd: the last image's is) is dropped, and the report
// reads that one from its file, as without this.
#define _GNU_SOURCE
#include "run_follow.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../analyze/reader.h"
#include "../analyze/symbols.h"

#define FOLLOW_CHUNKS 16 // chunks read between two looks at whether to stop
// The file has no whole chunk more: look again in 1 ms, doubling to 50 ms while none comes (the
// agent writes a chunk every 8 ms while events flow).
#define FOLLOW_NAP_MIN_NS 1000000L
#define FOLLOW_NAP_MAX_NS 50000000L
#define FOLLOW_NICE 10 // below the program and its writer, not starved

struct run_follow_s {
    const rundir_t* run;
    pid_t pid;
    const cli_report_opts_t* o;
    pthread_t thread;
    _Atomic int stop; // the program ended: the thread leaves at its next look
    // The thread's until it is joined, then the main thread's:
    char* trace;   // the trace followed; NULL until the session index names it
    cli_trace_t t; // its model, as far as it was read
    int is_begun;  // t holds a model begun (model_begin)
    rd_stream_t* s;
    int ended; // the reading ended (damage, out of memory): rc says how
    int rc;
    int has_failed; // nothing usable: the report reads the file
};

// The session index names the pid's first trace once its agent has opened it: 1 when it did
// (and the stream is open), 0 not yet. has_failed when it never will be usable.
static int find_trace(run_follow_t* f) {
    rundir_entry_t* ents;
    size_t n = rundir_read_session(f->run, &ents);
    for (size_t k = 0; k < n && !f->trace && !f->has_failed; k++) {
        if (ents[k].pid != (long)f->pid)
            continue;
        if (!ents[k].is_written || ents[k].trace[0] == '@') {
            f->has_failed = 1; // no file, or the collector's
            continue;
        }
        f->trace = ents[k].trace;
        ents[k].trace = NULL;
    }
    for (size_t k = 0; k < n; k++)
        free(ents[k].trace);
    free(ents);
    if (!f->trace || f->has_failed)
        return 0;
    if (rd_stream_open(f->trace, &f->s, &f->t.m->read) != 0)
        f->has_failed = 1; // the report reads it, and says what is wrong with it
    return !f->has_failed;
}

static void* follow_main(void* arg) {
    run_follow_t* f = arg;
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), FOLLOW_NICE);
    long nap = FOLLOW_NAP_MIN_NS;
    while (!atomic_load(&f->stop) && !f->has_failed && !f->ended) {
        int progressed;
        if (!f->s) {
            progressed = find_trace(f);
        } else {
            uint64_t before = f->t.m->read.chunks;
            int rc = model_read(f->t.m, f->s, FOLLOW_CHUNKS);
            if (rc != RD_MORE && rc != RD_WAIT) {
                f->ended = 1;
                f->rc = rc;
            }
            progressed = f->t.m->read.chunks != before;
        }
        if (progressed) {
            nap = FOLLOW_NAP_MIN_NS;
            continue;
        }
        struct timespec ts = {0, nap};
        nanosleep(&ts, NULL);
        nap = nap * 2 < FOLLOW_NAP_MAX_NS ? nap * 2 : FOLLOW_NAP_MAX_NS;
    }
    return NULL;
}

run_follow_t* run_follow_start(const rundir_t* run, pid_t pid, const cli_report_opts_t* o) {
    run_follow_t* f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->run = run;
    f->pid = pid;
    f->o = o;
    if (cli_trace_begin(&f->t, o, o->html_path != NULL) != 0) {
        free(f);
        return NULL;
    }
    model_begin(f->t.m, cli_trace_observer(&f->t));
    f->is_begun = 1;
    // The symbolizer's own thread, which opens the modules the reading meets, at this priority.
    if (f->t.obs.module_seen)
        symbolizer_start(f->t.sym);
    // Signals are the main thread's (it forwards them to the program, and waits for it).
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int rc = pthread_create(&f->thread, NULL, follow_main, f);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        cli_trace_close(&f->t);
        free(f);
        return NULL;
    }
    return f;
}

static void follow_stop(run_follow_t* f) {
    atomic_store(&f->stop, 1);
    pthread_join(f->thread, NULL);
}

static void follow_drop(run_follow_t* f) {
    rd_stream_close(f->s);
    if (f->is_begun)
        cli_trace_close(&f->t);
    free(f->trace);
    free(f);
}

void run_follow_free(run_follow_t* f) {
    if (!f)
        return;
    follow_stop(f);
    follow_drop(f);
}

int run_follow_report(run_follow_t* f, const char* trace, const report_child_t* kids, size_t nkids,
                      int exit_status, int exit_signal, int* has_errors) {
    follow_stop(f);
    if (f->has_failed || !f->s || strcmp(f->trace, trace) != 0) {
        follow_drop(f);
        return -1;
    }
    int rc = f->ended ? f->rc : model_read(f->t.m, f->s, 0); // the rest, to the file's end
    rd_stream_close(f->s);
    f->s = NULL;
    f->is_begun = 0; // from here cli_trace_finish and cli_report_loaded close it
    int status = 1;
    *has_errors = 0;
    rc = model_end(f->t.m, rc);
    if (cli_trace_suppressions(&f->t, f->o) != 0) // said here, once, as cli_report_trace does
        cli_trace_close(&f->t);
    else if (cli_trace_finish(&f->t, trace, rc) == 0)
        status = cli_report_loaded(&f->t, trace, f->o, kids, nkids, exit_status, exit_signal,
                                   has_errors);
    follow_drop(f);
    return status;
}
