// reach_interior: blocks known only through interior pointers.
//   make_interior_only:  64 B; the only pointer points 16 bytes inside: possibly lost. (16, not
//                        8: memcheck's heuristics read a pointer to offset 8 as a new[] array
//                        start or a length prefix when the first word fits, see below.)
//   make_start_pointer:  32 B with a pointer to its start: still reachable.
//   make_newarray_like:  72 B laid out like new[] of 8 objects of 8 bytes with a destructor:
//                        first word 8, pointer to offset 8. memcheck's "newarray" heuristic
//                        (on by default) counts that as a start pointer: still reachable.
#include <stdlib.h>
#include <string.h>

#include "common.h"

char* interior_ref;
char* start_ref;
char* newarray_ref;

NOINLINE static void make_interior_only(void) {
    char* p = malloc(64);
    memset(p, 0x11, 64); // no word of it looks like a count or a length
    interior_ref = p + 16;
}

NOINLINE static void make_start_pointer(void) {
    start_ref = malloc(32);
    start_ref[0] = 2;
}

NOINLINE static void make_newarray_like(void) {
    char* p = malloc(72);
    size_t count = 8;
    memcpy(p, &count, sizeof count);
    memset(p + 8, 0x22, 64);
    newarray_ref = p + 8;
}

int main(void) {
    make_interior_only();
    make_start_pointer();
    make_newarray_like();
    scrub_stack();
    say("reach_interior done\n");
    return 0;
}
