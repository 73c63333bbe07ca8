// SPDX-License-Identifier: MIT
// stacks.c - backtraces interned once, as a prefix tree: a node is (caller node, return
// address), so stacks that share their outer frames share their nodes, and a program with
// millions of distinct call paths (recursion over a tree) costs one node per path, not a copy
// of every path. A node is found by the hash of the path from the root to it, so a stack seen
// before costs one probe; the table is lock-free (a node is written, then published with one
// compare-and-swap). The writer emits a node (FRAME record) the first time an event needs it.
#define _GNU_SOURCE
#include <string.h>

#include "agent.h"

#define HL_STACK_SLOTS (1u << 25)   // table slots (lazily backed)
#define HL_STACK_NODES (24u << 20)  // nodes, all stacks together

typedef struct node_s {
    uintptr_t ip;
    uint64_t path_hash; // hash of every ip from the root down to this one
    uint32_t parent;    // 0: the outermost frame
    uint32_t depth;     // frames from the root, this one included
} node_t;

static _Atomic uint32_t* slots; // node id, 0 = empty
static node_t* nodes;           // by id, from 1
static _Atomic uint32_t next_id;

void stacks_init(void) {
    slots = os_reserve(HL_STACK_SLOTS * sizeof(uint32_t));
    nodes = os_reserve((HL_STACK_NODES + 1) * sizeof(node_t));
    if (!slots || !nodes)
        slots = NULL;
}

static inline uint64_t path_mix(uint64_t h, uintptr_t ip) {
    h ^= ip + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
    return (h ^ (h >> 33)) | 1;
}

// The node for (parent, ip) whose path hash is h, created if new. 0 when the table is full.
static uint32_t node_get(uint32_t parent, uintptr_t ip, uint64_t h, uint32_t depth) {
    uint32_t i = (uint32_t)h & (HL_STACK_SLOTS - 1);
    uint32_t mine = 0;
    for (;;) {
        uint32_t id = atomic_load_explicit(&slots[i], memory_order_acquire);
        if (id == 0) {
            if (!mine) {
                mine = atomic_fetch_add(&next_id, 1) + 1;
                if (mine > HL_STACK_NODES)
                    return 0;
                nodes[mine] = (node_t){ip, h, parent, depth};
            }
            uint32_t expected = 0;
            if (atomic_compare_exchange_strong_explicit(&slots[i], &expected, mine,
                                                        memory_order_release, memory_order_acquire))
                return mine;
            id = expected;
        }
        const node_t* nd = &nodes[id];
        if (nd->path_hash == h && nd->ip == ip && nd->parent == parent)
            return id; // (a node made here but beaten to the slot stays unused)
        i = (i + 1) & (HL_STACK_SLOTS - 1);
    }
}

uint32_t stack_intern(const uintptr_t* ips, int n, uint32_t* node_of) {
    if (hl_unlikely(!slots || n <= 0))
        return 0;
    uint64_t h = 0;
    for (int i = n - 1; i >= 0; i--)
        h = path_mix(h, ips[i]);
    // Seen before: the whole path's hash finds its innermost node at once.
    uint32_t i = (uint32_t)h & (HL_STACK_SLOTS - 1);
    for (;;) {
        uint32_t id = atomic_load_explicit(&slots[i], memory_order_acquire);
        if (id == 0)
            break;
        const node_t* nd = &nodes[id];
        if (nd->path_hash == h && nd->ip == ips[0] && nd->depth == (uint32_t)n) {
            if (node_of) { // the callers' nodes, by walking up once
                uint32_t up = id;
                for (int k = 0; k < n && up; k++, up = nodes[up].parent)
                    node_of[k] = up;
            }
            return id;
        }
        i = (i + 1) & (HL_STACK_SLOTS - 1);
    }
    uint32_t parent = 0;
    uint64_t ph = 0;
    for (int k = n - 1; k >= 0; k--) {
        ph = path_mix(ph, ips[k]);
        parent = node_get(parent, ips[k], ph, (uint32_t)(n - k));
        if (!parent)
            return 0; // full: the event goes without a stack rather than not at all
        if (node_of)
            node_of[k] = parent;
    }
    return parent;
}

uint32_t stack_extend(uint32_t base, const uintptr_t* inner, int k, uint32_t* node_of) {
    if (hl_unlikely(!slots || !base))
        return 0;
    uint64_t h = nodes[base].path_hash;
    uint32_t depth = nodes[base].depth;
    for (int i = k - 1; i >= 0 && base; i--) {
        h = path_mix(h, inner[i]);
        base = node_get(base, inner[i], h, ++depth);
        if (node_of)
            node_of[i] = base;
    }
    return base;
}

int stack_node(uint32_t id, uintptr_t* ip, uint32_t* parent) {
    if (id == 0 || id > atomic_load(&next_id) || !nodes)
        return -1;
    *ip = nodes[id].ip;
    *parent = nodes[id].parent;
    return 0;
}

uint32_t stack_count(void) { return atomic_load(&next_id); }
