// headed_chunks: for blocks of a few sizes, prints the size of the glibc chunk that holds each
// ("SIZE CHUNK" lines). Under heaplens with its defaults a block of malloc carries the agent's
// 16-byte header, so glibc's chunk begins 16 bytes before the block and its size word is the
// one 24 bytes before it (run.sh checks that heaplens asks glibc for what fills the chunk
// exactly). Natively that word is inside the chunk before; the program makes no use of it.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static const size_t sizes[] = {0, 1, 8, 9, 24, 25, 32, 40, 100, 1000, 4000};

int main(void) {
    enum { N = sizeof sizes / sizeof sizes[0] };
    void* blocks[N];
    for (int i = 0; i < N; i++) {
        blocks[i] = malloc(sizes[i]);
        if (!blocks[i])
            return 2;
        memset(blocks[i], 0x5a, sizes[i]);
    }
    for (int i = 0; i < N; i++) {
        size_t word;
        memcpy(&word, (char*)blocks[i] - 24, sizeof word);
        printf("%zu %zu\n", sizes[i], word & ~(size_t)7);
    }
    for (int i = 0; i < N; i++)
        free(blocks[i]);
    return 0;
}
