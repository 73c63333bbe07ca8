// churn_random: 200,000 malloc/free pairs of pseudo-random sizes (1..4000 bytes) over 1024
// slots released in random order: a trace that compresses poorly (a few bytes per call), for
// the tests that must fill something with it (a small disk). Frees everything at the end.
// Usage: churn_random [DIR]: with DIR, the second half of the pairs begins once DIR/go exists
// (remote_sink.sh: a collector that leaves while the program waits, however late it was run on
// a loaded machine, so that the second half is traced after the switch to a local file).
#include <stdint.h>
#include <stdlib.h>

#include "common.h"

#define NSLOTS 1024
static void* slots[NSLOTS];

int main(int argc, char** argv) {
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < 200000; i++) {
        if (i == 100000 && argc > 1)
            wait_for_go(argv[1]);
        churn_random_pair(&x, slots, NSLOTS);
    }
    for (int k = 0; k < NSLOTS; k++)
        free(slots[k]);
    say("churn_random done\n");
    return 0;
}
