// sites_many: 600,000 allocation sites, each used once. A call path is 10 calls, each through one
// of two functions (1,024 stacks, 600 of them used), and at the end of each blocks of 1 to 1,000
// bytes are made and freed at once:
// every (size, stack) pair is a site of its own, as in a program whose allocations all differ.
// The trace's writer numbers sites so that a release names its block's site in a small number;
// here numbering gains nothing, and its table stops at a share of the program's memory
// (sites.c). Prints the peak RSS ("vmhwm_kb N"): run.sh compares it with a run without
// heaplens.
#include <stdlib.h>

#include "common.h"

#define PATHS 600
#define LEVELS 10
#define SIZES 1000

NOINLINE static void churn_sizes(void) {
    for (size_t s = 1; s <= SIZES; s++) {
        void* p = malloc(s);
        keep(p);
        free(p);
    }
}

NOINLINE static void left(unsigned path, int level);
NOINLINE static void right(unsigned path, int level);

// Level `level` of the path: the function its bit names calls the next level.
static void step(unsigned path, int level) {
    if (level == LEVELS)
        churn_sizes();
    else if ((path >> level) & 1)
        right(path, level + 1);
    else
        left(path, level + 1);
}
NOINLINE static void left(unsigned path, int level) {
    step(path, level);
    keep(&path); // not a tail call: each level a frame of its own
}
NOINLINE static void right(unsigned path, int level) {
    step(path, level);
    keep(&level);
}

int main(void) {
    for (unsigned path = 0; path < PATHS; path++)
        step(path, 0);
    say_num("vmhwm_kb ", self_status_kb("VmHWM:"));
    return 0;
}
