// SPDX-License-Identifier: MIT
// stdio_exit.c - streams left open at exit: stdout written through its buffer (glibc allocates
// it), a file opened and written but never closed (its FILE and its buffer), and a stream given
// a buffer of the program's own (setvbuf). glibc's __libc_freeres, which memcheck runs before
// its leak check, releases the buffers glibc allocated, not the FILE nor the program's buffer:
// memcheck reports the FILE (and the program's buffer, a global here: not a heap block) still
// reachable and nothing else. Usage: stdio_exit DIR (where the file is made)
#include "common.h"

static char own_buffer[512];

int main(int argc, char** argv) {
    if (argc < 2)
        return 2;
    char path[4096];
    snprintf(path, sizeof path, "%s/stdio_exit.out", argv[1]);
    FILE* f = fopen(path, "w");
    if (!f)
        return 1;
    fprintf(f, "kept open\n");
    FILE* g = fopen(path, "r");
    if (!g || setvbuf(g, own_buffer, _IOFBF, sizeof own_buffer) != 0)
        return 1;
    char line[64];
    keep(fgets(line, sizeof line, g));
    printf("to stdout\n");
    return 0;
}
