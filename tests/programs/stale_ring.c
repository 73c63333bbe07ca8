// stale_ring: 8 rings of 5 blocks of 40 bytes each, every ring built and its only outside pointer
// dropped (each node points to the next, the last back to the first). memcheck: each ring is one
// block definitely lost (40 B) and four indirectly lost (160 B): 8 definite (320 B), 32 indirect
// (1280 B).
#include <stdlib.h>

#include "common.h"

struct node {
    struct node* next;
    char payload[32];
};

NOINLINE static struct node* ring(int n) {
    struct node* first = malloc(sizeof *first);
    struct node* last = first;
    for (int i = 1; i < n; i++) {
        struct node* x = malloc(sizeof *x);
        x->payload[0] = (char)i;
        last->next = x;
        last = x;
    }
    last->next = first;
    return first;
}

int main(void) {
    for (int r = 0; r < 8; r++)
        keep(ring(5));
    say("stale_ring done\n");
    return 0;
}
