// SPDX-License-Identifier: MIT
// rundir.c - the private directory of one `heaplens run`, the only place where the CLI and the
// agents of the program it runs share files: today the session index (HEAPLENS_SESSION, see
// src/agent/session.c), later the control sockets. The contract:
// - One directory per run, new (mkdtemp: a name nobody could have prepared), made before the
//   program starts and removed with everything in it when the run ends (rundir_remove), on every
//   path out of cmd_run once it exists.
// - It lies under $XDG_RUNTIME_DIR when that is usable (an absolute path to a directory of the
//   user's that nobody else may enter: made by the system for the user's session, in memory,
//   removed at logout), else under $TMPDIR (when an absolute path to a directory), else /tmp.
// - It is private (private_dir.h: the user's, mode 0700, nothing for group or others), and checked
//   to be so once made, through the descriptor that is then used for everything in it: a name
//   inside cannot have been put there by another user.
// - Files in it are made by the CLI, exclusively (O_EXCL) and never through a link (O_NOFOLLOW);
//   the agent opens them, never creates them, and checks the directory again itself: a process
//   that outlives the run finds nothing and makes nothing.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/private_dir.h"
#include "cli.h"
#include "rundir.h"

// The directory's name, its last six characters made unique by mkdtemp.
#define RUNDIR_TEMPLATE "heaplens-XXXXXX"

// Where to make it (see the contract): PARENT gets one of the three; 0, or -1 when none will do.
static int choose_parent(char* parent, size_t cap) {
    struct stat st;
    const char* xdg = getenv("XDG_RUNTIME_DIR");
    if (xdg && xdg[0] == '/' && stat(xdg, &st) == 0 && hl_is_private_dir(&st, geteuid()) &&
        access(xdg, W_OK | X_OK) == 0)
        return snprintf(parent, cap, "%s", xdg) < (int)cap ? 0 : -1;
    const char* tmp = getenv("TMPDIR");
    if (!tmp || tmp[0] != '/' || stat(tmp, &st) != 0 || !S_ISDIR(st.st_mode))
        tmp = "/tmp";
    return snprintf(parent, cap, "%s", tmp) < (int)cap ? 0 : -1;
}

int rundir_create(rundir_t* d) {
    d->fd = -1;
    d->path[0] = 0;
    char parent[PATH_MAX];
    if (choose_parent(parent, sizeof parent) != 0 ||
        snprintf(d->path, sizeof d->path, "%s/" RUNDIR_TEMPLATE, parent) >= (int)sizeof d->path) {
        cli_error("cannot make a private directory for the run: $TMPDIR is too long");
        d->path[0] = 0;
        return 1;
    }
    if (!mkdtemp(d->path)) {
        cli_error("cannot make a private directory for the run in %s: %s", parent, strerror(errno));
        d->path[0] = 0;
        return 1;
    }
    d->fd = open(d->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (d->fd < 0 || fstat(d->fd, &st) != 0 || !hl_is_private_dir(&st, geteuid())) {
        cli_error("%s: the run's directory is not private to this user (mode or owner changed)",
                  d->path);
        if (d->fd >= 0)
            close(d->fd);
        d->fd = -1;
        d->path[0] = 0;
        return 1;
    }
    return 0;
}

int rundir_name(const rundir_t* d, const char* name, char* out, size_t cap) {
    return snprintf(out, cap, "%s/%s", d->path, name) < (int)cap ? 0 : -ENAMETOOLONG;
}

int rundir_create_file(const rundir_t* d, const char* name) {
    int fd = openat(d->fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    return fd >= 0 ? fd : -errno;
}

int rundir_open_file(const rundir_t* d, const char* name, int flags) {
    int fd = openat(d->fd, name, (flags & ~O_CREAT) | O_NOFOLLOW | O_CLOEXEC);
    return fd >= 0 ? fd : -errno;
}

void rundir_remove(rundir_t* d) {
    if (d->fd < 0)
        return;
    int list_fd = openat(d->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR* dir = list_fd >= 0 ? fdopendir(list_fd) : NULL;
    if (dir) {
        // Only this run's files are in it: every name goes.
        for (struct dirent* e; (e = readdir(dir));)
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
                unlinkat(d->fd, e->d_name, e->d_type == DT_DIR ? AT_REMOVEDIR : 0);
        closedir(dir);
    } else if (list_fd >= 0) {
        close(list_fd);
    }
    close(d->fd);
    d->fd = -1;
    rmdir(d->path);
    d->path[0] = 0;
}

size_t rundir_read_session(const rundir_t* run, rundir_entry_t** out) {
    *out = NULL;
    int fd = rundir_open_file(run, RUNDIR_SESSION, O_RDONLY);
    FILE* f = fd >= 0 ? fdopen(fd, "r") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    size_t n = 0, cap = 0;
    char line[PATH_MAX + 64];
    while (fgets(line, sizeof line, f)) {
        long pid, ppid;
        int off = 0;
        // A line is whole with its newline (one write of an agent, which may be under way).
        if (!strchr(line, '\n') || sscanf(line, "%ld %ld %n", &pid, &ppid, &off) < 2 || off <= 0)
            continue;
        line[strcspn(line, "\n")] = 0;
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            rundir_entry_t* fresh = realloc(*out, cap * sizeof *fresh);
            if (!fresh)
                break;
            *out = fresh;
        }
        int is_written = line[off] != '!';
        (*out)[n++] = (rundir_entry_t){pid, ppid, strdup(line + off + !is_written), is_written};
    }
    fclose(f);
    return n;
}
