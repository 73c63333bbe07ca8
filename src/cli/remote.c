// SPDX-License-Identifier: MIT
// remote.c - the token file and tcp:HOST:PORT, for the collector and the shell (remote.h).
#define _GNU_SOURCE
#include "remote.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

int remote_read_token(const char* who, const char* path, char out[REMOTE_TOKEN_MAX]) {
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        cli_error("%s: --token %s: %s", who, path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077)) {
        cli_error("%s: --token %s must be a file of yours that nobody else may read (0600)", who,
                  path);
        close(fd);
        return -1;
    }
    ssize_t n = read(fd, out, REMOTE_TOKEN_MAX - 1);
    close(fd);
    while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == '\r' || out[n - 1] == ' '))
        n--;
    if (n <= 0) {
        cli_error("%s: --token %s is empty", who, path);
        return -1;
    }
    out[n] = 0;
    return (int)n;
}

int remote_split_tcp(const char* spec, char* host, size_t host_cap, char* port, size_t port_cap) {
    const char* colon = strrchr(spec, ':');
    size_t hlen = colon ? (size_t)(colon - spec) : strlen(spec);
    if (hlen >= 2 && spec[0] == '[' && spec[hlen - 1] == ']') {
        spec++;
        hlen -= 2;
    }
    if (hlen >= host_cap || (colon && strlen(colon + 1) >= port_cap))
        return -1;
    if (hlen) {
        memcpy(host, spec, hlen);
        host[hlen] = 0;
    }
    if (colon && colon[1])
        strcpy(port, colon + 1);
    return 0;
}
