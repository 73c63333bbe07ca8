// SPDX-License-Identifier: MIT
// sink.c - where the trace goes: a file named from the output template, written in chunks
// with plain write(2) (EINTR and short writes handled). The chunks of a file are flushed parts
// of one zstd stream with a long window (format.h): a program's repeating patterns cost bytes
// once per file, not once per chunk. A write error stops tracing with one message; the program
// runs on. The trace is a new regular file, private to its owner (create_trace). The session
// index (session.c) tells the CLI which files this run produced (children and exec'd images each
// write their own).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>

#include "../common/checksum.h"
#include "../common/format.h"
#include "log.h"
#include "options.h"
#include "os.h"
#include "sink.h"
#include "session.h"

// 8 MiB of history: a loop whose records fill a few MiB still finds its previous round.
#define HL_ZSTD_WINDOW_LOG 23

static int sink_fd = -1;
static dev_t sink_dev;
static ino_t sink_ino;
static int sink_failed;
static char path[1100];
static ZSTD_CCtx* cctx;
static uint8_t* out_buf; // the open chunk: header, then its compressed bytes so far
static size_t out_cap;
static size_t out_len;   // compressed bytes of the open chunk
static size_t chunk_raw; // raw bytes fed into it
static hl_checksum_t chunk_sum; // of those bytes

// zstd 1.5 lays its compression workspace out as its objects, the match tables and the
// long-distance matcher's table (512 KiB for an 8 MiB window), then the buffers: it clears the
// tables before the first byte goes in, and the buffers fill as input comes. The tables are
// made present with one call (a fault per page cost 128 faults, 1.3 ms on a virtual machine,
// per traced process); should another version place them elsewhere, they fault in as before.
#define HL_ZSTD_WORKSPACE_MIN (4u << 20) // the one allocation holding the window's buffer
#define HL_ZSTD_TABLES (608u << 10)      // objects, tables and the LDM table of windowLog 23

// zstd's working memory comes from agent pages: the host's heap never sees it.
static void* zalloc(void* opaque, size_t size) {
    (void)opaque;
    size_t* p = os_map(size + 16);
    if (!p)
        return NULL;
    p[0] = size + 16;
    if (size >= HL_ZSTD_WORKSPACE_MIN)
        os_populate(p, HL_ZSTD_TABLES);
    return (uint8_t*)p + 16;
}
static void zfree(void* opaque, void* addr) {
    (void)opaque;
    if (!addr)
        return;
    size_t* p = (size_t*)((uint8_t*)addr - 16);
    os_unmap(p, p[0]);
}

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

static void expand(char* out, size_t cap, const char* tmpl, int pid) {
    size_t o = 0;
    for (const char* t = tmpl; *t && o + 32 < cap; t++) {
        if (t[0] == '%' && t[1] == 'p') {
            o += (size_t)hl_fmt(out + o, cap - o, "%d", pid);
            t++;
        } else if (t[0] == '%' && t[1] == 'e') {
            o += exe_name(out + o, cap - o > 256 ? 256 : cap - o);
            t++;
        } else {
            out[o++] = *t;
        }
    }
    out[o] = 0;
}

// An earlier trace may hold a name (of a run before, or of a process before with the same pid);
// a thousand of them means something else is wrong.
#define HL_TRACE_NAME_TRIES 1000

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

// Creates the trace at BASE, or at BASE.1, BASE.2... when a regular file (an earlier trace) has
// the name: always a new file (O_EXCL), never through a symbolic link (O_NOFOLLOW), readable by
// its owner only, as a core dump is: it holds addresses, paths and arguments. Anything else at
// the name (/dev/full, a FIFO, a directory, a link) is refused, not worked around: a trace is a
// regular file, and one created beside a device is never what was meant.
// Returns the descriptor, or -errno with path[] the name tried and *found the type of what was
// there when that is the reason (else 0).
static int create_trace(const char* base, unsigned* found) {
    *found = 0;
    for (int attempt = 0; attempt < HL_TRACE_NAME_TRIES; attempt++) {
        if (attempt == 0)
            hl_fmt(path, sizeof path, "%s", base);
        else
            hl_fmt(path, sizeof path, "%s.%d", base, attempt);
        int fd = (int)sys_open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY, 0600);
        if (fd >= 0)
            return fd;
        if (errno != EEXIST)
            return -errno;
        struct stat st;
        if (syscall(SYS_newfstatat, AT_FDCWD, path, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            !S_ISREG(st.st_mode)) {
            *found = st.st_mode;
            return -EEXIST;
        }
    }
    return -EEXIST;
}

// A trace that could not be started leaves no file behind: removed if path[] still names it.
static void discard_trace(int fd) {
    struct stat mine, named;
    if (syscall(SYS_fstat, fd, &mine) == 0 &&
        syscall(SYS_newfstatat, AT_FDCWD, path, &named, AT_SYMLINK_NOFOLLOW) == 0 &&
        mine.st_dev == named.st_dev && mine.st_ino == named.st_ino)
        syscall(SYS_unlinkat, AT_FDCWD, path, 0);
    close(fd);
}

// strerror's text without its locale machinery (which may allocate).
static const char* error_text(int err) {
    const char* text = strerrordesc_np(err);
    return text ? text : "unknown error";
}

// One line that says which file and what went wrong; the session index learns that this image
// wrote no trace, so the CLI adds no guess of its own.
static int open_failed(const char* what, const char* why, int pid) {
    hl_log("cannot %s the trace file %s: %s; not tracing (the program runs on)", what, path, why);
    session_note(pid, (int)getppid(), path, 0);
    sink_failed = 1;
    return -1;
}

static int open_trace(void) {
    int pid = (int)getpid();
    char base[1100];
    expand(base, sizeof base, hl_opt.output, pid);
    unsigned found;
    int fd = create_trace(base, &found);
    if (fd < 0)
        return open_failed("create", found ? kind_of(found) : error_text(-fd), pid);
    uint8_t header[HL_FILE_HEADER_SIZE] = {0};
    memcpy(header, HL_TRACE_MAGIC, 8);
    header[8] = (uint8_t)HL_TRACE_VERSION;
    long w = os_write_all(fd, header, sizeof header);
    if (w != 0) {
        discard_trace(fd);
        return open_failed("write", error_text((int)-w), pid);
    }
    // Out of the way of the program's own descriptors (a daemon closing 0..1023 and reusing
    // the numbers), and remembered by identity: see sink_check_fd.
    int high = (int)syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, 700);
    if (high >= 0) {
        close(fd);
        fd = high;
    }
    struct stat st;
    if (syscall(SYS_fstat, fd, &st) == 0) {
        sink_dev = st.st_dev;
        sink_ino = st.st_ino;
    }
    sink_fd = fd;
    session_note(pid, (int)getppid(), path, 1);
    return 0;
}

// Opening happens inside the program's calls (its first malloc, a fork child's first chunk):
// the program's errno is left as it was.
int sink_open(void) {
    if (sink_fd >= 0)
        return 0;
    if (sink_failed)
        return -1;
    int saved_errno = errno;
    int r = open_trace();
    errno = saved_errno;
    return r;
}

static void put_u32(uint8_t* p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

// A program may close every descriptor (daemons do) and reuse the number for a file of its own:
// writing there would corrupt it. Before each chunk, the descriptor must still be the trace;
// if it is not, the trace is opened again by name and appended to (chunks stand alone), as long
// as the name still leads to the same file, not through a link: a file put at the name since is
// not the trace, and may be another user's.
static int sink_check_fd(void) {
    struct stat st;
    if (syscall(SYS_fstat, sink_fd, &st) == 0 && st.st_dev == sink_dev && st.st_ino == sink_ino)
        return 0;
    int fd = (int)sys_open(path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_NOCTTY, 0);
    if (fd < 0)
        return -1;
    int high = (int)syscall(SYS_fcntl, fd, F_DUPFD_CLOEXEC, 700);
    if (high >= 0) {
        close(fd);
        fd = high;
    }
    if (syscall(SYS_fstat, fd, &st) != 0 || st.st_dev != sink_dev || st.st_ino != sink_ino) {
        close(fd);
        return -1;
    }
    sink_fd = fd; // the old number is the program's now: never close it
    return 0;
}

// Room for `more` compressed bytes after the open chunk's header and what it holds so far.
static int out_reserve(size_t more) {
    size_t need = HL_CHUNK_HEADER_SIZE + out_len + more;
    if (need <= out_cap)
        return 0;
    size_t cap = out_cap ? out_cap : (1u << 20);
    while (cap < need)
        cap *= 2;
    uint8_t* fresh = os_map(cap);
    if (!fresh)
        return -1;
    if (out_buf) {
        memcpy(fresh, out_buf, HL_CHUNK_HEADER_SIZE + out_len);
        os_unmap(out_buf, out_cap);
    }
    out_buf = fresh;
    out_cap = cap;
    return 0;
}

static int fail_stream(void) {
    hl_log("compressing the trace failed; tracing stops here, the program goes on");
    sink_failed = 1;
    return -1;
}

// One compression context for the life of the process (a fork child resets its session).
static int ensure_cctx(void) {
    if (cctx)
        return 0;
    static const ZSTD_customMem mem = {zalloc, zfree, NULL};
    cctx = ZSTD_createCCtx_advanced(mem);
    if (!cctx)
        return -1;
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 1);
    // Long-distance matching finds a repeat megabytes back at level 1's speed; the frame's own
    // checksum would only come at its end, which a killed process never writes: chunks carry one.
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_enableLongDistanceMatching, 1);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_windowLog, HL_ZSTD_WINDOW_LOG);
    // Only repeats of 256 bytes and more go to the long-distance matcher (its default, 64,
    // lets short accidental repeats break long ones: sqlite3's trace is 30% smaller this way).
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_ldmMinMatch, 256);
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 0);
    return 0;
}

// Runs the stream over `raw` (mode ZSTD_e_continue) or flushes what it holds (ZSTD_e_flush).
static int stream(const uint8_t* raw, size_t len, ZSTD_EndDirective mode) {
    if (ensure_cctx() != 0)
        return fail_stream();
    ZSTD_inBuffer in = {raw, len, 0};
    for (;;) {
        if (out_reserve(ZSTD_compressBound(len - in.pos) + 4096) != 0)
            return fail_stream();
        ZSTD_outBuffer out = {out_buf + HL_CHUNK_HEADER_SIZE, out_cap - HL_CHUNK_HEADER_SIZE,
                              out_len};
        size_t left = ZSTD_compressStream2(cctx, &out, &in, mode);
        out_len = out.pos;
        if (ZSTD_isError(left))
            return fail_stream();
        if (mode == ZSTD_e_flush ? left == 0 : in.pos == len)
            return 0;
    }
}

// Part of a chunk: compressed now, so the work of a chunk is spread over the writer's passes
// (a program waiting on a full ring waits for one part, not for a whole chunk).
int sink_feed(const uint8_t* raw, size_t len) {
    if (sink_failed || len == 0)
        return sink_failed ? -1 : 0;
    if (chunk_raw == 0)
        hl_checksum_init(&chunk_sum);
    if (stream(raw, len, ZSTD_e_continue) != 0)
        return -1;
    hl_checksum_update(&chunk_sum, raw, len);
    chunk_raw += len;
    return 0;
}

// Closes the chunk fed so far and writes it: everything fed decodes from what is written.
int sink_end_chunk(void) {
    if (chunk_raw == 0)
        return 0;
    if (sink_fd < 0 && sink_open() != 0)
        return -1;
    if (sink_check_fd() != 0) {
        hl_log("the trace file %s went away; tracing stops here, the program goes on", path);
        sink_fd = -1;
        sink_failed = 1;
        return -1;
    }
    if (stream(NULL, 0, ZSTD_e_flush) != 0)
        return -1;
    put_u32(out_buf, HL_CHUNK_MAGIC);
    put_u32(out_buf + 4, (uint32_t)out_len);
    put_u32(out_buf + 8, (uint32_t)chunk_raw);
    put_u32(out_buf + 12, hl_checksum_final(&chunk_sum));
    long r = os_write_all(sink_fd, out_buf, out_len + HL_CHUNK_HEADER_SIZE);
    out_len = 0;
    chunk_raw = 0;
    if (r != 0) {
        hl_log("writing %s failed (%s); tracing stops here, the program goes on", path,
               r == -ENOSPC  ? "disk full"
               : r == -EFBIG ? "file size limit reached"
                             : "I/O error");
        close(sink_fd);
        sink_fd = -1;
        sink_failed = 1;
        return -1;
    }
    return 0;
}

void sink_close(void) {
    if (sink_fd >= 0)
        close(sink_fd);
    sink_fd = -1;
}

int sink_is_open(void) { return sink_fd >= 0; }

// The child must not write into the parent's file: forget it (the fd closes with exec or stays
// harmlessly open) and open its own on first use.
void sink_reset_after_fork(void) {
    if (sink_fd >= 0)
        close(sink_fd);
    sink_fd = -1;
    sink_failed = 0;
    // A chunk the parent had open is the parent's.
    if (cctx)
        ZSTD_CCtx_reset(cctx, ZSTD_reset_session_only);
    out_len = 0;
    chunk_raw = 0;
}
