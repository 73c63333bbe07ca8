// SPDX-License-Identifier: MIT
// tree.c - benchmark workload: build a complete binary tree of 2^21-1 (~2.1M) nodes, each
// node holding two small heap strings (key and value), checksum it, then tear it down.
// Three malloc calls per node: ~6.3M allocation calls and as many frees.
// Usage: tree [LEVELS] (default 21).
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

static char* xstrdup(const char* s) {
    size_t n = strlen(s) + 1;
    char* p = malloc(n);
    if (!p)
        abort();
    return memcpy(p, s, n);
}

static __attribute__((noinline)) struct node* build(int levels, uint64_t id) {
    if (levels == 0)
        return NULL;
    struct node* n = malloc(sizeof *n);
    if (!n)
        abort();
    char buf[48];
    snprintf(buf, sizeof buf, "k%llu", (unsigned long long)id);
    n->key = xstrdup(buf);
    snprintf(buf, sizeof buf, "value-%llx-%d", (unsigned long long)(id * 2654435761u), levels);
    n->value = xstrdup(buf);
    n->left = build(levels - 1, id * 2);
    n->right = build(levels - 1, id * 2 + 1);
    return n;
}

static __attribute__((noinline)) uint64_t walk(const struct node* n) {
    if (!n)
        return 0;
    return (uint64_t)strlen(n->key) * 31 + (unsigned char)n->value[6] + walk(n->left) +
           walk(n->right);
}

static __attribute__((noinline)) void teardown(struct node* n) {
    if (!n)
        return;
    teardown(n->left);
    teardown(n->right);
    free(n->key);
    free(n->value);
    free(n);
}

int main(int argc, char** argv) {
    int levels = argc > 1 ? atoi(argv[1]) : 21;
    if (levels < 1 || levels > 26) {
        fprintf(stderr, "usage: tree [LEVELS 1..26]\n");
        return 2;
    }
    struct node* root = build(levels, 1);
    uint64_t sum = walk(root);
    teardown(root);
    printf("tree: %d levels, %llu nodes, checksum %llu\n", levels,
           (unsigned long long)((1ull << levels) - 1), (unsigned long long)sum);
    return 0;
}
