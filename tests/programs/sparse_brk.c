// sparse_brk: takes 64 MiB of heap at once with sbrk and touches one page of it, as a program
// with a large, sparsely used arena does; sleeps so that heaplens's writer passes several
// times, then prints how much of its memory is resident ("vmrss_kb N"). run.sh compares that
// with a run without heaplens: the writer makes a rising heap present ahead of the program
// (live.c), at most a sixteenth of its growth, never the whole 64 MiB.
#define _DEFAULT_SOURCE
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define SPARSE (64l << 20)

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int main(void) {
    free(malloc(100)); // the heap exists, and heaplens's writer has run before the jump
    sleep_ms(50);
    char* at = sbrk(SPARSE);
    if (at == (void*)-1)
        return 2;
    at[SPARSE / 2] = 1; // one page of the 64 MiB
    sleep_ms(150);
    say_num("vmrss_kb ", self_status_kb("VmRSS:"));
    return 0;
}
