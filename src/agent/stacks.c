// SPDX-License-Identifier: MIT
// stacks.c - backtraces interned once, as a prefix tree: a node is (caller node, return
// address), so stacks that share their outer frames share their nodes, and a program with
// millions of distinct call paths (recursion over a tree) costs one node per path, not a copy
// of every path. A node is found by the hash of the path from the root to it, so a stack seen
// before costs one probe, and finding takes no lock (making a node does). The writer emits a
// node (FRAME record) the first time an event needs it.
#define _GNU_SOURCE
#include <string.h>
#include <unistd.h>

#include "../common/compiler.h"
#include "os.h"
#include "stacks.h"

#define HL_STACK_NODES (24u << 20) // nodes, all stacks together
// Nodes live in chunks made as they fill: a reservation for every node up front would take
// 576 MiB of address space, which counts against a program's RLIMIT_AS as much as memory does.
#define HL_CHUNK_SHIFT 16 // 64 Ki nodes, 1.5 MiB a chunk
#define HL_CHUNK_NODES (1u << HL_CHUNK_SHIFT)
#define HL_CHUNKS (HL_STACK_NODES / HL_CHUNK_NODES + 1)
#define HL_TABLE_FIRST 12          // log2 of the first table's slots (16 KiB)
#define HL_TABLE_LAST 26           // log2 of the largest: HL_STACK_NODES at 3/8 load

// A node also tells which return addresses its children may have: a bit per child, picked by its
// address, in the word that holds its depth. A frame whose bit is clear in its caller's node is
// new, known without a probe: a stack never seen costs a probe of the table (a cache miss
// waited for, in a table of millions of nodes) only where its frames stop being known, and
// this says where without one, from a node the walk has just read. Bits are set under make_lock
// before the child is published; a reader that finds one clear comes to make_lock, where it
// looks again.
typedef struct node_s {
    uintptr_t ip;
    uint64_t path_hash;      // hash of every ip from the root down to this one
    uint32_t parent;         // 0: the outermost frame
    _Atomic uint32_t shape;  // depth (frames from the root, this one included) | children bits
} node_t;

#define HL_DEPTH_BITS 9 // HL_MAX_DEPTH
#define HL_DEPTH_MASK ((1u << HL_DEPTH_BITS) - 1)
#define HL_CHILD_BITS (32 - HL_DEPTH_BITS)
_Static_assert(HL_MAX_DEPTH <= HL_DEPTH_MASK, "a node's depth fits below its children bits");

HL_INLINE uint32_t child_bit(uintptr_t ip) {
    uint32_t mixed = (uint32_t)(((uint64_t)ip * 0x9E3779B97F4A7C15ull) >> 32);
    return 1u << (HL_DEPTH_BITS + (uint32_t)(((uint64_t)mixed * HL_CHILD_BITS) >> 32));
}
HL_INLINE uint32_t node_depth(const node_t* nd) {
    return atomic_load_explicit(&nd->shape, memory_order_relaxed) & HL_DEPTH_MASK;
}
// Could the node have a child at ip? (No: it has none.)
HL_INLINE int may_have_child(const node_t* nd, uintptr_t ip) {
    return (atomic_load_explicit(&nd->shape, memory_order_relaxed) & child_bit(ip)) != 0;
}

// The slots that find a node by its path hash: node ids, 0 = empty. Readers probe without a
// lock; a node is added, and the table replaced by one twice as large once three quarters full,
// only under make_lock (a probe passes most other paths' slots by their tags, below, in the cache
// line it has loaded: a fuller table costs little time, and a program with millions of paths
// keeps 4 to 8 bytes of table per node instead of 8 to 32). The table grows with the stacks a program has (a fixed one sized for the
// largest programs costs every small one a fault, and a copy-on-write fault at that, per new
// node: its slots land on random pages).
typedef struct table_s {
    uint32_t mask;
    _Atomic uint32_t slot[];
} table_t;

// A slot holds a node id (HL_STACK_NODES < 2^25) and 7 more bits of its path hash, ones the
// slot's index does not use: a probe passes a slot of another path without reading its node,
// a cache miss, 127 times in 128.
#define HL_ID_BITS 25
#define HL_ID_MASK ((1u << HL_ID_BITS) - 1)
_Static_assert(HL_STACK_NODES <= HL_ID_MASK, "node ids fit below the tag");
HL_INLINE uint32_t slot_tag(uint64_t h) {
    return (uint32_t)(h >> 57) << HL_ID_BITS;
}

static _Atomic(table_t*) table;
// Node id's chunk; a chunk is stored (by the node maker under make_lock, or ahead of need by the
// writer: stacks_prepare, a compare-and-swap deciding) before any id in it is published, and
// readers learn an id from a slot they load with acquire.
static _Atomic(node_t*) chunks[HL_CHUNKS];
static _Atomic uint32_t next_id;
static _Atomic int make_lock;

static size_t table_bytes(uint32_t log2_slots) {
    return sizeof(table_t) + ((size_t)1 << log2_slots) * sizeof(uint32_t);
}

// Populated at once: the slots are probed at random, and a page first read is a zero page that
// the first insert then copies (a second fault, and a TLB flush on every CPU).
static table_t* table_make(uint32_t log2_slots) {
    table_t* t = os_map_dense_huge(table_bytes(log2_slots));
    if (t)
        t->mask = (1u << log2_slots) - 1;
    return t;
}

HL_INLINE node_t* node_at(uint32_t id) {
    return &atomic_load_explicit(&chunks[id >> HL_CHUNK_SHIFT],
                                 memory_order_relaxed)[id & (HL_CHUNK_NODES - 1)];
}

// Once per process image: a new session (attach again) keeps the nodes and their ids (a trace
// names the ones it uses as it goes), where a second table beside the old next_id made none.
void stacks_init(void) {
    if (atomic_load_explicit(&table, memory_order_acquire))
        return;
    node_t* first = os_map(HL_CHUNK_NODES * sizeof(node_t)); // ids from 1
    atomic_store_explicit(&chunks[0], first, memory_order_release);
    table_t* t = first ? table_make(HL_TABLE_FIRST) : NULL;
    atomic_store_explicit(&table, t, memory_order_release);
}

static inline uint64_t path_mix(uint64_t h, uintptr_t ip) {
    h ^= ip + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdull;
    return (h ^ (h >> 33)) | 1;
}

static void place(table_t* t, uint32_t id, uint64_t h) {
    uint32_t i = (uint32_t)h & t->mask;
    while (atomic_load_explicit(&t->slot[i], memory_order_relaxed))
        i = (i + 1) & t->mask;
    atomic_store_explicit(&t->slot[i], id | slot_tag(h), memory_order_release);
}

// A new node's slot is written at the next making of nodes, not at once: its cache line (a miss
// in a table of millions of nodes) is requested when the node is made and has come by then, where
// writing it at once waited for it, on every new frame of a stack never seen (a third of a run
// of tree --recursive's 2M distinct paths). Until then the node is found by a reader only under
// make_lock, which places every waiting one first: a reader that does not find a node takes the
// lock and looks again before it makes one.
#define HL_PENDING 64 // nodes made between two makings; more are placed as the list fills
static struct {
    uint32_t id;
    uint64_t h;
} pending[HL_PENDING];
static int npending; // under make_lock

static void pending_place(table_t* t) {
    for (int i = 0; i < npending; i++)
        place(t, pending[i].id, pending[i].h);
    npending = 0;
}

static void place_later(table_t* t, uint32_t id, uint64_t h) {
    if (npending == HL_PENDING)
        pending_place(t);
    hl_prefetch_own(&t->slot[(uint32_t)h & t->mask]);
    pending[npending].id = id;
    pending[npending++].h = h;
}

// Chunk c is there, mapped now if it was not yet: by the thread about to make its nodes (under
// make_lock), or ahead of need by the writer (stacks_prepare), a compare-and-swap deciding
// between the two. Its pages are made present as nodes need them: by the writer ahead of the
// node maker, else by faults as the maker fills them.
static int chunk_ready(uint32_t c) {
    if (hl_likely(atomic_load_explicit(&chunks[c], memory_order_acquire) != NULL))
        return 1;
    node_t* fresh = os_map(HL_CHUNK_NODES * sizeof(node_t));
    node_t* none = NULL;
    if (!fresh)
        return 0;
    if (!atomic_compare_exchange_strong_explicit(&chunks[c], &none, fresh, memory_order_acq_rel,
                                                 memory_order_acquire))
        os_unmap(fresh, HL_CHUNK_NODES * sizeof(node_t)); // the other one's came first
    return 1;
}

// The writer thread makes present the nodes the program's threads will make next, at each pass:
// the kernel clearing pages one fault at a time was a tenth of the time of a program whose every
// stack is new, on the thread that was making its nodes. As far ahead as twice what was made
// since the last pass (a pass comes every few milliseconds while events flow), at least
// HL_PRESENT_AHEAD_MIN nodes and at most a chunk: a whole chunk made present ahead of need was
// up to 1.5 MiB of memory a short process never used. (A larger table made ready the same way
// cost more than it saved: twice the largest table's memory, made before a growth that may
// never come.) The least is what a short process makes in all: 4096 nodes (96 KiB) were 2-5%
// of the cost of tracing each of procs.sh's programs, most of them never used.
#define HL_PRESENT_AHEAD_MIN 1024u // nodes: 24 KiB
// Under the writer lock (every pass takes it):
static uint32_t present_to;        // nodes below this id are present
static uint32_t made_at_last_pass; // next_id at the last pass
static int cannot_populate;        // a population failed (no MADV_POPULATE_WRITE, no memory):
                                   // the node maker's faults make them present from then on

void stacks_prepare(void) {
    if (cannot_populate)
        return;
    uint32_t made = atomic_load_explicit(&next_id, memory_order_relaxed);
    uint32_t rate = made - made_at_last_pass;
    made_at_last_pass = made;
    uint32_t ahead = rate > HL_CHUNK_NODES / 2 ? HL_CHUNK_NODES : 2 * rate;
    if (ahead < HL_PRESENT_AHEAD_MIN)
        ahead = HL_PRESENT_AHEAD_MIN;
    uint32_t target = made + 1 + ahead;
    if (target > HL_STACK_NODES + 1)
        target = HL_STACK_NODES + 1;
    if (present_to < made + 1)
        present_to = made + 1; // the maker has made these present itself
    while (present_to < target) {
        uint32_t c = present_to >> HL_CHUNK_SHIFT;
        if (!chunk_ready(c))
            return;
        uint32_t end = (c + 1) << HL_CHUNK_SHIFT;
        if (end > target)
            end = target;
        // The pages of the range, from the one holding present_to's node (it may be the
        // maker's page, already present: populating it again changes nothing).
        node_t* from = node_at(present_to);
        if (os_populate(from, (size_t)((char*)(node_at(end - 1) + 1) - (char*)from)) != 0) {
            cannot_populate = 1;
            return;
        }
        present_to = end;
    }
}

// A placement takes a few nanoseconds and a slot's miss a hundred or more: 64 nodes ahead cover
// it (16 left grow waiting on the slot in 40% of its time, tree --recursive's table of 16M).
#define HL_GROW_AHEAD 64
// Under make_lock: a table twice as large holding every node, published whole. The old one
// is left to readers that may still be probing it (its pages are given back; a reader then
// sees empty slots and comes to make_lock, where the new table answers).
static void grow(table_t* old, uint32_t count) {
    uint32_t log2 = (uint32_t)__builtin_ctz(old->mask + 1) + 1;
    if (log2 > HL_TABLE_LAST)
        return;
    table_t* t = table_make(log2);
    if (!t)
        return;
    // The slots are at random places of a table larger than the cache: each is requested
    // HL_GROW_AHEAD nodes before it is written, so the misses overlap.
    for (uint32_t id = 1; id <= HL_GROW_AHEAD && id <= count; id++)
        hl_prefetch_own(&t->slot[(uint32_t)node_at(id)->path_hash & t->mask]);
    for (uint32_t id = 1; id <= count; id++) {
        if (id + HL_GROW_AHEAD <= count)
            hl_prefetch_own(&t->slot[(uint32_t)node_at(id + HL_GROW_AHEAD)->path_hash & t->mask]);
        place(t, id, node_at(id)->path_hash);
    }
    npending = 0; // placed with the others
    atomic_store_explicit(&table, t, memory_order_release);
    os_discard(old, table_bytes((uint32_t)__builtin_ctz(old->mask + 1)));
}

static inline int node_is(uint32_t id, uint32_t parent, uintptr_t ip, uint64_t h) {
    const node_t* nd = node_at(id);
    return nd->path_hash == h && nd->ip == ip && nd->parent == parent;
}

// The node for (parent, ip) whose path hash is h, or 0 if there is none yet.
static inline uint32_t node_find(const table_t* t, uint32_t parent, uintptr_t ip, uint64_t h) {
    uint32_t i = (uint32_t)h & t->mask, v, tag = slot_tag(h);
    while ((v = atomic_load_explicit(&t->slot[i], memory_order_acquire)) != 0) {
        if ((v & ~HL_ID_MASK) == tag && node_is(v & HL_ID_MASK, parent, ip, h))
            return v & HL_ID_MASK;
        i = (i + 1) & t->mask;
    }
    return 0;
}

// Under make_lock: frames [0, k) of ips (innermost first) as new nodes below parent, whose path
// hash is h, none of which can exist yet (their outermost is not in the table, and a node's
// children are made after it). Ids are consecutive, so the nodes are written in order and the
// writer reads them back in order. 0 when the nodes are used up (or memory is): the event goes
// without a stack rather than not at all.
static HL_COLD uint32_t nodes_make(uint32_t parent, uint64_t h, uint32_t depth,
                                   const uintptr_t* ips, int k, uint32_t* node_of) {
    table_t* t = atomic_load_explicit(&table, memory_order_acquire);
    uint32_t first = atomic_load_explicit(&next_id, memory_order_relaxed), id = first;
    for (int j = k - 1; j >= 0; j--) {
        // A table that could not grow is seven eighths full: stop there.
        uint32_t fresh = id + 1;
        if (fresh > HL_STACK_NODES || (uint64_t)fresh * 8 > (uint64_t)(t->mask + 1) * 7 ||
            !chunk_ready(fresh >> HL_CHUNK_SHIFT)) {
            parent = 0;
            break;
        }
        id = fresh;

        h = path_mix(h, ips[j]);
        node_t* nd = node_at(id);
        nd->ip = ips[j];
        nd->path_hash = h;
        nd->parent = parent;
        atomic_store_explicit(&nd->shape, ++depth, memory_order_relaxed);
        if (parent) { // only make_lock's holder changes a node's shape: no locked instruction
            _Atomic uint32_t* shape = &node_at(parent)->shape;
            atomic_store_explicit(shape,
                                  atomic_load_explicit(shape, memory_order_relaxed) |
                                      child_bit(ips[j]),
                                  memory_order_relaxed);
        }
        // A slot placed makes its id known: next_id must not be behind it.
        int grows = (uint64_t)id * 4 > (uint64_t)(t->mask + 1) * 3;
        if (grows || npending == HL_PENDING)
            atomic_store_explicit(&next_id, id, memory_order_release);
        place_later(t, id, h);
        if (grows) {
            grow(t, id);
            t = atomic_load_explicit(&table, memory_order_acquire);
        }
        parent = id;
        if (node_of)
            node_of[j] = id;
    }
    // Once for all of them (the writer reads it at every node it emits: a store per node took
    // that line back from the writer's CPU each time). No reader learns these ids before this,
    // unless a slot was placed meanwhile (then it was stored first): their slots are placed
    // later, and the caller hands them out after it returns.
    if (id != first)
        atomic_store_explicit(&next_id, id, memory_order_release);
    return parent;
}

// Follows frames j, j-1 ... of ips down from the node *base while the table has them (moving
// *base, its path hash *h and *depth along); returns the index of the first frame it lacks, or
// -1 when it has them all.
static inline int follow_known(const table_t* t, uint32_t* base, uint64_t* h, uint32_t* depth,
                               const uintptr_t* ips, int j, uint32_t* node_of) {
    for (; j >= 0; j--, (*depth)++) {
        if (*base && !may_have_child(node_at(*base), ips[j]))
            break;
        uint64_t x = path_mix(*h, ips[j]);
        uint32_t id = node_find(t, *base, ips[j], x);
        if (!id)
            break;
        *base = id;
        *h = x;
        if (node_of)
            node_of[j] = id;
    }
    return j;
}

// Frames [0, k) of ips (innermost first) called from the node base (0: the root), whose path
// hash is h and depth `depth`. Every frame's slot is computed and its cache line requested
// first, so the probes' cache misses overlap instead of following one another (a stack never
// seen has a miss per frame); the frames found are then followed from the outermost, and once
// one is missing, all inside it are new and made under one lock without probing again. The
// path hashes are computed again rather than kept: an array of them would take 2 KiB more of
// the program's stack on every allocation.
static uint32_t intern_above(uint32_t base, uint64_t h, uint32_t depth, const uintptr_t* ips,
                             int k, uint32_t* node_of) {
    const table_t* t = atomic_load_explicit(&table, memory_order_acquire);
    uint64_t x = h;
    for (int j = k - 1; j >= 0; j--) {
        x = path_mix(x, ips[j]);
        __builtin_prefetch(&t->slot[(uint32_t)x & t->mask]); // read: it may only be read
    }
    int j = follow_known(t, &base, &h, &depth, ips, k - 1, node_of);
    if (j < 0)
        return base;
    stacks_lock();
    // Another thread may have made some of them meanwhile; under the lock no one else makes any.
    t = atomic_load_explicit(&table, memory_order_acquire);
    pending_place((table_t*)t);
    j = follow_known(t, &base, &h, &depth, ips, j, node_of);
    uint32_t id = j < 0 ? base : nodes_make(base, h, depth, ips, j + 1, node_of);
    stacks_unlock();
    return id;
}

uint32_t stack_intern(const uintptr_t* ips, int n, uint32_t* node_of) {
    const table_t* t = atomic_load_explicit(&table, memory_order_acquire);
    if (hl_unlikely(!t || n <= 0))
        return 0;
    if (hl_unlikely(n > HL_MAX_DEPTH))
        n = HL_MAX_DEPTH; // the outermost frames beyond it go, as a walk stopped there
    uint64_t h = 0;
    for (int i = n - 1; i >= 0; i--)
        h = path_mix(h, ips[i]);
    // Seen before: the whole path's hash finds its innermost node at once.
    uint32_t i = (uint32_t)h & t->mask, tag = slot_tag(h);
    for (;; i = (i + 1) & t->mask) {
        uint32_t v = atomic_load_explicit(&t->slot[i], memory_order_acquire);
        if (v == 0)
            break;
        if ((v & ~HL_ID_MASK) != tag)
            continue;
        uint32_t id = v & HL_ID_MASK;
        const node_t* nd = node_at(id);
        if (nd->path_hash == h && nd->ip == ips[0] && node_depth(nd) == (uint32_t)n) {
            // The callers' nodes are not looked for: walking up the parents is a cache miss
            // per frame, one after the other, for nodes a later walk seldom needs (it finds one
            // by its path when it does: 0 says unknown).
            if (node_of) {
                node_of[0] = id;
                memset(node_of + 1, 0, (size_t)(n - 1) * sizeof *node_of);
            }
            return id;
        }
    }
    return intern_above(0, 0, 0, ips, n, node_of);
}

uint32_t stack_extend(uint32_t base, const uintptr_t* inner, int k, uint32_t* node_of) {
    if (hl_unlikely(!atomic_load_explicit(&table, memory_order_relaxed) || !base))
        return 0;
    if (k <= 0)
        return base;
    const node_t* b = node_at(base);
    uint32_t depth = node_depth(b);
    if (hl_unlikely(depth + (uint32_t)k > HL_MAX_DEPTH))
        return 0; // walks stop at HL_MAX_DEPTH frames: not a stack this table holds
    return intern_above(base, b->path_hash, depth, inner, k, node_of);
}

uint32_t stack_innermost(uint32_t id, int k) {
    if (id == 0 || id > atomic_load(&next_id) || k <= 0 || node_depth(node_at(id)) <= (uint32_t)k)
        return id;
    uintptr_t ips[HL_MAX_DEPTH];
    int n = 0;
    for (uint32_t up = id; up && n < k; up = node_at(up)->parent)
        ips[n++] = node_at(up)->ip;
    return stack_intern(ips, n, NULL);
}

int stack_node(uint32_t id, uintptr_t* ip, uint32_t* parent) {
    if (id == 0 || id > atomic_load(&next_id))
        return -1;
    *ip = node_at(id)->ip;
    *parent = node_at(id)->parent;
    return 0;
}

// fork: the child must not inherit make_lock held, nor a table half made.
void stacks_lock(void) {
    while (atomic_exchange_explicit(&make_lock, 1, memory_order_acquire))
        os_yield();
}
void stacks_unlock(void) {
    atomic_store_explicit(&make_lock, 0, memory_order_release);
}
