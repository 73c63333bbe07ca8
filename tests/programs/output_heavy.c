// output_heavy: writes about 1.3 MB to stdout and 100 KB to stderr, mixing buffered stdio,
// unbuffered stderr and raw write(2), with heap traffic in between. Deterministic; exits 0.
#include <stdio.h>
#include <stdlib.h>

#include "common.h"

NOINLINE static char* make_line(int i) {
    char* s = malloc(96);
    snprintf(s, 96, "line %06d: %08x abcdefghijklmnopqrstuvwxyz %d\n", i, (unsigned)(i * 2654435761u), i % 97);
    return s;
}

int main(void) {
    for (int i = 0; i < 20000; i++) {
        char* s = make_line(i);
        fputs(s, stdout);
        if (i % 10 == 0)
            fprintf(stderr, "err %d: %s", i, s);
        free(s);
        if (i % 1000 == 999) {
            fflush(stdout);
            say("-- raw write block --\n");
        }
    }
    printf("no newline at the end");
    return 0;
}
