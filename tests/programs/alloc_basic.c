// alloc_basic: malloc, calloc and free with known counts and sizes, one leak per function.
//   malloc: 10 x 100 B freed, then 1 x 1001 B lost (leak_via_malloc)
//   calloc: 5 x (10 x 30) B freed, then 1 x (7 x 11) B lost (leak_via_calloc)
// calls: malloc 11, calloc 6, free 15; allocations 17, frees 15; bytes 3578; peak 2501.
#include <stdlib.h>

#include "common.h"

static void* slots[10];

NOINLINE static void malloc_ten(void) {
    for (int i = 0; i < 10; i++) {
        char* p = malloc(100);
        p[0] = (char)i;
        p[99] = (char)i;
        slots[i] = p;
    }
}

NOINLINE static void free_slots(int n) {
    for (int i = 0; i < n; i++) {
        free(slots[i]);
        slots[i] = NULL;
    }
}

NOINLINE static void leak_via_malloc(void) {
    char* p = malloc(1001);
    p[0] = 1;
    p[1000] = 2;
    keep(p);
}

NOINLINE static int calloc_five(void) {
    int bad = 0;
    for (int i = 0; i < 5; i++) {
        unsigned char* p = calloc(10, 30);
        for (int j = 0; j < 300; j++)
            bad |= p[j];
        slots[i] = p;
    }
    return bad;
}

NOINLINE static void leak_via_calloc(void) {
    char* p = calloc(7, 11);
    p[76] = 3;
    keep(p);
}

int main(void) {
    malloc_ten();    // live 1000
    free_slots(10);  // live 0
    leak_via_malloc(); // live 1001
    int bad = calloc_five(); // live 2501: the peak
    free_slots(5);   // live 1001
    leak_via_calloc(); // live 1078
    scrub_stack();
    say(bad ? "calloc memory not zeroed\n" : "alloc_basic done\n");
    return bad;
}
