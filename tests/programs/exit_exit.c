// exit_exit: leaks 200 bytes in leak_before_exit, then exit(4) from a nested function.
#include <stdlib.h>

#include "common.h"

NOINLINE static void leak_before_exit(void) {
    char* p = malloc(200);
    p[0] = 1;
    keep(p);
}

NOINLINE static void call_exit_deep(int code) {
    say("exit_exit: exit(4)\n");
    exit(code);
}

int main(void) {
    leak_before_exit();
    scrub_stack();
    call_exit_deep(4);
    return 0;
}
