// signals_view: what a program sees of its signal dispositions must not change under heaplens
// (which handles fatal signals to finish its trace). Prints what sigaction() and signal()
// report for SIGINT, SIGTERM and SIGSEGV, runs a handler of its own on SIGUSR1, then leaks 77
// bytes and dies of SIGTERM after setting it back to the default.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

static void on_usr1(int sig) {
    (void)sig;
    say("usr1 handled\n");
}

static const char* name(void (*h)(int)) {
    return h == SIG_DFL ? "default" : h == SIG_IGN ? "ignore" : "handler";
}

NOINLINE static void* leak_before_term(void) {
    char* p = malloc(77);
    memset(p, 7, 77);
    keep(p);
    return p;
}

int main(void) {
    int sigs[] = {SIGINT, SIGTERM, SIGSEGV};
    for (int i = 0; i < 3; i++) {
        struct sigaction old;
        sigaction(sigs[i], NULL, &old);
        printf("sigaction %d: %s\n", sigs[i], name(old.sa_handler));
    }
    void (*prev)(int) = signal(SIGINT, SIG_IGN);
    printf("signal SIGINT was: %s\n", name(prev));
    prev = signal(SIGINT, prev);
    printf("signal SIGINT now back from: %s\n", name(prev));
    signal(SIGUSR1, on_usr1);
    raise(SIGUSR1);
    fflush(stdout);
    leak_before_term();
    signal(SIGTERM, SIG_DFL);
    scrub_stack();
    raise(SIGTERM);
    say("not reached\n");
    return 0;
}
