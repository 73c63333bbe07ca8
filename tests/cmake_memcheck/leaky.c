// leaky: two definitely lost blocks from two places, one still reachable.
#include <stdlib.h>
#include <string.h>

static void* kept;

__attribute__((noinline)) static void lose_one(size_t n) {
    char* p = malloc(n);
    memset(p, 1, n);
    p = NULL;
}

__attribute__((noinline)) static void lose_other(void) {
    int* q = calloc(4, sizeof *q);
    q[0] = 1;
    q = NULL;
}

int main(void) {
    lose_one(40);
    lose_other();
    kept = malloc(16);
    char scrub[4096];
    memset(scrub, 0, sizeof scrub); // no stale copy of a lost pointer below main
    __asm__ volatile("" : : "r"(scrub) : "memory");
    return 0;
}
