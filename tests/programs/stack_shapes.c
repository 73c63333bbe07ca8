// stack_shapes: a binary recursion 4 levels deep that leaks one 24-byte block at each of its 16
// leaves, in order, so consecutive allocations share most of their callers. Each leak has its
// own call path: 16 definitely lost records, each stack leak_at_leaf + 4 x descend + main.
// Tests that reusing the outer frames of the previous stack never mixes paths up.
#include <stdlib.h>

#include "common.h"

NOINLINE static void leak_at_leaf(int path) {
    char* p = malloc(24);
    p[0] = (char)path;
    keep(p);
}

NOINLINE static void descend(int depth, int path) {
    if (depth == 0) {
        leak_at_leaf(path);
        return;
    }
    descend(depth - 1, path * 2);     // left
    descend(depth - 1, path * 2 + 1); // right
    __asm__ volatile("" ::: "memory"); // no tail call: every level keeps its frame
}

int main(void) {
    descend(4, 0);
    scrub_stack();
    return 0;
}
