// exit_underscore: leaks 300 bytes in leak_before_underscore_exit, then _exit(5): no atexit
// handlers, no destructors, yet the trace must end with exit 5.
#include <stdlib.h>

#include "common.h"

NOINLINE static void leak_before_underscore_exit(void) {
    char* p = malloc(300);
    p[0] = 1;
    keep(p);
}

NOINLINE static void call_underscore_exit(int code) {
    say("exit_underscore: _exit(5)\n");
    _exit(code);
}

int main(void) {
    leak_before_underscore_exit();
    scrub_stack();
    call_underscore_exit(5);
    return 0;
}
