// daemon_fds: behaves like a daemon that closes every descriptor above stderr and opens its own
// log, which then gets the lowest free number - the one the trace was using. It allocates
// before and after (leaking 111 and 222 bytes) and writes one line to its log. The log must
// hold exactly that line (no trace bytes), and the trace must cover both halves.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

NOINLINE static void* leak_daemon(size_t n) {
    char* p = malloc(n);
    memset(p, 1, n);
    return p;
}

int main(int argc, char** argv) {
    if (argc < 2)
        return 2;
    for (int i = 0; i < 20000; i++)
        free(leak_daemon(64));
    leak_daemon(111);
    for (int fd = 3; fd < 1024; fd++)
        close(fd);
    int log = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (log < 0)
        return 3;
    for (int i = 0; i < 20000; i++)
        free(leak_daemon(64));
    leak_daemon(222);
    usleep(300000); // the writer thread flushes chunks meanwhile
    dprintf(log, "daemon log line\n");
    close(log);
    scrub_stack();
    return 0;
}
