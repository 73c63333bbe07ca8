// SPDX-License-Identifier: MIT
// sink_socket.c - the trace sent to a collector (sink.h's socket sink): HEAPLENS_REMOTE names it
// as unix:PATH or tcp:HOST:PORT (HOST numeric, IPv4 or [IPv6], or localhost). The bytes on the
// wire are those of a trace file (its header, then chunks), so the collector writes what it
// receives. Nothing here may resolve names (getaddrinfo allocates and reads files) or raise
// SIGPIPE in the program: a peer that goes away is a failed write, which the front turns into a
// local trace file.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "chunk.h"
#include "options.h"
#include "sink.h"

// A collector that does not answer within this long is not there: the program must not wait.
#define HL_CONNECT_TIMEOUT_MS 2000
// A collector that takes no bytes for this long is stuck: the trace goes on in a local file
// rather than making the program wait on its full rings.
#define HL_SEND_TIMEOUT_S 5

typedef union address_u {
    struct sockaddr sa;
    struct sockaddr_un un;
    struct sockaddr_in in4;
    struct sockaddr_in6 in6;
} address_t;

static int parse_port(const char* s, uint16_t* out) {
    unsigned long v = 0;
    if (!*s)
        return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || (v = v * 10 + (unsigned long)(*s - '0')) > 65535)
            return -1;
    }
    if (v == 0)
        return -1;
    *out = htons((uint16_t)v);
    return 0;
}

// unix:PATH or tcp:HOST:PORT into *a; its length, or 0 with s->why saying what is wrong.
static socklen_t parse_address(hl_sink_t* s, const char* spec, address_t* a) {
    memset(a, 0, sizeof *a);
    if (strncmp(spec, "unix:", 5) == 0) {
        const char* path = spec + 5;
        if (!*path || strlen(path) >= sizeof a->un.sun_path) {
            s->why = "a UNIX socket path must be 1 to 107 bytes";
            return 0;
        }
        a->un.sun_family = AF_UNIX;
        strcpy(a->un.sun_path, path);
        return (socklen_t)sizeof a->un;
    }
    if (strncmp(spec, "tcp:", 4) == 0) {
        char host[64];
        const char* h = spec + 4;
        const char* colon = strrchr(h, ':');
        size_t hl = colon ? (size_t)(colon - h) : 0;
        if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') { // [IPv6]:PORT
            h++;
            hl -= 2;
        }
        uint16_t port;
        if (!colon || hl == 0 || hl >= sizeof host || parse_port(colon + 1, &port) != 0) {
            s->why = "expected tcp:HOST:PORT";
            return 0;
        }
        memcpy(host, h, hl);
        host[hl] = 0;
        if (strcmp(host, "localhost") == 0)
            strcpy(host, "127.0.0.1");
        if (inet_pton(AF_INET, host, &a->in4.sin_addr) == 1) {
            a->in4.sin_family = AF_INET;
            a->in4.sin_port = port;
            return (socklen_t)sizeof a->in4;
        }
        if (inet_pton(AF_INET6, host, &a->in6.sin6_addr) == 1) {
            a->in6.sin6_family = AF_INET6;
            a->in6.sin6_port = port;
            return (socklen_t)sizeof a->in6;
        }
        s->why = "the host must be a numeric address or localhost";
        return 0;
    }
    s->why = "expected unix:PATH or tcp:HOST:PORT";
    return 0;
}

// connect(2) that gives up after HL_CONNECT_TIMEOUT_MS. 0 or -errno.
static int connect_within(int fd, const address_t* a, socklen_t len) {
    int flags = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    int rc = 0;
    if (connect(fd, &a->sa, len) != 0) {
        rc = -errno;
        if (rc == -EINPROGRESS) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            int n;
            do
                n = poll(&p, 1, HL_CONNECT_TIMEOUT_MS);
            while (n < 0 && errno == EINTR);
            int err = 0;
            socklen_t el = sizeof err;
            if (n == 0)
                rc = -ETIMEDOUT;
            else if (n < 0)
                rc = -errno;
            else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0)
                rc = -errno;
            else
                rc = -err;
        }
    }
    fcntl(fd, F_SETFL, flags);
    return rc;
}

static int send_all(int fd, const void* buf, size_t len) {
    const char* p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

// The collector's secret, from the file remote_token names, sent first as the line
// "HEAPLENS-TOKEN <secret>\n" (heaplens server --token). The file must be the user's own and
// closed to others, as the collector requires of its copy. 0 (nothing to send when no file is
// named), or -errno with s->why saying what is wrong.
#define HL_TOKEN_MAX 256
static int send_token(hl_sink_t* s, int fd) {
    if (!hl_opt.remote_token[0])
        return 0;
    char line[sizeof "HEAPLENS-TOKEN " + HL_TOKEN_MAX + 1] = "HEAPLENS-TOKEN ";
    size_t at = sizeof "HEAPLENS-TOKEN " - 1;
    int tf = (int)syscall(SYS_openat, AT_FDCWD, hl_opt.remote_token,
                          O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (tf < 0 || fstat(tf, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
        (st.st_mode & 077)) {
        if (tf >= 0)
            close(tf);
        s->why = "the token file must be a file of yours that nobody else may read";
        return -EACCES;
    }
    ssize_t n = read(tf, line + at, HL_TOKEN_MAX);
    close(tf);
    while (n > 0 && (line[at + n - 1] == '\n' || line[at + n - 1] == '\r' || line[at + n - 1] == ' '))
        n--;
    if (n <= 0) {
        s->why = "the token file is empty";
        return -EINVAL;
    }
    line[at + (size_t)n] = '\n';
    return send_all(fd, line, at + (size_t)n + 1);
}

int sink_socket_connect(hl_sink_t* s, const char* greeting) {
    s->why = NULL;
    s->failed_to = "reach";
    size_t n = strlen(hl_opt.remote);
    if (n >= sizeof s->where)
        n = sizeof s->where - 1;
    memcpy(s->where, hl_opt.remote, n);
    s->where[n] = 0;
    address_t a;
    socklen_t len = parse_address(s, hl_opt.remote, &a);
    if (!len)
        return -EINVAL;
    int fd = socket(a.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int rc = connect_within(fd, &a, len);
    if (rc == 0) {
        struct timeval tv = {.tv_sec = HL_SEND_TIMEOUT_S};
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        rc = send_token(s, fd);
    }
    if (rc == 0)
        rc = send_all(fd, greeting, strlen(greeting));
    if (rc != 0) {
        close(fd);
        return rc;
    }
    return fd;
}

static int socket_open(hl_sink_t* s, int pid) {
    (void)pid; // the collector names the trace: the stream's INFO says whose it is
    int fd = sink_socket_connect(s, "");
    if (fd < 0)
        return fd;
    uint8_t header[HL_FILE_HEADER_SIZE];
    chunk_file_header(header);
    int rc = send_all(fd, header, sizeof header);
    if (rc != 0) {
        close(fd);
        return rc;
    }
    sink_fd_take(s, fd);
    return 0;
}

static int socket_write(hl_sink_t* s, const void* buf, size_t len) {
    if (!sink_fd_is_own(s)) {
        s->fd = -1; // the program closed it and the number is its own now: never touch it
        return -EBADF;
    }
    return send_all(s->fd, buf, len);
}

const hl_sink_ops_t hl_sink_socket = {
    .what = "collector",
    .open = socket_open,
    .write = socket_write,
    .close = sink_fd_close,
    .after_fork = sink_fd_close,
};
