// SPDX-License-Identifier: MIT
// run_follow.h - heaplens run reads its program's trace while the program runs (run_follow.c),
// so that its report, at the program's end, waits only for what the agent wrote last.
#ifndef HL_RUN_FOLLOW_H
#define HL_RUN_FOLLOW_H

#include <stddef.h>
#include <sys/types.h>

#include "cli.h"
#include "rundir.h"

typedef struct run_follow_s run_follow_t;

// Starts following the trace of process pid, once the session index of run names it, on a
// thread of its own. NULL when it cannot start: the report then reads the trace after the run.
// run and o must stay valid until run_follow_report or run_follow_free.
run_follow_t* run_follow_start(const rundir_t* run, pid_t pid, const cli_report_opts_t* o);

// The program has ended. When what was followed is `trace` (the last image of pid: an exec
// replaced the first one's trace otherwise), reads the rest of it and reports as
// cli_report_trace does: 0 or 1 as that returns, *has_errors set. -1 when it followed nothing
// usable: the caller reports from the file. f is freed either way.
int run_follow_report(run_follow_t* f, const char* trace, const report_child_t* kids,
                      size_t nkids, int exit_status, int exit_signal, int* has_errors);

// Stops following and forgets it all (a run that reports nothing, or fails first).
void run_follow_free(run_follow_t* f);

#endif
