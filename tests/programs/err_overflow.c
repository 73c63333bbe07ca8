// err_overflow: two 1-byte writes past the end of 20-byte blocks (inside the allocator's slack,
// so harmless without heaplens guards).
//   overflow_then_free: block overflowed, then freed -> overflow found at free (stack in
//                       release_overflowed)
//   overflow_kept:      block overflowed and kept in a global -> overflow found at exit
// A third block, write_in_bounds, writes its last byte only: no error.
#include <stdlib.h>

#include "common.h"

char* kept; // not static: gcc drops a malloc whose block is never read

NOINLINE static char* overflow_then_free(void) {
    char* p = malloc(20);
    volatile int n = 20;
    p[n] = 'x'; // one past the end
    return p;
}
NOINLINE static void release_overflowed(char* p) {
    free(p);
    NO_TAIL_CALL();
}
NOINLINE static void overflow_kept(void) {
    char* p = malloc(20);
    volatile int n = 20;
    p[n] = 'y';
    kept = p;
}
NOINLINE static void write_in_bounds(void) {
    char* p = malloc(20);
    volatile int n = 19;
    p[n] = 'z';
    keep(p);
    free(p);
}

int main(void) {
    release_overflowed(overflow_then_free());
    overflow_kept();
    write_in_bounds();
    say("err_overflow survived\n");
    return 0;
}
