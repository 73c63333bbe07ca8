// SPDX-License-Identifier: MIT
// rundir.h - the private directory of one `heaplens run` (rundir.c).
#ifndef HL_RUNDIR_H
#define HL_RUNDIR_H

#include <limits.h>

typedef struct rundir_s {
    char path[PATH_MAX];
    int fd; // the directory, held from rundir_create to rundir_remove; -1 when there is none
} rundir_t;

// Makes the run's directory: 0, or 1 after printing one error line.
int rundir_create(rundir_t* d);

// The path of NAME inside the directory (for the program's environment): 0, or -ENAMETOOLONG.
int rundir_name(const rundir_t* d, const char* name, char* out, size_t cap);

// Creates NAME inside, a new file of mode 0600 (never one that is there already, never through
// a link): its descriptor, or -errno.
int rundir_create_file(const rundir_t* d, const char* name);

// Opens NAME inside with FLAGS (not following a link, creating nothing): a descriptor, or -errno.
int rundir_open_file(const rundir_t* d, const char* name, int flags);

// Removes everything in the directory, then the directory. Harmless when there is none.
void rundir_remove(rundir_t* d);

// The session index (src/agent/session.c): one line "pid ppid trace" per trace the agents
// opened, "pid ppid !trace" per trace an agent could not open (it said why), in the order they
// came; read at any time, also while the program runs.
#define RUNDIR_SESSION "session"
typedef struct rundir_entry_s {
    long pid, ppid;
    char* trace; // malloc'd
    int is_written;
} rundir_entry_t;
// The entries (*out malloc'd, NULL when none): how many.
size_t rundir_read_session(const rundir_t* d, rundir_entry_t** out);

#endif
