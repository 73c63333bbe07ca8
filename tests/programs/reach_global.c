// reach_global: blocks reachable from globals are still reachable, not leaks.
//   make_global_block:  123 B, pointed to by a global
//   make_global_chain:  a 40 B head in a global pointing to a 77 B tail (reachable through it)
//   leak_unreachable:   99 B, lost (the only definite leak)
#include <stdlib.h>

#include "common.h"

struct head {
    char* tail;
    char pad[32];
};

static char* global_block;
struct head* global_chain;

NOINLINE static void make_global_block(void) {
    global_block = malloc(123);
    global_block[0] = 1;
}

NOINLINE static char* make_chain_tail(void) {
    char* t = malloc(77);
    t[0] = 2;
    return t;
}

NOINLINE static void make_global_chain(void) {
    struct head* h = malloc(sizeof *h);
    h->tail = make_chain_tail();
    global_chain = h;
}

NOINLINE static void leak_unreachable(void) {
    char* p = malloc(99);
    p[0] = 3;
    keep(p);
}

int main(void) {
    make_global_block();
    make_global_chain();
    leak_unreachable();
    scrub_stack();
    say("reach_global done\n");
    return global_block[0] == 1 ? 0 : 1;
}
