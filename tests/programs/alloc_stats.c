// alloc_stats.c - a heap glibc keeps after the program is done with it: 16 MiB in 16,384
// blocks of 1000 bytes, touched, then all released but the last one, which sits at the top of
// the heap and keeps glibc from giving the free chunks below it back. Sleeps between phases so
// that --allocator-stats samples each; exits with status 5 (heaplens must not change it).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BLOCKS 16384
#define BLOCK_SIZE 1000

static void pause_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

__attribute__((noinline)) static char** fill(void) {
    char** p = malloc(BLOCKS * sizeof *p);
    if (!p)
        exit(1);
    for (int i = 0; i < BLOCKS; i++) {
        p[i] = malloc(BLOCK_SIZE);
        if (!p[i])
            exit(1);
        memset(p[i], i & 0xff, BLOCK_SIZE);
    }
    return p;
}

int main(int argc, char** argv) {
    long hold = argc > 1 ? atol(argv[1]) : 300;
    char** p = fill();
    pause_ms(hold); // the peak: 16 MiB live
    for (int i = 0; i < BLOCKS - 1; i++)
        free(p[i]);
    pause_ms(hold); // 1000 bytes live, glibc holding the rest
    printf("alloc_stats ok %d\n", p[BLOCKS - 1][0] == (char)((BLOCKS - 1) & 0xff));
    free(p[BLOCKS - 1]);
    free(p);
    return 5;
}
