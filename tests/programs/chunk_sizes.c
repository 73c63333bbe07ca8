// chunk_sizes BEFORE [twice]: for blocks of a few sizes, prints the size of the glibc chunk that
// holds each ("SIZE CHUNK" lines), read from glibc's size word BEFORE bytes before the block.
// Under heaplens with guards on, a block of 256 bytes or more (every block, with
// HEAPLENS_HEADER_MIN=0) carries the agent's 16-byte header, so its chunk begins 16 bytes before
// the block and the size word is 24 bytes before it; a smaller one keeps its record in its
// chunk's last word (live_header.c: trailers) and the word is the 8 bytes before it. run.sh
// checks that heaplens asks glibc for what fills the chunk exactly. Natively the word 24 bytes
// before is inside the chunk before; the program makes no use of it. With "twice", a block of 8
// bytes is then released twice: heaplens's report must name where it was first released, which
// only the releasing thread's history keeps once the block's record is the allocator's again.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static const size_t sizes[] = {0, 1, 8, 9, 16, 24, 25, 32, 40, 100, 200, 1000, 4000};

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

int main(int argc, char** argv) {
    enum { N = sizeof sizes / sizeof sizes[0] };
    if (argc < 2)
        return 2;
    size_t before = (size_t)atoi(argv[1]);
    void* blocks[N];
    for (int i = 0; i < N; i++) {
        blocks[i] = malloc(sizes[i]);
        if (!blocks[i])
            return 2;
        memset(blocks[i], 0x5a, sizes[i]);
    }
    for (int i = 0; i < N; i++) {
        size_t word;
        memcpy(&word, (char*)blocks[i] - before, sizeof word);
        printf("%zu %zu\n", sizes[i], word & ~(size_t)7);
    }
    fflush(stdout);
    for (int i = 0; i < N; i++)
        free(blocks[i]);
    if (argc > 2 && strcmp(argv[2], "twice") == 0) {
        void* twice = malloc(8);
        release_first(twice);
        release_again(twice); // heaplens reports it and does not pass it on
    }
    return 0;
}
