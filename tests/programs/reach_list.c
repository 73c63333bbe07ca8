// reach_list: a lost singly linked list of 10 nodes of 32 bytes, built in build_lost_list:
// the head is definitely lost (32 B), the 9 others indirectly lost (288 B).
#include <stdlib.h>

#include "common.h"

struct node {
    struct node* next;
    char payload[24];
};

NOINLINE static struct node* new_node(struct node* next) {
    struct node* n = malloc(sizeof *n);
    n->next = next;
    n->payload[0] = 'n';
    return n;
}

NOINLINE static void build_lost_list(void) {
    struct node* head = NULL;
    for (int i = 0; i < 10; i++)
        head = new_node(head);
    keep(head);
}

int main(void) {
    build_lost_list();
    scrub_stack();
    say("reach_list done\n");
    return 0;
}
