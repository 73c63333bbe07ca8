// SPDX-License-Identifier: MIT
// sink.h - where a trace's bytes go: a small interface (open, write, close, after_fork) with two
// implementations, a file (sink_file.c) and a socket to a collector (sink_socket.c), and the
// front the writer uses (sink.c), which picks one and falls back from the socket to a file.
// Only the writer thread, or a thread holding the writer lock, calls any of it.
#ifndef HL_SINK_H
#define HL_SINK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define HL_SINK_WHERE 1100 // a path or an address, as said in messages

typedef struct hl_sink_s hl_sink_t;
typedef struct hl_sink_ops_s {
    const char* what; // "trace file", "collector": for messages
    // Reaches the destination (pid: whose trace, for names). 0, or -errno (why in s->why when
    // it is not an errno's text). Says nothing: the front decides what to tell the user.
    int (*open)(hl_sink_t* s, int pid);
    int (*write)(hl_sink_t* s, const void* buf, size_t len); // all of it: 0, or -errno
    void (*close)(hl_sink_t* s);
    void (*after_fork)(hl_sink_t* s); // a child: the parent's destination is not its own
} hl_sink_ops_t;

struct hl_sink_s {
    const hl_sink_ops_t* ops;
    int fd;                      // -1: not open
    dev_t dev;                   // fd's identity: a program may close it and reuse the number
    ino_t ino;                   // (daemons do); checked before each write
    const char* failed_to;       // what open could not do ("create", "connect to"...)
    const char* why;             // open's reason when no errno says it (NULL: errno's text)
    char where[HL_SINK_WHERE];   // the file's path, or the collector's address
};

// What both sinks do with their descriptor (sink.c).
// Takes fd as the sink's: moved above the program's descriptors (close-on-exec), its identity
// noted for sink_fd_is_own.
void sink_fd_take(hl_sink_t* s, int fd);
// Is s->fd still the file or socket the sink took? A program may close every descriptor
// (daemons do) and reuse the number for one of its own: writing there would corrupt it.
int sink_fd_is_own(const hl_sink_t* s);
// Closes and forgets the descriptor: both sinks' close, and their after_fork (a child's trace
// is its own: it opens its own file, or connects anew, on first use).
void sink_fd_close(hl_sink_t* s);

extern const hl_sink_ops_t hl_sink_file;   // sink_file.c
extern const hl_sink_ops_t hl_sink_socket; // sink_socket.c
// A connection to the collector HEAPLENS_REMOTE names, its token line sent, then greeting: the
// descriptor (not yet taken), or -errno (s->why, s->where as for open). The control socket's
// link through the collector uses it too (control.c).
int sink_socket_connect(hl_sink_t* s, const char* greeting);
// strerror's text without its locale machinery (which may allocate): what s->why says when open
// gave an errno.
const char* sink_error_text(int err);

// The front (sink.c). The socket sink when HEAPLENS_REMOTE names a collector, else the file.
int sink_open(void); // the sink and the trace's header: 0, or -1 (said why; tracing stops)
// One framed chunk (chunk.c): 0; -1 when tracing stops (said why); or HL_SINK_LOST: the
// collector went away (nothing said yet), and the writer calls sink_fall_back.
#define HL_SINK_LOST 1
int sink_write_chunk(const uint8_t* buf, size_t len);
// After HL_SINK_LOST, in one line: the trace goes on in a new local file (0: the caller begins
// a new trace there), or, when `cannot` says why no new trace can begin or no file can be
// made, tracing stops (-1).
int sink_fall_back(const char* cannot);
void sink_close(void);
// Where the trace goes, or went last, in out: a file's path, '@' and a collector's address, or
// "" (none yet). Returns the trace file's descriptor (its /proc/PID/fd link reaches the file
// from any directory), or -1 (none open).
int sink_describe(char* out, size_t cap);
int sink_is_open(void);
void sink_reset_after_fork(void);

#endif
