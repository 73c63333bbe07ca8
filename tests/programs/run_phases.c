// run_phases: six phases 40 ms apart; in each, 5,000 blocks made and freed through two call
// sites, 10 blocks of 48 bytes lost (definitely) and 5 of 64 kept in a global table (still
// reachable). The agent writes a chunk after each phase, so heaplens run reads the trace while
// the program runs (cli/run_follow.c), waiting between chunks, cut wherever the file ends then.
#include <stdlib.h>
#include <time.h>

#include "common.h"

#define PHASES 6
#define CHURN 5000
#define LOST 10
#define KEPT 5

static void* kept[PHASES * KEPT];

// n blocks made and freed, of sizes base, base + step ... (spread of them); each call of it in
// main is a call site of its own.
NOINLINE static void churn(int n, size_t base, int spread, size_t step) {
    for (int i = 0; i < n; i++) {
        char* p = malloc(base + (size_t)(i % spread) * step);
        p[0] = (char)i;
        keep(p);
        free(p);
    }
    NO_TAIL_CALL();
}

NOINLINE static void lose_some(void) {
    for (int i = 0; i < LOST; i++) {
        char* p = malloc(48);
        p[0] = (char)i;
        keep(p);
    }
}

NOINLINE static void keep_some(int phase) {
    for (int i = 0; i < KEPT; i++)
        kept[phase * KEPT + i] = malloc(64);
}

int main(void) {
    for (int phase = 0; phase < PHASES; phase++) {
        churn(CHURN / 2, 24, 7, 8);    // small blocks (the direct map)
        churn(CHURN / 2, 300, 5, 100); // large ones (with headers)
        lose_some();
        keep_some(phase);
        struct timespec ts = {0, 40 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    scrub_stack();
    return kept[0] ? 0 : 1;
}
