// dropin_mixed: errors and leaks from distinct places, for heaplens memcheck's suppressions
// (tests/integration/dropin.sh). Definitely lost: 100 bytes in leak_alpha (malloc), 3 blocks of
// 48 bytes in leak_beta (calloc), 1 block of 12 bytes by libc's strdup called in leak_in_libc;
// one double free in free_twice (a 24-byte block from malloc). Exits 3.
#include <stdlib.h>
#include <string.h>

#include "common.h"

NOINLINE static void leak_alpha(void) {
    char* p = malloc(100);
    keep(p);
    p[0] = 1;
}

NOINLINE static void leak_beta(void) {
    for (int i = 0; i < 3; i++) {
        char* p = calloc(1, 48);
        keep(p);
    }
}

NOINLINE static void leak_in_libc(void) {
    char* s = strdup("eleven char");
    keep(s);
}

NOINLINE static void free_twice(void) {
    char* p = malloc(24);
    keep(p);
    free(p);
    free(p);
    NO_TAIL_CALL();
}

int main(void) {
    leak_alpha();
    leak_beta();
    leak_in_libc();
    free_twice();
    scrub_stack();
    say("dropin_mixed done\n");
    return 3;
}
