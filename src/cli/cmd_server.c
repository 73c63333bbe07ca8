// SPDX-License-Identifier: MIT
// cmd_server.c - heaplens server: the collector. Traced processes on this host or another send
// their trace over a UNIX or TCP socket instead of writing a file; the collector writes each
// connection's stream to a trace of its own in its directory, named as `heaplens run` names
// traces (heaplens.PROG.PID.hl, from the trace's own process record), so that the host, which
// owns the binaries and their debug information, reports on it as on any trace.
//
// The stream is exactly a trace file's bytes: header, then checksummed chunks. The collector
// never interprets them while they arrive (it keeps no memory per connection beyond one
// buffer), so a target that dies or a link that breaks leaves a trace cut short, readable up to
// its last whole chunk, as a file trace cut by SIGKILL is.
//
// Security: a UNIX socket is made 0600 in a directory private to the user (0700, owned, not a
// link); a TCP listener is on loopback unless told otherwise, and then needs --token FILE: each
// connection must first send the line "HEAPLENS-TOKEN <token>\n" (compared in constant time).
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "../analyze/reader.h"
#include "../common/private_dir.h"
#include "cli.h"
#include "remote.h"
#include "rundir.h"

#include "server.h"

static volatile sig_atomic_t server_stop;
static void on_stop(int sig) {
    (void)sig;
    server_stop = 1;
}

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

// ---------------------------------------------------------------------------------------------
// Listening
// ---------------------------------------------------------------------------------------------
static int is_loopback(const struct sockaddr* sa) {
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in*)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr* a = &((const struct sockaddr_in6*)sa)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(a) ||
               (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
    }
    return 0;
}

// A UNIX socket's directory must be the user's own and closed to others: anyone who can write
// there could put their own socket at the name, and targets would send them their traces.
static int listen_unix(server_t* s, const char* path) {
    char dir[sizeof s->unix_path];
    if (!path[0]) { // unix: alone: a private directory of our own making
        if (rundir_create(&s->own_dir) != 0)
            return -1;
        if (rundir_name(&s->own_dir, "collector.sock", s->unix_path, sizeof s->unix_path) != 0) {
            cli_error("server: socket path too long");
            return -1;
        }
    } else {
        if (strlen(path) >= sizeof s->unix_path) {
            cli_error("server: socket path too long: %s", path);
            return -1;
        }
        strcpy(s->unix_path, path);
    }
    strcpy(dir, s->unix_path);
    char* slash = strrchr(dir, '/');
    if (!slash)
        strcpy(dir, ".");
    else if (slash == dir)
        dir[1] = 0;
    else
        *slash = 0;
    struct stat st;
    if (lstat(dir, &st) != 0 || !hl_is_private_dir(&st, geteuid())) {
        cli_error("server: %s must be a directory of yours that nobody else may enter (mode 0700)",
                  dir);
        return -1;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        cli_error("server: socket: %s", strerror(errno));
        return -1;
    }
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    strcpy(sa.sun_path, s->unix_path);
    mode_t old = umask(0177); // the socket is born 0600
    int rc = bind(fd, (struct sockaddr*)&sa, sizeof sa);
    umask(old);
    if (rc != 0 || listen(fd, SOMAXCONN) != 0) {
        cli_error("server: %s: %s", s->unix_path, strerror(errno));
        close(fd);
        s->unix_path[0] = 0; // not ours to remove
        return -1;
    }
    printf("heaplens: listening on unix:%s\n", s->unix_path);
    return fd;
}

// tcp:HOST:PORT (HOST may be [v6]; an empty HOST or PORT: 127.0.0.1 and a free port).
static int listen_tcp(server_t* s, const char* spec) {
    char host[256] = "127.0.0.1", port[16] = "0";
    if (remote_split_tcp(spec, host, sizeof host, port, sizeof port) != 0) {
        cli_error("server: bad address tcp:%s", spec);
        return -1;
    }
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo* ai = NULL;
    int gai = getaddrinfo(host, port, &hints, &ai);
    if (gai != 0) {
        cli_error("server: tcp:%s: %s", spec, gai_strerror(gai));
        return -1;
    }
    if (!is_loopback(ai->ai_addr) && !s->token_len) {
        cli_error("server: tcp:%s is not a loopback address: a listener there needs --token FILE",
                  spec);
        freeaddrinfo(ai);
        return -1;
    }
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    int one = 1;
    if (fd >= 0)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
        cli_error("server: tcp:%s: %s", spec, strerror(errno));
        if (fd >= 0)
            close(fd);
        freeaddrinfo(ai);
        return -1;
    }
    freeaddrinfo(ai);
    struct sockaddr_storage bound;
    socklen_t blen = sizeof bound;
    getsockname(fd, (struct sockaddr*)&bound, &blen);
    char shown[INET6_ADDRSTRLEN] = "?";
    int bport = 0;
    if (bound.ss_family == AF_INET) {
        inet_ntop(AF_INET, &((struct sockaddr_in*)&bound)->sin_addr, shown, sizeof shown);
        bport = ntohs(((struct sockaddr_in*)&bound)->sin_port);
        printf("heaplens: listening on tcp:%s:%d\n", shown, bport);
    } else {
        inet_ntop(AF_INET6, &((struct sockaddr_in6*)&bound)->sin6_addr, shown, sizeof shown);
        bport = ntohs(((struct sockaddr_in6*)&bound)->sin6_port);
        printf("heaplens: listening on tcp:[%s]:%d\n", shown, bport);
    }
    return fd;
}

// ---------------------------------------------------------------------------------------------
// Connections
// ---------------------------------------------------------------------------------------------
static int open_part(server_t* s, conn_t* c) {
    for (int tries = 0; tries < 100; tries++) {
        snprintf(c->part, sizeof c->part, ".heaplens.remote.%d.%llu.part", (int)getpid(),
                 (unsigned long long)s->next_part++);
        int fd = openat(s->dir_fd, c->part,
                        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    return -1;
}

static int take_info(const rd_record_t* r, void* arg) {
    if (r->tag != REC_INFO)
        return 0;
    trace_process_t* p = arg;
    p->pid = r->u[0];
    const char* exe = r->s[0].ptr;
    size_t len = r->s[0].len, from = 0;
    for (size_t k = 0; k < len; k++)
        if (exe[k] == '/')
            from = k + 1;
    size_t n = len - from < sizeof p->prog - 1 ? len - from : sizeof p->prog - 1;
    if (n) {
        memcpy(p->prog, exe + from, n);
        p->prog[n] = 0;
    }
    return 1;
}

int server_read_process(const char* path, trace_process_t* p) {
    rd_result_t res;
    rd_read_file(path, take_info, p, &res); // a stream cut short still names its process
    return p->pid ? 0 : -1;
}

// The trace's final name, from its process record: heaplens.PROG.PID.hl, then .1, .2 ... as
// heaplens run does; nothing existing is replaced (renameat2's RENAME_NOREPLACE).
static void name_trace(server_t* s, conn_t* c) {
    char full[4096], final[512];
    snprintf(full, sizeof full, "%s/%s", s->dir, c->part);
    trace_process_t proc = {.prog = "remote"};
    server_read_process(full, &proc);
    const char* prog = proc.prog;
    unsigned long long pid = proc.pid;
    for (int n = 0; n < 1000; n++) {
        if (n == 0)
            snprintf(final, sizeof final, "heaplens.%s.%llu.hl", prog, pid);
        else
            snprintf(final, sizeof final, "heaplens.%s.%llu.hl.%d", prog, pid, n);
        if (renameat2(s->dir_fd, c->part, s->dir_fd, final, RENAME_NOREPLACE) == 0) {
            if (!s->is_quiet)
                printf("heaplens: trace %s/%s from %s (%llu bytes)\n", s->dir, final, c->peer,
                       (unsigned long long)c->bytes);
            fflush(stdout);
            return;
        }
        if (errno != EEXIST)
            break;
    }
    cli_error("server: cannot name the trace from %s: kept as %s/%s", c->peer, s->dir, c->part);
}

static void conn_close(server_t* s, conn_t* c, int keep) {
    relay_closing(c);
    close(c->fd);
    c->fd = -1;
    if (c->out >= 0) {
        close(c->out);
        c->out = -1;
        if (keep && c->bytes > 0) {
            name_trace(s, c);
            s->done_traces++;
        } else {
            unlinkat(s->dir_fd, c->part, 0);
        }
    }
}

// Constant-time comparison: how long it takes says nothing of how much of the token matched.
static int token_matches(const server_t* s, const char* got, size_t len) {
    unsigned diff = len != s->token_len;
    for (size_t i = 0; i < s->token_len; i++)
        diff |= (unsigned char)s->token[i] ^ (unsigned char)(i < len ? got[i] : 0);
    return diff == 0;
}

// Bytes before the token line is through: the line, then the trace's first bytes.
static int take_token(server_t* s, conn_t* c, const char* buf, size_t n, size_t* used) {
    size_t i = 0;
    while (i < n && c->line_len < sizeof c->line - 1) {
        char ch = buf[i++];
        if (ch == '\n') {
            c->line[c->line_len] = 0;
            size_t plen = strlen(TOKEN_PREFIX);
            if (c->line_len < plen || memcmp(c->line, TOKEN_PREFIX, plen) != 0 ||
                !token_matches(s, c->line + plen, c->line_len - plen)) {
                cli_error("server: connection from %s refused: wrong token", c->peer);
                return -1;
            }
            c->line_len = SIZE_MAX; // through
            *used = i;
            return 1;
        }
        c->line[c->line_len++] = ch;
    }
    if (c->line_len >= sizeof c->line - 1) {
        cli_error("server: connection from %s refused: no token line", c->peer);
        return -1;
    }
    *used = i;
    return 0;
}

static int write_all(int fd, const char* p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static void conn_read(server_t* s, conn_t* c) {
    static char buf[SERVER_BUF_BYTES];
    ssize_t n = read(c->fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) { // the target finished (or died): what arrived is its trace
        conn_close(s, c, c->line_len == SIZE_MAX || !s->token_len);
        return;
    }
    size_t off = 0;
    if (s->token_len && c->line_len != SIZE_MAX) {
        int rc = take_token(s, c, buf, (size_t)n, &off);
        if (rc < 0) {
            conn_close(s, c, 0);
            return;
        }
        if (rc == 0)
            return;
    }
    if (c->kind != CONN_TRACE) {
        size_t used;
        int rc = relay_take(s, c, buf + off, (size_t)n - off, &used);
        if (rc < 0) {
            conn_close(s, c, 0);
            return;
        }
        if (rc == 0)
            return;
        off += used; // a trace: its first bytes are in c->head
    }
    if (c->out < 0) {
        c->out = open_part(s, c);
        if (c->out < 0) {
            cli_error("server: %s: cannot create a trace file: %s", s->dir, strerror(errno));
            conn_close(s, c, 0);
            return;
        }
    }
    if ((c->head_len && write_all(c->out, c->head, c->head_len) != 0) ||
        (off < (size_t)n && write_all(c->out, buf + off, (size_t)n - off) != 0)) {
        cli_error("server: %s/%s: %s: the trace from %s is cut here", s->dir, c->part,
                  strerror(errno), c->peer);
        conn_close(s, c, 1);
        return;
    }
    c->bytes += c->head_len + (size_t)n - off;
    c->head_len = 0;
}

static void conn_accept(server_t* s) {
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    int fd = accept4(s->listen_fd, (struct sockaddr*)&sa, &len, SOCK_CLOEXEC);
    if (fd < 0)
        return;
    conn_t* c = NULL;
    for (int i = 0; i < SERVER_MAX_CONNS && !c; i++)
        if (s->conns[i].fd < 0)
            c = &s->conns[i];
    if (!c) {
        close(fd); // the target falls back to a local trace
        return;
    }
    memset(c, 0, sizeof *c);
    c->fd = fd;
    c->out = -1;
    c->opened_ms = now_ms();
    c->serial = ++s->next_serial;
    if (sa.ss_family == AF_INET || sa.ss_family == AF_INET6) {
        char host[INET6_ADDRSTRLEN] = "?";
        int port = 0;
        if (sa.ss_family == AF_INET) {
            inet_ntop(AF_INET, &((struct sockaddr_in*)&sa)->sin_addr, host, sizeof host);
            port = ntohs(((struct sockaddr_in*)&sa)->sin_port);
        } else {
            inet_ntop(AF_INET6, &((struct sockaddr_in6*)&sa)->sin6_addr, host, sizeof host);
            port = ntohs(((struct sockaddr_in6*)&sa)->sin6_port);
        }
        snprintf(c->peer, sizeof c->peer, "%s:%d", host, port);
    } else {
        struct ucred cred;
        socklen_t clen = sizeof cred;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0)
            snprintf(c->peer, sizeof c->peer, "pid %d", (int)cred.pid);
        else
            strcpy(c->peer, "a local process");
    }
}

static int serve(server_t* s, int64_t deadline_ms) {
    struct pollfd pfd[SERVER_MAX_CONNS + 1];
    while (!server_stop && (!s->want_traces || s->done_traces < s->want_traces)) {
        int n = 0;
        pfd[n++] = (struct pollfd){.fd = s->listen_fd, .events = POLLIN};
        conn_t* by_slot[SERVER_MAX_CONNS + 1];
        for (int i = 0; i < SERVER_MAX_CONNS; i++) {
            conn_t* c = &s->conns[i];
            if (c->fd < 0)
                continue;
            if (s->token_len && c->line_len != SIZE_MAX && now_ms() - c->opened_ms > TOKEN_WAIT_MS) {
                cli_error("server: connection from %s refused: no token in time", c->peer);
                conn_close(s, c, 0);
                continue;
            }
            by_slot[n] = c;
            pfd[n++] = (struct pollfd){.fd = c->fd, .events = POLLIN};
        }
        int wait_ms = 1000;
        if (deadline_ms) {
            int64_t left = deadline_ms - now_ms();
            if (left <= 0)
                break;
            if (left < wait_ms)
                wait_ms = (int)left;
        }
        int r = poll(pfd, (nfds_t)n, wait_ms);
        if (r < 0 && errno != EINTR) {
            cli_error("server: poll: %s", strerror(errno));
            return 1;
        }
        if (r <= 0)
            continue;
        for (int i = 1; i < n; i++)
            if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR))
                conn_read(s, by_slot[i]);
        if (pfd[0].revents & POLLIN)
            conn_accept(s);
    }
    // Stopped: what every open connection sent so far is kept, as a trace cut short.
    for (int i = 0; i < SERVER_MAX_CONNS; i++)
        if (s->conns[i].fd >= 0)
            conn_close(s, &s->conns[i], 1);
    return 0;
}

static void server_usage(FILE* out) {
    fputs("usage: heaplens server --listen ADDR [-o DIR] [--token FILE] [--count N]\n"
          "                       [--duration S] [-q]\n"
          "  --listen ADDR   unix:PATH (in a directory of mode 0700; unix: alone makes one),\n"
          "                  or tcp:HOST:PORT (loopback unless --token; port 0: any free one)\n"
          "  -o DIR          where the traces go (default .): heaplens.PROG.PID.hl, 0600\n"
          "  --token FILE    a secret (a 0600 file of yours) every target must send first;\n"
          "                  needed for a TCP listener on any address but loopback\n"
          "  --count N       stop after N traces have ended\n"
          "  --duration S    stop after S seconds (the traces still open are kept, cut short)\n"
          "  -q, --quiet     no line per trace\n"
          "Targets: heaplens run --remote ADDR -- PROGRAM, or HEAPLENS_OPTIONS=remote=ADDR.\n",
          out);
}

int cmd_server(int argc, char** argv) {
    static server_t s;
    memset(&s, 0, sizeof s);
    s.listen_fd = -1;
    s.own_dir.fd = -1;
    s.dir = ".";
    const char* listen_spec = NULL;
    const char* token_path = NULL;
    double duration = 0;
    for (int i = 1; i < argc; i++) {
        const char* a = argv[i];
        const char* v;
        int missing = 0;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            server_usage(stdout);
            return 0;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            s.is_quiet = 1;
        } else if (!strcmp(a, "-o")) {
            if (i + 1 >= argc) {
                cli_error("server: -o needs a directory");
                return 2;
            }
            s.dir = argv[++i];
        } else if ((v = cli_option_value(argc, argv, &i, "--listen", &missing))) {
            listen_spec = v;
        } else if ((v = cli_option_value(argc, argv, &i, "--token", &missing))) {
            token_path = v;
        } else if ((v = cli_option_value(argc, argv, &i, "--count", &missing))) {
            char* end;
            s.want_traces = strtol(v, &end, 10);
            if (*end || s.want_traces <= 0) {
                cli_error("server: --count needs a positive number, not '%s'", v);
                return 2;
            }
        } else if ((v = cli_option_value(argc, argv, &i, "--duration", &missing))) {
            char* end;
            duration = strtod(v, &end);
            if (*end || !(duration > 0)) {
                cli_error("server: --duration needs a positive number of seconds, not '%s'", v);
                return 2;
            }
        } else {
            if (missing)
                cli_error("server: %s needs a value", a);
            else
                cli_error("server: unknown option '%s' (heaplens server --help)", a);
            return 2;
        }
    }
    if (!listen_spec) {
        cli_error("server: --listen ADDR is required (unix:PATH or tcp:HOST:PORT)");
        return 2;
    }
    if (token_path) {
        int n = remote_read_token("server", token_path, s.token);
        if (n < 0)
            return 2;
        s.token_len = (size_t)n;
    }
    s.dir_fd = open(s.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s.dir_fd < 0) {
        cli_error("server: %s: %s", s.dir, strerror(errno));
        return 2;
    }
    for (int i = 0; i < SERVER_MAX_CONNS; i++)
        s.conns[i].fd = -1;
    if (!strncmp(listen_spec, "unix:", 5))
        s.listen_fd = listen_unix(&s, listen_spec + 5);
    else if (!strncmp(listen_spec, "tcp:", 4))
        s.listen_fd = listen_tcp(&s, listen_spec + 4);
    else
        cli_error("server: bad address '%s' (unix:PATH or tcp:HOST:PORT)", listen_spec);
    if (s.listen_fd < 0)
        return 2;
    fflush(stdout);
    struct sigaction sa = {.sa_handler = on_stop};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    int rc = serve(&s, duration > 0 ? now_ms() + (int64_t)(duration * 1000) : 0);
    close(s.listen_fd);
    if (s.unix_path[0])
        unlink(s.unix_path);
    rundir_remove(&s.own_dir);
    close(s.dir_fd);
    return rc;
}
