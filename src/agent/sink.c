// SPDX-License-Identifier: MIT
// sink.c - the sink front (sink.h): picks the socket sink when HEAPLENS_REMOTE names a
// collector, else the file sink, and says in one line what went wrong when either fails. A
// collector that cannot be reached, or goes away mid-run, costs the program nothing: one warning
// line, then the trace goes on in a local file, named in that line. Any other failure stops
// tracing (one line); the program runs on. The session index (session.c) tells the CLI which
// files this run produced (children and exec'd images each write their own).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "os.h"
#include "options.h"
#include "session.h"
#include "sink.h"

static hl_sink_t sink = {.fd = -1};
static int has_failed;
static int lost_error; // why the collector was lost (-errno)

// The sinks' descriptors start here, out of the way of the program's (which mostly stay low).
#define HL_SINK_FD_MIN 700

void sink_fd_take(hl_sink_t* s, int fd) {
    int high = (int)syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, HL_SINK_FD_MIN);
    if (high >= 0) {
        close(fd);
        fd = high;
    }
    struct stat st;
    if (os_fstat(fd, &st) == 0) {
        s->dev = st.st_dev;
        s->ino = st.st_ino;
    }
    s->fd = fd;
}

int sink_fd_is_own(const hl_sink_t* s) {
    struct stat st;
    return s->fd >= 0 && os_fstat(s->fd, &st) == 0 && st.st_dev == s->dev &&
           st.st_ino == s->ino;
}

void sink_fd_close(hl_sink_t* s) {
    if (s->fd >= 0)
        close(s->fd);
    s->fd = -1;
}

const char* sink_error_text(int err) {
    const char* text = strerrordesc_np(err);
    return text ? text : "unknown error";
}

static int open_file(int pid) {
    sink.ops = &hl_sink_file;
    int rc = sink.ops->open(&sink, pid);
    if (rc != 0) {
        // One line that says which file and what went wrong; the session index learns that this
        // image wrote no trace, so the CLI adds no guess of its own.
        hl_log("cannot %s the trace file %s: %s; not tracing (the program runs on)",
               sink.failed_to, sink.where, sink.why ? sink.why : sink_error_text(-rc));
        session_note(pid, (int)getppid(), sink.where, 0);
        has_failed = 1;
        return -1;
    }
    session_note(pid, (int)getppid(), sink.where, 1);
    return 0;
}

// The collector could not be had: one line, and the trace goes to a local file instead.
static int fall_back(int pid, const char* what, int err) {
    char where[HL_SINK_WHERE];
    memcpy(where, sink.where, sizeof where);
    const char* why = sink.why ? sink.why : sink_error_text(-err);
    if (open_file(pid) != 0)
        return -1;
    hl_log("cannot %s the collector %s (%s): tracing to %s instead", what, where, why, sink.where);
    return 0;
}

// Opening happens inside the program's calls (its first malloc, a fork child's first chunk):
// the program's errno is left as it was.
int sink_open(void) {
    if (sink.fd >= 0)
        return 0;
    if (has_failed)
        return -1;
    int saved_errno = errno;
    int pid = (int)getpid();
    int r;
    if (hl_opt.remote[0]) {
        sink.ops = &hl_sink_socket;
        int rc = sink.ops->open(&sink, pid);
        if (rc == 0) {
            // The session index says where this image's trace went: '@' and the collector's
            // address, which heaplens run reports on no further (a fall-back adds the file).
            char note[HL_SINK_WHERE + 1] = "@";
            size_t n = strnlen(sink.where, HL_SINK_WHERE - 1);
            memcpy(note + 1, sink.where, n);
            note[n + 1] = 0;
            session_note(pid, (int)getppid(), note, 1);
        }
        r = rc == 0 ? 0 : fall_back(pid, sink.failed_to, rc);
    } else {
        r = open_file(pid);
    }
    errno = saved_errno;
    return r;
}

int sink_describe(char* out, size_t cap) {
    int is_socket = sink.ops == &hl_sink_socket;
    hl_fmt(out, cap, "%s%s", is_socket && sink.where[0] ? "@" : "", sink.where);
    return is_socket ? -1 : sink.fd;
}

int sink_write_chunk(const uint8_t* buf, size_t len) {
    if (len == 0)
        return 0;
    if (sink.fd < 0 && sink_open() != 0)
        return -1;
    int rc = sink.ops->write(&sink, buf, len);
    if (rc == 0)
        return 0;
    if (sink.ops == &hl_sink_socket) {
        sink.ops->close(&sink);
        lost_error = rc;
        return HL_SINK_LOST;
    }
    if (rc == -ESTALE)
        hl_log("the trace file %s went away; tracing stops here, the program goes on", sink.where);
    else
        hl_log("writing %s failed (%s); tracing stops here, the program goes on", sink.where,
               rc == -ENOSPC  ? "disk full"
               : rc == -EFBIG ? "file size limit reached"
                              : "I/O error");
    sink.ops->close(&sink);
    has_failed = 1;
    return -1;
}

int sink_fall_back(const char* cannot) {
    char where[HL_SINK_WHERE];
    memcpy(where, sink.where, sizeof where);
    const char* why = sink_error_text(-lost_error);
    int pid = (int)getpid();
    if (!cannot) {
        int saved_errno = errno;
        sink.ops = &hl_sink_file;
        int rc = sink.ops->open(&sink, pid);
        errno = saved_errno;
        if (rc == 0) {
            session_note(pid, (int)getppid(), sink.where, 1);
            hl_log("the collector %s went away (%s): tracing to %s instead", where, why,
                   sink.where);
            return 0;
        }
        cannot = sink.why ? sink.why : sink_error_text(-rc);
    }
    hl_log("the collector %s went away (%s) and %s; tracing stops here, the program goes on",
           where, why, cannot);
    has_failed = 1;
    return -1;
}

void sink_close(void) {
    if (sink.ops)
        sink.ops->close(&sink);
}

int sink_is_open(void) {
    return sink.fd >= 0;
}

void sink_reset_after_fork(void) {
    if (sink.ops)
        sink.ops->after_fork(&sink);
    has_failed = 0;
}
