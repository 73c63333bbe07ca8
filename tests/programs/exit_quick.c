// exit_quick: leaks 700 bytes in leak_before_quick_exit, keeps 16,000 blocks of 64 bytes it frees
// in its at_quick_exit handler, then quick_exit(6): no atexit handlers, no destructors, and
// glibc's _exit reached by an internal call; the trace must still end with exit 6, every
// allocation, the handler's frees and the scan.
#include <stdlib.h>

#include "common.h"

#define KEPT 16000
static void* kept[KEPT];

NOINLINE static void leak_before_quick_exit(void) {
    char* p = malloc(700);
    p[0] = 1;
    keep(p);
}

static void release_kept(void) {
    for (int i = 0; i < KEPT; i++)
        free(kept[i]);
    say("exit_quick: handler freed the kept blocks\n");
}

int main(void) {
    at_quick_exit(release_kept);
    for (int i = 0; i < KEPT; i++)
        kept[i] = malloc(64);
    leak_before_quick_exit();
    scrub_stack();
    quick_exit(6);
}
