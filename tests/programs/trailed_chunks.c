// trailed_chunks: for blocks of a few sizes under 256 bytes, prints the size of the glibc chunk
// that holds each ("SIZE CHUNK" lines), read from glibc's size word just before the block. Under
// heaplens with its defaults such a block keeps its record in its chunk's last word, after the
// block and its 8 guard bytes (live_header.c: trailers), and its pointer is glibc's own: run.sh
// checks that heaplens asks glibc for what fills the chunk exactly, and, with trailers off, for
// the block and its guard only. A block of 8 bytes is also released twice: the report must name
// where it was first released, which only the releasing thread's history keeps once its trailer
// is the allocator's again.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static const size_t sizes[] = {0, 1, 8, 9, 16, 24, 25, 32, 40, 100, 200};

// Two functions the compiler neither merges (identical bodies are) nor calls free from by a jump.
static volatile int releases;
static __attribute__((noinline)) void release_first(void* p) {
    free(p);
    releases = 1;
}
static __attribute__((noinline)) void release_again(void* p) {
    free(p);
    releases = 2;
}

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
        memcpy(&word, (char*)blocks[i] - sizeof word, sizeof word);
        printf("%zu %zu\n", sizes[i], word & ~(size_t)7);
    }
    fflush(stdout);
    for (int i = 0; i < N; i++)
        free(blocks[i]);
    void* twice = malloc(8);
    release_first(twice);
    release_again(twice); // heaplens reports it and does not pass it on
    return 0;
}
