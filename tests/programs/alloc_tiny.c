// alloc_tiny: thousands of 8- and 16-byte blocks, which an allocator with small size classes
// (jemalloc, mimalloc) packs several to 32 bytes: heaplens's live table must hold blocks that
// share a granule. 4096 blocks stay reachable from a global array (half of 8192, the other half
// freed), 10 blocks of 8 bytes are lost in leak_tiny, and one freed block is freed again in
// free_tiny_again.
#include <stdlib.h>

#include "common.h"

#define NKEPT 8192
static void* kept[NKEPT];
static volatile int step;

NOINLINE static void fill(void) {
    for (int i = 0; i < NKEPT; i++)
        kept[i] = malloc(i % 2 ? 16 : 8);
}

NOINLINE static void thin(void) {
    for (int i = 0; i < NKEPT; i += 2) {
        free(kept[i]);
        kept[i] = NULL;
    }
}

// Zeroed: tcmalloc and mimalloc leave their free-list link in a new block's first word, which
// would chain the lost blocks into one definite leak and nine reached through it.
NOINLINE static void leak_tiny(void) {
    for (int i = 0; i < 10; i++) {
        char* p = malloc(8);
        memset(p, 0, 8);
        keep(p);
    }
}

NOINLINE static void free_tiny_once(char* p) {
    step = 1;
    free(p);
    NO_TAIL_CALL();
}
NOINLINE static void free_tiny_again(char* p) {
    step = 2;
    free(p);
    NO_TAIL_CALL();
}

NOINLINE static void twice(void) {
    char* p = malloc(8);
    keep(p);
    free_tiny_once(p);
    free_tiny_again(p);
}

int main(void) {
    fill();
    thin();
    leak_tiny();
    twice();
    say("alloc_tiny done\n");
    scrub_stack();
    return 0;
}
