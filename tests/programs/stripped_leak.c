// SPDX-License-Identifier: MIT
// stripped_leak: main calls lose, which loses one block of 33 bytes (malloc). The drop-in test
// strips a copy: without its symbols memcheck cuts each stack at the C library's start-up frame,
// which it names "(below main)", and the suppressions it writes end there.
#include "common.h"

NOINLINE static void lose(void) {
    char* p = malloc(33);
    keep(p);
    p[0] = 1;
}

int main(void) {
    lose();
    scrub_stack();
    return 0;
}
