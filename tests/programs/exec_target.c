// exec_target: leaks 222 B in exec_target_leak and returns the number in argv[1] (0 if none).
#include <stdlib.h>

#include "common.h"

NOINLINE static void exec_target_leak(void) {
    char* p = malloc(222);
    p[0] = 1;
    keep(p);
}

int main(int argc, char** argv) {
    exec_target_leak();
    scrub_stack();
    say("exec_target running\n");
    return argc > 1 ? atoi(argv[1]) : 0;
}
