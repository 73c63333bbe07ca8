// exit_return: leaks 100 bytes in leak_before_return, then main returns 3.
#include <stdlib.h>

#include "common.h"

NOINLINE static void leak_before_return(void) {
    char* p = malloc(100);
    p[0] = 1;
    keep(p);
}

int main(void) {
    leak_before_return();
    scrub_stack();
    say("exit_return: returning 3\n");
    return 3;
}
