// SPDX-License-Identifier: MIT
// server.h - the collector's state (cmd_server.c), shared with its relay of shell commands to
// the targets that send it their traces (server_relay.c).
#ifndef HL_CLI_SERVER_H
#define HL_CLI_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/un.h>

#include "remote.h"
#include "rundir.h"

#define SERVER_MAX_CONNS 256    // targets streaming at once; more wait in the listen backlog
#define SERVER_BUF_BYTES 65536  // one read per connection per poll round
#define TOKEN_MAX REMOTE_TOKEN_MAX // the token line's length bound
#define TOKEN_WAIT_MS 5000      // a connection that sends no token line by then is dropped
#define TOKEN_PREFIX "HEAPLENS-TOKEN "

typedef struct conn_s {
    int fd;        // the socket, or -1 when the slot is free
    int out;       // the partial trace (.part file), or -1 before the token is through
    char part[64]; // its name in the directory
    char peer[96];
    uint64_t bytes;
    char line[TOKEN_MAX + sizeof TOKEN_PREFIX + 2]; // the token line as it arrives
    size_t line_len;
    int64_t opened_ms;
    int kind;            // CONN_*: what the connection turned out to be by its first bytes
    long pid;            // CONTROL: the target's; TRACE: from its INFO record (0: not read yet)
    struct conn_s* mate; // a CONTROL and the SHELL it is relayed to, each other's
    uint64_t serial;     // order of arrival: the latest trace of a pid is its current one
    char head[48];       // a greeting line as it arrives, or a trace's first byte
    size_t head_len;
    char cmd[256]; // a shell's command line as it arrives (the target takes shorter ones)
    size_t cmd_len;
} conn_t;

enum conn_kind {
    CONN_NEW = 0, // nothing read yet past the token
    CONN_TRACE,   // a target's trace stream
    CONN_CONTROL, // a target's control link (HEAPLENS-CONTROL PID), relayed to one shell
    CONN_SHELL,   // heaplens shell ADDR PID (HEAPLENS-SHELL PID)
};

typedef struct server_s {
    int listen_fd;
    int dir_fd;
    rundir_t own_dir; // the socket's directory when unix: alone asked for one
    const char* dir;
    char unix_path[sizeof(((struct sockaddr_un*)0)->sun_path)]; // removed at the end
    char token[TOKEN_MAX];
    size_t token_len; // 0: no token asked
    int is_quiet;
    long want_traces; // stop after this many (0: never)
    long done_traces;
    uint64_t next_part;
    uint64_t next_serial;
    conn_t conns[SERVER_MAX_CONNS];
} server_t;

// The process a trace is of, from its INFO record (the first of its first chunk): decoding
// stops there, so it costs the same whatever the trace's size. 0, or -1 when it is not there
// yet (p unchanged then).
typedef struct trace_process_s {
    char prog[128]; // the executable's file name, '/' never in it
    unsigned long long pid;
} trace_process_t;
int server_read_process(const char* path, trace_process_t* p);

// server_relay.c. Bytes of a connection past its token: decides what it is on its first bytes
// and handles them (a trace's are written by the caller when this returns 1).
int relay_take(server_t* s, conn_t* c, const char* buf, size_t n, size_t* used);
void relay_closing(conn_t* c); // c goes away: its peer is told (a shell loses its target)

#endif
