// SPDX-License-Identifier: MIT
// session.c - the session index: heaplens run's list of the traces one run wrote, one line per
// image (session.h). HEAPLENS_SESSION names it, inside the run's private directory
// (src/cli/rundir.c), which the CLI makes before the program starts and removes when it ends.
//
// The agent only ever opens the index; it never creates it (no O_CREAT). A process that outlives
// the run (a daemon that execs after the CLI is gone) must not bring the index back, nor write
// to whatever another user may since have put at its name. So the index is used only when its
// directory is still there and private (a directory of this user's that nobody else may enter,
// private_dir.h), and the index itself is not followed if it is a link (O_NOFOLLOW).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/private_dir.h"
#include "log.h"
#include "options.h"
#include "os.h"
#include "session.h"

// Opens the index with FLAGS (O_RDONLY or O_WRONLY | O_APPEND); -1 when it cannot be used.
static int session_open(int flags) {
    static int said_not_private;
    const char* index = hl_opt.session;
    const char* slash = strrchr(index, '/');
    if (!index[0] || !slash || !slash[1])
        return -1; // the CLI names it by an absolute path; anything else is not its
    char dir[sizeof hl_opt.session];
    size_t dir_len = slash == index ? 1 : (size_t)(slash - index);
    memcpy(dir, index, dir_len);
    dir[dir_len] = 0;
    int dfd =
        (int)syscall(SYS_openat, AT_FDCWD, dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
    if (dfd < 0)
        return -1; // the run is over (or never made it): nobody reads the index
    struct stat st;
    int is_private =
        os_fstat(dfd, &st) == 0 && hl_is_private_dir(&st, (uid_t)syscall(SYS_geteuid));
    int fd = -1;
    if (is_private)
        fd = (int)syscall(SYS_openat, dfd, slash + 1, flags | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0);
    else if (!said_not_private++)
        hl_log("not using the session index %s: its directory is not private to this user", index);
    close(dfd);
    if (fd >= 0 && (os_fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
        close(fd);
        fd = -1;
    }
    return fd;
}

void session_note(int pid, int ppid, const char* trace, int is_written) {
    if (!hl_opt.session[0])
        return;
    int saved_errno = errno;
    int fd = session_open(O_WRONLY | O_APPEND);
    if (fd >= 0) {
        char line[1300];
        int n = hl_fmt(line, sizeof line, "%d %d %s%s\n", pid, ppid, is_written ? "" : "!", trace);
        os_write_all(fd, line, (size_t)n);
        close(fd);
    }
    errno = saved_errno;
}

int session_has_entries(void) {
    if (!hl_opt.session[0])
        return 0;
    int fd = session_open(O_RDONLY);
    if (fd < 0)
        return 1;
    char c;
    long n = syscall(SYS_read, fd, &c, 1);
    close(fd);
    return n == 1;
}
