// err_double_free: a 32-byte block freed twice. heaplens must report one double_free (stack in
// free_it_again, block allocated in alloc_for_double_free) and keep the program alive.
// `err_double_free deep`: the block is allocated and first freed 30 calls deep, so a test can
// see how many frames the allocation and release stacks keep.
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

static volatile int depth_bias; // keeps each level a real call

NOINLINE static char* deep_alloc(int levels) {
    if (levels > 0) {
        char* p = deep_alloc(levels - 1 + depth_bias);
        NO_TAIL_CALL();
        return p;
    }
    return alloc_for_double_free();
}

NOINLINE static void deep_free(char* p, int levels) {
    if (levels > 0)
        deep_free(p, levels - 1 + depth_bias);
    else
        free_it_once(p);
    NO_TAIL_CALL();
}

int main(int argc, char** argv) {
    int deep = argc > 1 && !strcmp(argv[1], "deep");
    char* p = deep ? deep_alloc(30) : alloc_for_double_free();
    if (deep)
        deep_free(p, 30);
    else
        free_it_once(p);
    free_it_again(p); // no allocation in between: the block is still the freed one
    say("err_double_free survived\n");
    return 0;
}
