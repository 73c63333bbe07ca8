// stale_loop KIND DEPTH: 1000 allocations of one byte in a loop, DEPTH calls below main, each
// pointer overwritten by the next one; nothing frees them. memcheck: 1000 blocks definitely lost
// (posix_memalign and strdup as well: one byte each, strdup of ""). No stack is scrubbed: the
// last pointers' copies stay in dead frames and registers, as in any program, and must not keep
// their blocks alive. KIND: malloc, calloc, posix_memalign, strdup.
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define COUNT 1000

NOINLINE static void loop(int kind) {
    for (int i = 0; i < COUNT; i++) {
        void* p = NULL;
        switch (kind) {
        case 0:
            p = malloc(1);
            break;
        case 1:
            p = calloc(1, 1);
            break;
        case 2:
            if (posix_memalign(&p, 16, 1) != 0)
                p = NULL;
            break;
        default:
            p = strdup("");
            break;
        }
        keep(p);
    }
}

NOINLINE static void descend(int kind, int depth) {
    if (depth > 0)
        descend(kind, depth - 1);
    else
        loop(kind);
    NO_TAIL_CALL();
}

int main(int argc, char** argv) {
    static const char* const kinds[] = {"malloc", "calloc", "posix_memalign", "strdup"};
    int kind = 0;
    for (int k = 0; k < 4; k++)
        if (argc > 1 && strcmp(argv[1], kinds[k]) == 0)
            kind = k;
    descend(kind, argc > 2 ? atoi(argv[2]) : 0);
    say("stale_loop done\n");
    return 0;
}
