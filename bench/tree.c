// SPDX-License-Identifier: MIT
// tree.c - benchmark workload: build a complete binary tree of 2^21-1 (~2.1M) nodes, each
// node holding two small heap strings (key and value), checksum it, then tear it down.
// Three malloc calls per node: ~6.3M allocation calls and as many frees.
// By default the tree is built and torn down iteratively (level by level, then with an
// explicit stack), so the allocations come from three call paths, as in most programs that
// build big data structures. `--recursive` builds and tears down by recursion instead: every
// node is allocated on its own call path (2M distinct stacks), a stress case for stack storage.
// Usage: tree [LEVELS] [--recursive]   (LEVELS default 21)
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct node {
    struct node *left, *right;
    char* key;
    char* value;
};

static void* xmalloc(size_t n) {
    void* p = malloc(n);
    if (!p)
        abort();
    return p;
}

static char* xstrdup(const char* s) {
    size_t n = strlen(s) + 1;
    return memcpy(xmalloc(n), s, n);
}

static __attribute__((noinline)) struct node* new_node(uint64_t id, int level) {
    struct node* n = xmalloc(sizeof *n);
    char buf[48];
    snprintf(buf, sizeof buf, "k%llu", (unsigned long long)id);
    n->key = xstrdup(buf);
    snprintf(buf, sizeof buf, "value-%llx-%d", (unsigned long long)(id * 2654435761u), level);
    n->value = xstrdup(buf);
    n->left = n->right = NULL;
    return n;
}

static __attribute__((noinline)) void free_node(struct node* n) {
    free(n->key);
    free(n->value);
    free(n);
}

// Node i (1-based, heap order) has children 2i and 2i+1: built in that order, level by level.
static struct node* build_iterative(int levels) {
    uint64_t count = (1ull << levels) - 1;
    struct node** all = xmalloc(count * sizeof *all);
    for (uint64_t i = 1; i <= count; i++) {
        int level = 0;
        for (uint64_t x = i; x > 1; x >>= 1)
            level++;
        all[i - 1] = new_node(i, levels - level);
        if (i > 1) {
            struct node* parent = all[i / 2 - 1];
            if (i & 1)
                parent->right = all[i - 1];
            else
                parent->left = all[i - 1];
        }
    }
    struct node* root = all[0];
    free(all);
    return root;
}

static uint64_t walk_iterative(struct node* root, int levels) {
    struct node** stack = xmalloc((size_t)(levels + 1) * 2 * sizeof *stack);
    size_t depth = 0;
    uint64_t sum = 0;
    if (root)
        stack[depth++] = root;
    while (depth) {
        struct node* n = stack[--depth];
        sum += (uint64_t)strlen(n->key) * 31 + (unsigned char)n->value[6];
        if (n->right)
            stack[depth++] = n->right;
        if (n->left)
            stack[depth++] = n->left;
    }
    free(stack);
    return sum;
}

// Children first, then the node: a parent is released only after its subtrees.
static void teardown_iterative(struct node* root, int levels) {
    struct node** stack = xmalloc((size_t)(levels + 1) * 2 * sizeof *stack);
    size_t depth = 0;
    if (root)
        stack[depth++] = root;
    while (depth) {
        struct node* n = stack[--depth];
        if (n->left) {
            stack[depth++] = n;
            stack[depth++] = n->left;
            n->left = NULL;
        } else if (n->right) {
            stack[depth++] = n;
            stack[depth++] = n->right;
            n->right = NULL;
        } else {
            free_node(n);
        }
    }
    free(stack);
}

static __attribute__((noinline)) struct node* build_recursive(int levels, uint64_t id) {
    if (levels == 0)
        return NULL;
    struct node* n = new_node(id, levels);
    n->left = build_recursive(levels - 1, id * 2);
    n->right = build_recursive(levels - 1, id * 2 + 1);
    return n;
}

static __attribute__((noinline)) uint64_t walk_recursive(const struct node* n) {
    if (!n)
        return 0;
    return (uint64_t)strlen(n->key) * 31 + (unsigned char)n->value[6] + walk_recursive(n->left) +
           walk_recursive(n->right);
}

static __attribute__((noinline)) void teardown_recursive(struct node* n) {
    if (!n)
        return;
    teardown_recursive(n->left);
    teardown_recursive(n->right);
    free_node(n);
}

int main(int argc, char** argv) {
    int levels = 21, recursive = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--recursive") == 0)
            recursive = 1;
        else
            levels = atoi(argv[i]);
    }
    if (levels < 1 || levels > 26) {
        fprintf(stderr, "usage: tree [LEVELS 1..26] [--recursive]\n");
        return 2;
    }
    struct node* root;
    uint64_t sum;
    if (recursive) {
        root = build_recursive(levels, 1);
        sum = walk_recursive(root);
        teardown_recursive(root);
    } else {
        root = build_iterative(levels);
        sum = walk_iterative(root, levels);
        teardown_iterative(root, levels);
    }
    printf("tree: %d levels, %llu nodes, checksum %llu\n", levels,
           (unsigned long long)((1ull << levels) - 1), (unsigned long long)sum);
    return 0;
}
