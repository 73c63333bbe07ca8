// SPDX-License-Identifier: MIT
// control.c - the control socket: `heaplens shell PID` talks to a traced process through it.
// The socket is TMPDIR/heaplens-UID/ctl.PID (TMPDIR when an absolute path, else /tmp): a
// directory of the user's that nobody else may enter (private_dir.h), checked before use, and a
// socket of mode 0600 in it; a peer of another user is refused. One client at a time.
//
// The writer thread serves it between passes (control_poll, under the writer lock): commands
// run where the rings are drained and the trace is written, and no program thread ever waits on
// a client. The protocol is lines: a command, then one line of answer, "ok ..." or "error ...".
// The answers are small; the reports a shell shows it makes itself, from the trace file.
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "../common/private_dir.h"
#include "agent.h"
#include "../../include/heaplens.h"
#include "api.h"
#include "control.h"
#include "epoch.h"
#include "stacks.h"
#include "live.h"
#include "log.h"
#include "options.h"
#include "os.h"
#include "scan.h"
#include "sink.h"
#include "thread.h"
#include "writer.h"

#define HL_CONTROL_LINE 256   // a command is shorter; a longer line ends the connection
#define HL_CONTROL_MARKS 4096 // marks a process keeps; `mark` says so when they run out
#define HL_CONTROL_BACKLOG 4  // clients waiting for the one being served
#define HL_CONTROL_REPLY 1400 // an answer: the trace's path and a few numbers

static int is_enabled;
static char dir_path[sizeof(((struct sockaddr_un*)0)->sun_path) - 16]; // room for "/ctl.PID"
static char sock_path[sizeof(((struct sockaddr_un*)0)->sun_path)];
static hl_sink_t listener = {.fd = -1}; // sink.c's descriptor handling: high, checked before use
// A connection commands come on: the local shell's, or the link through the collector.
typedef struct peer_s {
    hl_sink_t s;
    char line[HL_CONTROL_LINE];
    size_t line_len;
} peer_t;
static peer_t client = {.s.fd = -1};   // heaplens shell PID, on this host
static peer_t upstream = {.s.fd = -1}; // heaplens shell ADDR PID, relayed by the collector
static peer_t* serving = &client;      // whose command runs: the answer goes there
static int upstream_pid;               // the process the link was tried for (0: not yet)
static int open_pid;   // the process the socket was made for (0: none yet)
static int has_failed; // no socket for this process: not tried again
static int64_t marks[HL_CONTROL_MARKS]; // trace time of each mark, by number - 1
static unsigned nmarks;
static _Atomic int has_had_client; // a client connected once (run --wait waits for it)

void control_init(void) {
    is_enabled = hl_opt.control;
    const char* tmp = getenv("TMPDIR");
    if (!tmp || tmp[0] != '/' || strlen(tmp) + 32 > sizeof dir_path)
        tmp = "/tmp";
    hl_fmt(dir_path, sizeof dir_path, "%s/heaplens-%u", tmp, (unsigned)syscall(SYS_geteuid));
}

// The user's private directory, made when missing; 0 when it is there and private.
static int private_dir(void) {
    unsigned uid = (unsigned)syscall(SYS_geteuid);
    if (syscall(SYS_mkdirat, AT_FDCWD, dir_path, 0700) != 0 && errno != EEXIST)
        return -1;
    int dfd = (int)syscall(SYS_openat, AT_FDCWD, dir_path,
                           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    int ok = dfd >= 0 && os_fstat(dfd, &st) == 0 && hl_is_private_dir(&st, uid);
    if (dfd >= 0)
        close(dfd);
    if (!ok)
        hl_log("no control socket: %s is not a directory private to this user", dir_path);
    return ok ? 0 : -1;
}

// Sockets of processes that are gone (killed, or ended by a raw exit): removed as a socket is
// made, a bounded number each time, so that the directory stays small.
#define HL_CONTROL_SWEEP 64
static void sweep_dead(void) {
    int dfd = (int)syscall(SYS_openat, AT_FDCWD, dir_path,
                           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return;
    char dents[4096];
    int removed = 0;
    long got;
    while (removed < HL_CONTROL_SWEEP &&
           (got = syscall(SYS_getdents64, dfd, dents, sizeof dents)) > 0) {
        for (long off = 0; off < got && removed < HL_CONTROL_SWEEP;) {
            struct dirent64* d = (struct dirent64*)(dents + off);
            off += d->d_reclen;
            if (strncmp(d->d_name, "ctl.", 4) != 0)
                continue;
            long pid = 0;
            const char* c = d->d_name + 4;
            for (; *c >= '0' && *c <= '9' && pid < (1L << 30); c++)
                pid = pid * 10 + (*c - '0');
            if (*c || pid <= 0)
                continue;
            if (syscall(SYS_kill, pid, 0) != 0 && errno == ESRCH &&
                syscall(SYS_unlinkat, dfd, d->d_name, 0) == 0)
                removed++;
        }
    }
    close(dfd);
}

static int open_socket(int pid) {
    if (private_dir() != 0)
        return -1;
    sweep_dead();
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    hl_fmt(a.sun_path, sizeof a.sun_path, "%s/ctl.%d", dir_path, pid);
    memcpy(sock_path, a.sun_path, sizeof sock_path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int rc = bind(fd, (struct sockaddr*)&a, sizeof a);
    if (rc != 0 && errno == EADDRINUSE) {
        // Left by a process of this pid that was killed: nobody answers there.
        int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int alive = probe >= 0 && connect(probe, (struct sockaddr*)&a, sizeof a) == 0;
        if (probe >= 0)
            close(probe);
        if (!alive && unlink(a.sun_path) == 0)
            rc = bind(fd, (struct sockaddr*)&a, sizeof a);
    }
    if (rc != 0 || chmod(a.sun_path, 0600) != 0 || listen(fd, HL_CONTROL_BACKLOG) != 0) {
        if (rc == 0)
            unlink(a.sun_path);
        close(fd);
        return -1;
    }
    sink_fd_take(&listener, fd);
    return 0;
}

static void drop_peer(peer_t* p) {
    sink_fd_close(&p->s);
    p->line_len = 0;
}

static void drop_client(void) {
    drop_peer(serving);
}

static void reply(const char* text) {
    size_t len = strlen(text);
    // The answer fits the socket's buffer; a client that leaves it unread is dropped.
    if (send(serving->s.fd, text, len, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)len ||
        send(serving->s.fd, "\n", 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1)
        drop_client();
}

static int is_word(const char* cmd, const char* word, const char** rest) {
    size_t n = strlen(word);
    if (strncmp(cmd, word, n) != 0 || (cmd[n] && cmd[n] != ' '))
        return 0;
    for (*rest = cmd + n; **rest == ' ';)
        (*rest)++;
    return 1;
}

// ---------------------------------------------------------------------------------------------
// Watches from the shell: the callback runs on the program's thread that releases or resizes the
// block (api_hooks.c), outside the agent's locks, so it may ask the loader where that was; it
// only fills a slot, which the shell's next `events` reads.
// ---------------------------------------------------------------------------------------------
#define HL_WATCH_EVENTS 64 // events kept until read; older ones are counted as missed
typedef struct watch_event_s {
    _Atomic int is_ready;
    uintptr_t ptr, where, offset, base;
    uint32_t stack;          // the release's stack (stacks.h), written to the trace when read
    int kind;                // HEAPLENS_FREED or HEAPLENS_RESIZED
    const char* function;    // the loader's name for where (lives as long as its module)
    const char* module;
} watch_event_t;
static watch_event_t watch_events[HL_WATCH_EVENTS];
static _Atomic unsigned watch_written, watch_read;

static void shell_watch_cb(void* ptr, int event, const void* where, uint32_t stack, void* arg) {
    (void)arg;
    // Not read in time, the oldest event is overwritten: `events` says how many were missed.
    unsigned at = atomic_fetch_add(&watch_written, 1);
    watch_event_t* e = &watch_events[at % HL_WATCH_EVENTS];
    atomic_store(&e->is_ready, 0);
    Dl_info di = {0};
    int known = where && dladdr((void*)((uintptr_t)where - 1), &di);
    e->ptr = (uintptr_t)ptr;
    e->kind = event;
    e->stack = stack;
    e->where = (uintptr_t)where;
    e->function = known ? di.dli_sname : NULL;
    e->offset = known && di.dli_saddr ? (uintptr_t)where - (uintptr_t)di.dli_saddr : 0;
    e->module = known ? di.dli_fname : NULL;
    e->base = known ? (uintptr_t)di.dli_fbase : 0;
    atomic_store(&e->is_ready, 1);
}

static void answer_watch(const char* rest) {
    char out[HL_CONTROL_REPLY];
    uintptr_t addr = (uintptr_t)strtoull(rest, NULL, 16);
    hl_block_t b;
    if (!addr || live_lookup(addr, &b) != HL_BLOCK_LIVE || b.is_internal) {
        hl_fmt(out, sizeof out, "error no live block at %s", rest);
        reply(out);
    } else if (api_watch_set(addr, (void*)shell_watch_cb, NULL, 1) != 0) {
        reply("error too many watches");
    } else {
        hl_fmt(out, sizeof out, "ok watching %p size=%lu", (void*)addr, (unsigned long)b.size);
        reply(out);
    }
}

// Every event ready since the last read, one line: "ok missed=N" then " PTR KIND WHERE BASE
// NAME+OFF MODULE STACK" each (BASE: the module's load address, for the shell's own symbols;
// names without spaces: symbol names and paths as the loader has them; STACK: the release's
// stack id, its records written to the trace now, for the shell to read after a flush).
static void answer_events(void) {
    char out[HL_CONTROL_REPLY];
    unsigned written = atomic_load(&watch_written), from = atomic_load(&watch_read);
    unsigned missed = written - from > HL_WATCH_EVENTS ? written - from - HL_WATCH_EVENTS : 0;
    size_t len = (size_t)hl_fmt(out, sizeof out, "ok missed=%u", missed);
    unsigned at = from + missed;
    for (; at != written && len + 300 < sizeof out; at++) {
        watch_event_t* e = &watch_events[at % HL_WATCH_EVENTS];
        if (!atomic_load(&e->is_ready))
            break; // its callback is still writing it: the next read takes it
        writer_ensure_stack_locked(e->stack);
        len += (size_t)hl_fmt(out + len, sizeof out - len, " %p %s %p %p %s+%lu %s %u",
                              (void*)e->ptr, e->kind == HEAPLENS_RESIZED ? "resized" : "released",
                              (void*)e->where, (void*)e->base, e->function ? e->function : "?",
                              (unsigned long)e->offset, e->module ? e->module : "?", e->stack);
        atomic_store(&e->is_ready, 0);
    }
    atomic_store(&watch_read, at);
    reply(out);
}

// The epoch (its 64-bit count) the shell's previous scan began: `scan new` lists the blocks made
// from then on.
static uint64_t last_scan_epoch;

enum scan_which { SCAN_ALL, SCAN_NEW, SCAN_LOST };

static void answer_scan(enum scan_which which) {
    if (atomic_load(&hl_phase) != HL_ON) {
        reply("error tracing is stopped (start begins a new trace)");
        return;
    }
    hl_scan_tally_t t;
    int64_t at = writer_now_ns();
    char out[HL_CONTROL_REPLY];
    uint64_t next = epoch_advance64(); // what is made from here on is new to the next scan
    uint64_t since64 = last_scan_epoch;
    last_scan_epoch = next;
    uint32_t since = (uint32_t)since64;
    if (since64 && !epoch_is_valid64(since64))
        since = epoch_floor() + 1; // older than the epochs kept apart: what they still tell
    if (which != SCAN_NEW || !since64)
        since = 0;
    hl_scan_request_t req = {.since_epoch = since, .only_lost = which == SCAN_LOST, .tally = &t};
    if (writer_scan_now_locked(NULL, &req) != 0) {
        reply("error not every thread of the program could be stopped: no scan");
        return;
    }
    hl_fmt(out, sizeof out,
           "ok scan time=%ld blocks=%lu definite=%lu/%lu indirect=%lu/%lu possible=%lu/%lu "
           "reachable=%lu/%lu lost_before=%lu lost_gone=%lu",
           (long)at, (unsigned long)t.judged, (unsigned long)t.bytes[HL_LEAK_DEFINITE],
           (unsigned long)t.blocks[HL_LEAK_DEFINITE], (unsigned long)t.bytes[HL_LEAK_INDIRECT],
           (unsigned long)t.blocks[HL_LEAK_INDIRECT], (unsigned long)t.bytes[HL_LEAK_POSSIBLE],
           (unsigned long)t.blocks[HL_LEAK_POSSIBLE], (unsigned long)t.bytes[HL_LEAK_REACHABLE],
           (unsigned long)t.blocks[HL_LEAK_REACHABLE], (unsigned long)t.lost_before,
           (unsigned long)t.lost_gone);
    reply(out);
}

static void execute(const char* cmd) {
    char out[HL_CONTROL_REPLY];
    const char* rest;
    if (is_word(cmd, "hello", &rest) || is_word(cmd, "status", &rest)) {
        char where[HL_SINK_WHERE];
        int fd = sink_describe(where, sizeof where);
        hl_fmt(out, sizeof out,
               "ok pid=%d time=%ld threads=%u marks=%u tracing=%s trace_fd=%d trace=%s",
               (int)getpid(), (long)writer_now_ns(), thread_count(), nmarks,
               atomic_load(&hl_phase) == HL_ON ? "on" : "stopped", fd, where);
        reply(out);
    } else if (is_word(cmd, "flush", &rest)) {
        writer_flush_locked();
        reply("ok");
    } else if (is_word(cmd, "scan", &rest)) {
        if (!rest[0] || !strcmp(rest, "all"))
            answer_scan(SCAN_ALL);
        else if (!strcmp(rest, "new"))
            answer_scan(SCAN_NEW);
        else if (!strcmp(rest, "leak"))
            answer_scan(SCAN_LOST);
        else
            reply("error scan takes all, new or leak");
    } else if (is_word(cmd, "mark", &rest)) {
        if (nmarks == HL_CONTROL_MARKS) {
            reply("error no marks left");
            return;
        }
        marks[nmarks++] = writer_now_ns();
        writer_flush_locked();
        hl_fmt(out, sizeof out, "ok mark=%u time=%ld", nmarks, (long)marks[nmarks - 1]);
        reply(out);
    } else if (is_word(cmd, "marktime", &rest)) {
        unsigned long n = strtoul(rest, NULL, 10);
        if (n == 0 || n > nmarks) {
            hl_fmt(out, sizeof out, "error no mark %s (marks: %u)", rest, nmarks);
            reply(out);
            return;
        }
        hl_fmt(out, sizeof out, "ok mark=%lu time=%ld", n, (long)marks[n - 1]);
        reply(out);
    } else if (is_word(cmd, "stop", &rest)) {
        if (atomic_load(&hl_phase) != HL_ON)
            reply("error tracing is stopped already");
        else if (writer_stop_locked() != 0)
            reply("error not every thread of the program could be stopped: tracing goes on");
        else
            reply("ok stopped");
    } else if (is_word(cmd, "start", &rest)) {
        char where[HL_SINK_WHERE];
        if (atomic_load(&hl_phase) != HL_STOPPED) {
            reply("error tracing is on already");
        } else if (writer_start_again_locked() != 0) {
            reply("error no new trace could begin (see the program's stderr)");
        } else {
            sink_describe(where, sizeof where);
            hl_fmt(out, sizeof out, "ok started trace=%s", where);
            reply(out);
        }
    } else if (is_word(cmd, "watch", &rest)) {
        answer_watch(rest);
    } else if (is_word(cmd, "events", &rest)) {
        answer_events();
    } else if (is_word(cmd, "depth", &rest)) {
        // Options hold for a whole trace: the next one (start) takes it.
        unsigned long n = strtoul(rest, NULL, 10);
        if (n < 1 || n > HL_MAX_DEPTH) {
            hl_fmt(out, sizeof out, "error depth takes 1 to %d", HL_MAX_DEPTH);
            reply(out);
            return;
        }
        writer_set_next_depth((int)n);
        hl_fmt(out, sizeof out, "ok depth=%lu from the next trace", n);
        reply(out);
    } else if (is_word(cmd, "quit", &rest)) {
        if (serving == &client) // the collector's link stays for the next shell
            drop_client();
    } else {
        hl_fmt(out, sizeof out, "error unknown command '%s'", cmd);
        reply(out);
    }
}

// A client, once it is the user's (the directory keeps others out; this says so again).
static void take_client(void) {
    int c = accept4(listener.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c < 0)
        return;
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
        (cred.uid != (uid_t)syscall(SYS_geteuid) && cred.uid != 0)) {
        close(c);
        return;
    }
    sink_fd_take(&client.s, c);
    client.line_len = 0;
    atomic_store(&has_had_client, 1);
    os_futex_wake(&has_had_client, 1);
}

void control_wait_for_client(void) {
    if (!is_enabled)
        return;
    hl_log("waiting for `heaplens shell %d` before the program starts (--wait)", (int)getpid());
    while (!atomic_load(&has_had_client))
        os_futex_wait(&has_had_client, 0, -1);
}

// Runs every complete command p sent; never waits for more.
static void serve(peer_t* p) {
    serving = p;
    while (p->s.fd >= 0) {
        ssize_t n = recv(p->s.fd, p->line + p->line_len, sizeof p->line - p->line_len,
                         MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            drop_peer(p);
            break;
        }
        if (n < 0)
            break;
        p->line_len += (size_t)n;
        char* nl;
        while (p->s.fd >= 0 && (nl = memchr(p->line, '\n', p->line_len)) != NULL) {
            *nl = 0;
            if (nl > p->line && nl[-1] == '\r')
                nl[-1] = 0;
            execute(p->line);
            if (p->s.fd < 0)
                break; // dropped (quit): nothing of its line is left to keep
            size_t used = (size_t)(nl + 1 - p->line);
            memmove(p->line, nl + 1, p->line_len - used);
            p->line_len -= used;
        }
        if (p->line_len == sizeof p->line) {
            reply("error command too long");
            drop_peer(p);
        }
    }
    serving = &client;
}

// A trace sent to a collector: once per process, a second connection to it, greeted with
// "HEAPLENS-CONTROL PID", on which the collector relays a shell's commands (heaplens shell ADDR
// PID on the collector's host, which reads the trace the collector writes). A collector that
// cannot be reached leaves the local socket alone in service.
// Not before the process has run this long: a build's or a script's thousand short processes
// would each pay a connection that no shell could use in time.
#define HL_UPSTREAM_AFTER_NS 300000000L // 0.3 s
static void link_upstream(int pid) {
    upstream_pid = pid;
    char where[HL_SINK_WHERE];
    sink_describe(where, sizeof where);
    if (!hl_opt.remote[0] || where[0] != '@' || !sink_is_open())
        return; // no collector, the trace fell back to a local file, or tracing stopped
    char greeting[48];
    hl_fmt(greeting, sizeof greeting, "HEAPLENS-CONTROL %d\n", pid);
    hl_sink_t link = {.fd = -1};
    int fd = sink_socket_connect(&link, greeting);
    if (fd < 0) {
        hl_log("no shell through the collector at %s: %s", hl_opt.remote,
               link.why ? link.why : sink_error_text(-fd));
        return;
    }
    sink_fd_take(&upstream.s, fd);
    upstream.line_len = 0;
}

void control_poll(void) {
    if (!is_enabled || has_failed)
        return;
    int pid = (int)getpid();
    if (open_pid != pid) {
        if (open_socket(pid) != 0) {
            has_failed = 1;
            return;
        }
        open_pid = pid;
    }
    if (!sink_fd_is_own(&listener)) {
        listener.fd = -1; // the program closed it and took the number: not ours to close
        has_failed = 1;
        return;
    }
    if (client.s.fd >= 0 && !sink_fd_is_own(&client.s))
        client.s.fd = -1;
    if (client.s.fd < 0)
        take_client();
    serve(&client);
    if (upstream_pid != pid && writer_now_ns() >= HL_UPSTREAM_AFTER_NS)
        link_upstream(pid);
    if (upstream.s.fd >= 0 && !sink_fd_is_own(&upstream.s))
        upstream.s.fd = -1;
    serve(&upstream);
}

void control_close(void) {
    if (upstream_pid && upstream_pid == (int)getpid())
        drop_peer(&upstream);
    upstream_pid = 0;
    if (open_pid && open_pid == (int)getpid()) {
        drop_peer(&client);
        if (sink_fd_is_own(&listener))
            sink_fd_close(&listener);
        unlink(sock_path);
    }
    open_pid = 0;
}

void control_after_fork(void) {
    last_scan_epoch = 0;
    // the parent's: closing the child's copies leaves the parent's
    sink_fd_close(&client.s);
    sink_fd_close(&upstream.s);
    sink_fd_close(&listener);
    client.line_len = upstream.line_len = 0;
    upstream_pid = 0;
    open_pid = 0;
    has_failed = 0;
    nmarks = 0;
}
