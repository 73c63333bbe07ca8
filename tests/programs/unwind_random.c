// unwind_random: call chains of random depth (3 to 42 levels of one or two frames each, across
// the 12 frames a release keeps and the 32 of the default depth) through four kinds of frame in
// random order: plain ones, ones whose CFA comes from %rbp (alloca), ones that use %rbp as an
// ordinary register, and tail calls (no frame of their own). At each leaf, blocks are made and released in random
// patterns (releases after releases, tail-called releases one frame shallower than the one
// before), some freed twice (the report names their first release) and some kept to the end.
// Then a tree torn down by recursion, its frees after frees. Built without frame pointers:
// run.sh compares every allocation and release stack with the general unwinder's
// (HEAPLENS_UNWIND_CFI=0), and has the agent walk anew every stack it took from earlier walks
// (unwind_check). Usage: unwind_random [ROUNDS [SEED]].
#include <alloca.h>
#include <stdlib.h>

#include "common.h"

static unsigned seed = 12345;
static unsigned next_rand(void) {
    seed = seed * 1103515245u + 12345u;
    return (seed >> 16) & 0x7fff;
}

#define KEPT_MAX 64 // blocks kept across rounds, freed when this many are
static void* kept[KEPT_MAX];
static int nkept;

NOINLINE static void release(void* p) {
    free(p);
    NO_TAIL_CALL();
}
NOINLINE static void release_tail(void* p) {
    free(p); // a tail call: its stack is its caller's
}
NOINLINE static void release_both(void* a, void* b) {
    free(a);
    free(b); // a tail call, one frame shallower than the release before
}

NOINLINE static void leaf(int tag) {
    void* a = malloc(16 + (size_t)(tag & 7));
    void* b = malloc(24);
    keep(a);
    keep(b);
    switch (next_rand() % 6) {
    case 0:
        release(a);
        release_tail(b);
        break;
    case 1:
        release_both(a, b);
        if (next_rand() % 4 == 0)
            release(b); // freed twice: names the tail-called release
        break;
    case 2:
        release_tail(a);
        release(b);
        if (next_rand() % 4 == 0)
            release(a);
        break;
    case 3:
        if (next_rand() % 8 != 0) // else lost: its only pointer dies here
            free(a);
        free(b);
        break;
    default:
        if (nkept < KEPT_MAX)
            kept[nkept++] = a;
        else
            free(a);
        free(b);
        break;
    }
}

NOINLINE static void step(int left, int tag);
NOINLINE static void plain(int left, int tag) {
    step(left, tag * 3 + 1);
    NO_TAIL_CALL();
}
NOINLINE static void framed(int left, int tag) {
    char* pad = alloca(16 + (size_t)(next_rand() % 64));
    keep(pad);
    step(left, tag * 3 + 2);
    NO_TAIL_CALL();
}
NOINLINE static void rbp_used(int left, int tag) {
#if defined(__x86_64__)
    __asm__ volatile("xor %%ebp, %%ebp" : : : "rbp");
#endif
    step(left, tag * 3);
    NO_TAIL_CALL();
}
NOINLINE static void tail(int left, int tag) {
    step(left, tag * 5); // a tail call
}

NOINLINE static void step(int left, int tag) {
    if (left == 0) {
        leaf(tag);
        if (next_rand() % 3 == 0)
            leaf(tag + 1);
        return;
    }
    switch (next_rand() % 4) {
    case 0:
        plain(left - 1, tag);
        break;
    case 1:
        framed(left - 1, tag);
        break;
    case 2:
        rbp_used(left - 1, tag);
        break;
    default:
        tail(left - 1, tag);
        break;
    }
    NO_TAIL_CALL();
}

// A binary tree made and torn down by recursion, 14 levels (16,383 nodes): each node's key is
// freed, then the node by a tail call, one frame shallower than the release before, which was
// cut at 12 frames; every such walk goes on from where that one stopped.
struct node {
    struct node *left, *right;
    char* key;
};
NOINLINE static struct node* grow(int levels) {
    if (levels == 0)
        return NULL;
    struct node* n = malloc(sizeof *n);
    n->key = malloc(24);
    n->left = grow(levels - 1);
    n->right = grow(levels - 1);
    return n;
}
NOINLINE static void free_node(struct node* n) {
    free(n->key);
    free(n); // a tail call
}
NOINLINE static void teardown(struct node* n) {
    if (!n)
        return;
    teardown(n->left);
    teardown(n->right);
    free_node(n);
}

int main(int argc, char** argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 3000;
    if (argc > 2)
        seed = (unsigned)atoi(argv[2]);
    for (int i = 0; i < rounds; i++) {
        step(3 + (int)(next_rand() % 40), i & 15);
        if (nkept == KEPT_MAX) {
            for (int k = 0; k < KEPT_MAX; k++)
                free(kept[k]);
            nkept = 0;
        }
    }
    teardown(grow(14));
    say("unwind_random done\n");
    return 0;
}
