// err_double_free: a 32-byte block freed twice. heaplens must report one double_free (stack in
// free_it_again, block allocated in alloc_for_double_free) and keep the program alive.
#include <stdlib.h>

#include "common.h"

NOINLINE static char* alloc_for_double_free(void) {
    char* p = malloc(32);
    p[0] = 1;
    return p;
}
static volatile int step; // distinct bodies: gcc would merge identical functions into one

NOINLINE static void free_it_once(char* p) {
    step = 1;
    free(p);
    NO_TAIL_CALL();
}
NOINLINE static void free_it_again(char* p) {
    step = 2;
    free(p);
    NO_TAIL_CALL();
}

int main(void) {
    char* p = alloc_for_double_free();
    free_it_once(p);
    free_it_again(p); // no allocation in between: the block is still the freed one
    say("err_double_free survived\n");
    return 0;
}
