// SPDX-License-Identifier: MIT
// sink_file.c - the trace as a file named from the output template (sink.h's file sink),
// written with plain write(2) (EINTR and short writes handled, SIGXFSZ kept from the program:
// os_write_all). The trace is always a new regular file, private to its owner (create_trace).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "chunk.h"
#include "log.h"
#include "options.h"
#include "os.h"
#include "sink.h"

static long sys_open(const char* p, int flags, int mode) {
    return syscall(SYS_openat, AT_FDCWD, p, flags | O_CLOEXEC, mode);
}

static size_t exe_name(char* out, size_t cap) {
    char buf[1024];
    long n = syscall(SYS_readlink, "/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0)
        n = 0;
    buf[n] = 0;
    const char* base = buf;
    for (const char* s = buf; *s; s++)
        if (*s == '/')
            base = s + 1;
    size_t len = strlen(base);
    if (len >= cap)
        len = cap - 1;
    memcpy(out, base, len);
    out[len] = 0;
    return len;
}

// A program name's share of a trace's name.
#define HL_EXE_NAME_MAX 256

static void expand(char* out, size_t cap, const char* tmpl, int pid) {
    size_t o = 0;
    for (const char* t = tmpl; *t && o + 32 < cap; t++) {
        if (t[0] == '%' && t[1] == 'p') {
            o += (size_t)hl_fmt(out + o, cap - o, "%d", pid);
            t++;
        } else if (t[0] == '%' && t[1] == 'e') {
            o += exe_name(out + o, cap - o > HL_EXE_NAME_MAX ? HL_EXE_NAME_MAX : cap - o);
            t++;
        } else {
            out[o++] = *t;
        }
    }
    out[o] = 0;
}

// Creates that lose a race for a free name (processes starting at once) before giving up: a
// thousand of them means something else is wrong.
#define HL_TRACE_NAME_TRIES 1000
// The suffixes stop there (a name per process of a run of many: a build, a test suite).
#define HL_TRACE_SUFFIX_MAX (1 << 30)

// What stands at a trace's name when it is not a regular file, for the line refusing it.
static const char* kind_of(unsigned mode) {
    switch (mode & S_IFMT) {
    case S_IFCHR:
        return "it is a character device, not a regular file";
    case S_IFBLK:
        return "it is a block device, not a regular file";
    case S_IFIFO:
        return "it is a FIFO, not a regular file";
    case S_IFSOCK:
        return "it is a socket, not a regular file";
    case S_IFDIR:
        return "it is a directory, not a regular file";
    case S_IFLNK:
        return "it is a symbolic link, not a regular file";
    default:
        return "it is not a regular file";
    }
}

static void name_at(hl_sink_t* s, const char* base, int k) {
    if (k == 0)
        hl_fmt(s->where, sizeof s->where, "%s", base);
    else
        hl_fmt(s->where, sizeof s->where, "%s.%d", base, k);
}

static int name_is_taken(hl_sink_t* s, const char* base, int k) {
    struct stat st;
    name_at(s, base, k);
    return fstatat(AT_FDCWD, s->where, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

// The first suffix free after those of earlier traces (BASE.1 ... BASE.k, made one after the
// other): found in 2 log2(k) lookups by doubling then halving, not k. A run of many processes
// with one -o name made the thousandth process try a thousand names, and the next ones none.
static int first_free_suffix(hl_sink_t* s, const char* base) {
    int taken = 0, step = 1;
    while (taken <= HL_TRACE_SUFFIX_MAX - step && name_is_taken(s, base, taken + step)) {
        taken += step;
        step *= 2;
    }
    int free_at = taken + step; // free, or past the last suffix there is
    while (free_at - taken > 1) {
        int mid = taken + (free_at - taken) / 2;
        if (name_is_taken(s, base, mid))
            taken = mid;
        else
            free_at = mid;
    }
    return free_at;
}

// Creates the trace at BASE, or at BASE.1, BASE.2... when a regular file (an earlier trace) has
// the name: always a new file (O_EXCL), never through a symbolic link (O_NOFOLLOW), readable by
// its owner only, as a core dump is: it holds addresses, paths and arguments. Anything else at
// BASE (/dev/full, a FIFO, a directory, a link) is refused, not worked around: a trace is a
// regular file, and one created beside a device is never what was meant. Whatever stands at a
// suffix is passed over by the search, never opened.
// Returns the descriptor, or -errno with s->where the name tried and s->why what was there
// when that is the reason.
static int create_trace(hl_sink_t* s, const char* base) {
    int k = 0;
    for (int attempt = 0; attempt < HL_TRACE_NAME_TRIES; attempt++, k++) {
        if (attempt == 1)
            k = first_free_suffix(s, base);
        if (k > HL_TRACE_SUFFIX_MAX)
            break;
        name_at(s, base, k);
        int fd = (int)sys_open(s->where, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY, 0600);
        if (fd >= 0)
            return fd;
        if (errno != EEXIST)
            return -errno;
        struct stat st;
        if (fstatat(AT_FDCWD, s->where, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            !S_ISREG(st.st_mode)) {
            s->why = kind_of(st.st_mode);
            return -EEXIST;
        }
    }
    return -EEXIST;
}

// A trace that could not be started leaves no file behind: removed if s->where still names it.
static void discard_trace(hl_sink_t* s, int fd) {
    struct stat mine, named;
    if (fstat(fd, &mine) == 0 &&
        fstatat(AT_FDCWD, s->where, &named, AT_SYMLINK_NOFOLLOW) == 0 &&
        mine.st_dev == named.st_dev && mine.st_ino == named.st_ino)
        syscall(SYS_unlinkat, AT_FDCWD, s->where, 0);
    close(fd);
}

static int file_open(hl_sink_t* s, int pid) {
    char base[HL_SINK_WHERE];
    expand(base, sizeof base, hl_opt.output, pid);
    s->why = NULL;
    s->failed_to = "create";
    int fd = create_trace(s, base);
    if (fd < 0)
        return fd;
    uint8_t header[HL_FILE_HEADER_SIZE];
    chunk_file_header(header);
    long w = os_write_all(fd, header, sizeof header);
    if (w != 0) {
        discard_trace(s, fd);
        s->failed_to = "write";
        return (int)w;
    }
    sink_fd_take(s, fd);
    return 0;
}

// A program may close every descriptor (daemons do) and reuse the number for a file of its own:
// writing there would corrupt it. Before each chunk, the descriptor must still be the trace;
// if it is not, the trace is opened again by name and appended to (chunks stand alone), as long
// as the name still leads to the same file, not through a link: a file put at the name since is
// not the trace, and may be another user's.
static int check_fd(hl_sink_t* s) {
    if (sink_fd_is_own(s))
        return 0;
    int fd = (int)sys_open(s->where, O_WRONLY | O_APPEND | O_NOFOLLOW | O_NOCTTY, 0);
    if (fd < 0)
        return -1;
    dev_t dev = s->dev;
    ino_t ino = s->ino;
    s->dev = 0; // unknown unless sink_fd_take reads it
    s->ino = 0;
    sink_fd_take(s, fd); // the old number is the program's now: never closed
    if (s->dev != dev || s->ino != ino) {
        sink_fd_close(s); // another file stands at the name now
        s->dev = dev;
        s->ino = ino;
        return -1;
    }
    return 0;
}

static int file_write(hl_sink_t* s, const void* buf, size_t len) {
    if (check_fd(s) != 0) {
        s->fd = -1; // not ours any more: never closed
        return -ESTALE; // the front says the file went away
    }
    return (int)os_write_all(s->fd, buf, len);
}

const hl_sink_ops_t hl_sink_file = {
    .what = "trace file",
    .open = file_open,
    .write = file_write,
    .close = sink_fd_close,
    .after_fork = sink_fd_close,
};
