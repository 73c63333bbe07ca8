// exit_abort: leaks 400 bytes in leak_before_abort, then abort(): dies of SIGABRT.
#include <stdlib.h>

#include "common.h"

NOINLINE static void leak_before_abort(void) {
    char* p = malloc(400);
    p[0] = 1;
    keep(p);
}

NOINLINE static void call_abort(void) {
    say("exit_abort: abort()\n");
    abort();
}

int main(void) {
    leak_before_abort();
    scrub_stack();
    call_abort();
    return 0;
}
