// stack_shapes: a binary recursion 4 levels deep that leaks one 24-byte block at each of its 16
// leaves, in order, so consecutive allocations share most of their callers. Each leak has its
// own call path: 16 definitely lost records, each stack leak_at_leaf + 4 x descend + main.
// Tests that reusing the outer frames of the previous stack never mixes paths up.
// `stack_shapes LEVELS` recurses LEVELS deep (2^LEVELS distinct paths, each allocating once) and
// frees every block but 16, spread evenly: enough stacks to make the agent's table grow.
#include <stdlib.h>

#include "common.h"

static int keep_every = 1; // paths that leak: multiples of this

NOINLINE static void leak_at_leaf(int path) {
    char* p = malloc(24);
    p[0] = (char)path;
    if (path % keep_every == 0)
        keep(p);
    else
        free(p);
}

NOINLINE static void descend(int depth, int path) {
    if (depth == 0) {
        leak_at_leaf(path);
        return;
    }
    descend(depth - 1, path * 2);      // left
    descend(depth - 1, path * 2 + 1);  // right
    __asm__ volatile("" ::: "memory"); // no tail call: every level keeps its frame
}

int main(int argc, char** argv) {
    int levels = argc > 1 ? atoi(argv[1]) : 4;
    if (levels < 4 || levels > 24)
        return 2;
    keep_every = 1 << (levels - 4);
    descend(levels, 0);
    scrub_stack();
    return 0;
}
