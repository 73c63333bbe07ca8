// SPDX-License-Identifier: MIT
// libc_own.c - a program that meets what glibc keeps to the end of the process: a locale, the
// user database (NSS), the time zone, an iconv conversion, a library loaded and unloaded, and
// stdout's buffer; with one block lost (40 bytes) and one kept in a global (24 bytes). memcheck
// has glibc release its own at exit (__libc_freeres) and reports only the program's two.
// Usage: libc_own [MODE]
//   (none)      ends through exit(): 2 blocks in use at exit, 64 bytes; as many frees as
//               allocations but those two.
//   underscore  writes to stdout's buffer without flushing it and ends through _exit: nothing
//               is written (as natively) and glibc releases nothing.
//   thread      a thread still waits when main calls exit(): glibc is not asked to release
//               anything (that thread could still use it); the program ends at once, status 0.
//   pipe        stdout a pipe nobody reads, written through its buffer: the flush at exit
//               raises SIGPIPE, which ends the program as it does natively (status 141).
//   clonevm F   a child made by clone(CLONE_VM) (a process sharing this memory) outlives main's
//               exit() by 300 ms, then writes the locale's codeset to file F: UTF-8, as
//               natively; glibc is not asked to release anything (the child still uses it).
#define _GNU_SOURCE // clone
#include <dlfcn.h>
#include <iconv.h>
#include <langinfo.h>
#include <locale.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>

#include "common.h"

void* kept; // reachable: a global of the program's

NOINLINE static void lose(void) {
    void* p = malloc(40);
    keep(p);
}

static char child_stack[64 * 1024] __attribute__((aligned(16)));

static int outlive_parent(void* path) {
    struct timespec ts = {0, 300 * 1000000L}; // main's exit() has run by then
    nanosleep(&ts, NULL);
    const char* codeset = nl_langinfo(CODESET);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
        if (write(fd, codeset, strlen(codeset)) < 0)
            codeset = NULL;
        close(fd);
    }
    return 0;
}

static void* wait_forever(void* arg) {
    (void)arg;
    for (;;)
        pause();
    return NULL;
}

// What glibc allocates and keeps: each keeps its data to the end of the process.
NOINLINE static int use_glibc(void) {
    if (!setlocale(LC_ALL, "C.UTF-8") && !setlocale(LC_ALL, "C.utf8"))
        setlocale(LC_ALL, "");
    struct passwd* pw = getpwuid(0);
    keep(pw);
    time_t t = 86400;
    char when[64];
    strftime(when, sizeof when, "%c %Z", localtime(&t));
    keep(when);
    iconv_t cd = iconv_open("UTF-16LE", "UTF-8");
    if (cd != (iconv_t)-1) {
        char in[] = "abc", out[16];
        char *ip = in, *op = out;
        size_t il = 3, ol = sizeof out;
        iconv(cd, &ip, &il, &op, &ol);
        iconv_close(cd);
    }
    void* lib = dlopen("libm.so.6", RTLD_NOW);
    if (!lib)
        return -1;
    keep(dlsym(lib, "cos"));
    dlclose(lib);
    return 0;
}

int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "pipe")) {
        int fds[2];
        if (pipe(fds) != 0 || dup2(fds[1], 1) < 0)
            return 2;
        close(fds[0]);
        close(fds[1]);
        signal(SIGPIPE, SIG_DFL);
    }
    if (use_glibc() != 0)
        return 1;
    kept = malloc(24);
    lose();
    scrub_stack();
    // Through stdout's buffer (glibc allocates it): flushed by exit, not by _exit.
    if (setvbuf(stdout, NULL, _IOFBF, BUFSIZ) != 0)
        return 1;
    printf("written through the buffer");
    if (!strcmp(mode, "underscore"))
        _exit(0);
    if (!strcmp(mode, "thread")) {
        pthread_t th;
        if (pthread_create(&th, NULL, wait_forever, NULL) != 0)
            return 1;
    }
    if (!strcmp(mode, "clonevm")) {
        char* top = child_stack + sizeof child_stack;
        if (argc < 3 || clone(outlive_parent, top, CLONE_VM | SIGCHLD, argv[2]) < 0)
            return 1;
    }
    exit(0);
}
