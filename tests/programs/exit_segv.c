// exit_segv: leaks 500 bytes in leak_before_segv, then writes to address 16: dies of
// SIGSEGV.
#include <stdlib.h>

#include "common.h"

NOINLINE static void leak_before_segv(void) {
    char* p = malloc(500);
    p[0] = 1;
    keep(p);
}

NOINLINE static void crash_with_segv(void) {
    say("exit_segv: writing to address 16\n");
    volatile int* volatile nowhere = (volatile int*)16; // an unmapped page, not provably NULL
    *nowhere = 1;
}

int main(void) {
    leak_before_segv();
    scrub_stack();
    crash_with_segv();
    return 0;
}
