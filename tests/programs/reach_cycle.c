// reach_cycle: a lost cycle of 3 nodes of 48 bytes (A -> B -> C -> A), built in
// build_lost_cycle. With memcheck's rules one block of the cycle is definitely lost (48 B) and
// the two it leads to are indirectly lost (96 B).
#include <stdlib.h>

#include "common.h"

struct node {
    struct node* next;
    char payload[40];
};

NOINLINE static struct node* new_cycle_node(void) {
    struct node* n = malloc(sizeof *n);
    n->next = NULL;
    n->payload[0] = 'c';
    return n;
}

NOINLINE static void build_lost_cycle(void) {
    struct node* a = new_cycle_node();
    struct node* b = new_cycle_node();
    struct node* c = new_cycle_node();
    a->next = b;
    b->next = c;
    c->next = a;
    keep(a);
}

int main(void) {
    build_lost_cycle();
    scrub_stack();
    say("reach_cycle done\n");
    return 0;
}
