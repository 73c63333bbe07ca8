// SPDX-License-Identifier: MIT
// stacks.c - backtraces interned once: an event carries a 32-bit stack id, and the writer
// emits the frames the first time it meets the id. The table is lock-free: a new stack is
// written into the append-only store first, then published with one compare-and-swap.
#define _GNU_SOURCE
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent.h"

#define HL_STACK_SLOTS (1u << 22)   // table slots; the table holds up to 3/4 of it
#define HL_STACK_MAX (3u << 20)     // distinct stacks
#define HL_STACK_IPS (64u << 20)    // frames stored, all stacks together

typedef struct stack_info_s {
    uint64_t hash;
    uint32_t offset; // into ip_store
    uint32_t depth;
} stack_info_t;

static _Atomic uint32_t* slots;    // stack id, 0 = empty
static stack_info_t* infos;        // by id
static uintptr_t* ip_store;
static _Atomic uint32_t next_id;   // last id handed out
static _Atomic uint32_t ips_used;

// Large, lazily backed reservations: only the pages a program's stacks touch cost memory.
static void* reserve(size_t bytes) { return os_reserve(bytes); }

void stacks_init(void) {
    slots = reserve(HL_STACK_SLOTS * sizeof(uint32_t));
    infos = reserve((HL_STACK_MAX + 1) * sizeof(stack_info_t));
    ip_store = reserve(HL_STACK_IPS * sizeof(uintptr_t));
    if (!slots || !infos || !ip_store)
        slots = NULL;
}

static inline uint64_t ips_hash(const uintptr_t* ips, int n) {
    uint64_t h = 0x84222325cbf29ce4ull ^ (uint64_t)n;
    for (int i = 0; i < n; i++) {
        h ^= ips[i];
        h *= 0x100000001b3ull;
        h ^= h >> 32;
    }
    return h | 1;
}

static inline int same_stack(uint32_t id, uint64_t h, const uintptr_t* ips, int n) {
    const stack_info_t* in = &infos[id];
    return in->hash == h && in->depth == (uint32_t)n &&
           memcmp(&ip_store[in->offset], ips, (size_t)n * sizeof(uintptr_t)) == 0;
}

uint32_t stack_intern(const uintptr_t* ips, int n) {
    if (hl_unlikely(!slots || n <= 0))
        return 0;
    uint64_t h = ips_hash(ips, n);
    uint32_t i = (uint32_t)h & (HL_STACK_SLOTS - 1);
    uint32_t mine = 0;
    for (;;) {
        uint32_t id = atomic_load_explicit(&slots[i], memory_order_acquire);
        if (id == 0) {
            if (!mine) {
                uint32_t off = atomic_fetch_add(&ips_used, (uint32_t)n);
                mine = atomic_fetch_add(&next_id, 1) + 1;
                if (off + (uint32_t)n > HL_STACK_IPS || mine > HL_STACK_MAX)
                    return 0; // full: the event goes without a stack rather than not at all
                memcpy(&ip_store[off], ips, (size_t)n * sizeof(uintptr_t));
                infos[mine] = (stack_info_t){h, off, (uint32_t)n};
            }
            uint32_t expected = 0;
            if (atomic_compare_exchange_strong_explicit(&slots[i], &expected, mine,
                                                        memory_order_release, memory_order_acquire))
                return mine;
            id = expected;
        }
        if (same_stack(id, h, ips, n))
            return id; // another thread published it first; our copy stays unused
        i = (i + 1) & (HL_STACK_SLOTS - 1);
    }
}

int stack_get(uint32_t id, const uintptr_t** ips) {
    if (id == 0 || id > atomic_load(&next_id) || !infos)
        return 0;
    *ips = &ip_store[infos[id].offset];
    return (int)infos[id].depth;
}

uint32_t stack_count(void) { return atomic_load(&next_id); }
