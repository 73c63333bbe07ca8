// stale_tree: a tree of 127 nodes of 32 bytes hangs from a global; then the left subtree of
// every node on the right spine is cut off, one at a time, each counted by a recursive walk just
// before it is cut (the walk leaves copies of its nodes' pointers in dead frames). memcheck: each
// cut subtree is one block definitely lost with its descendants indirectly lost: 6 subtrees of
// 63, 31, 15, 7, 3, 1 nodes: 6 definite (192 B), 114 indirect (3648 B); the spine of 7 nodes
// (224 B) still reachable.
#include <stdlib.h>

#include "common.h"

struct node {
    struct node* kid[2];
    long value[2];
};

struct node* root; // global: the tree is reachable from here

NOINLINE static struct node* build(int depth) {
    if (depth == 0)
        return NULL;
    struct node* n = malloc(sizeof *n);
    n->value[0] = depth;
    n->kid[0] = build(depth - 1);
    n->kid[1] = build(depth - 1);
    return n;
}

NOINLINE static long count(const struct node* n) {
    return n ? 1 + count(n->kid[0]) + count(n->kid[1]) : 0;
}

int main(void) {
    root = build(7);
    long cut = 0;
    for (struct node* n = root; n; n = n->kid[1]) {
        cut += count(n->kid[0]);
        n->kid[0] = NULL;
    }
    say_num("stale_tree cut ", cut);
    return 0;
}
