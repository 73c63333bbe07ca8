// churn_random: 200,000 malloc/free pairs of pseudo-random sizes (1..4000 bytes) over 1024
// slots released in random order: a trace that compresses poorly (a few bytes per call), for
// the tests that must fill something with it (a small disk). Frees everything at the end.
#include <stdint.h>
#include <stdlib.h>

#include "common.h"

#define NSLOTS 1024
static void* slots[NSLOTS];

int main(void) {
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < 200000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        size_t k = (size_t)(x >> 40) % NSLOTS;
        free(slots[k]);
        slots[k] = malloc(1 + (size_t)(x % 4000));
        keep(slots[k]);
    }
    for (int k = 0; k < NSLOTS; k++)
        free(slots[k]);
    say("churn_random done\n");
    return 0;
}
