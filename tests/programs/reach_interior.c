// reach_interior: the only pointer to a 64-byte block (made in make_interior_only) points 8
// bytes inside it: possibly lost, 64 B. A second block (make_start_pointer, 32 B) has a
// pointer to its start: still reachable.
#include <stdlib.h>

#include "common.h"

char* interior_ref;
char* start_ref;

NOINLINE static void make_interior_only(void) {
    char* p = malloc(64);
    p[0] = 1;
    interior_ref = p + 8;
}

NOINLINE static void make_start_pointer(void) {
    start_ref = malloc(32);
    start_ref[0] = 2;
}

int main(void) {
    make_interior_only();
    make_start_pointer();
    scrub_stack();
    say("reach_interior done\n");
    return 0;
}
