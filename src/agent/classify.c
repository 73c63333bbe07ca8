// SPDX-License-Identifier: MIT
// classify.c - reachability with memcheck's semantics. Phase 1 marks from the roots: a start
// pointer (or one a heuristic accepts) from a definitely reached place makes a block
// reachable, an interior pointer makes it possibly lost, and what a possibly lost block points
// to is possibly lost too. Phase 2 walks the unreached blocks in address order: each one still
// unreached leads a clique, and everything it reaches that nothing else reached is indirectly
// lost through it. Leaders left unreached are definitely lost.
#include "classify.h"

#include <string.h>

#include "../common/compiler.h"
#include "../common/format.h"

#define ST_UNREACHED 0
#define ST_INDIRECT 1
#define ST_POSSIBLE 2
#define ST_REACHABLE 3
#define ST_MASK 3
// Set while the block waits on the marking stack: a block found reachable while it waits there
// as possibly lost is not pushed again (its scan reads the better state when it comes), so the
// stack holds each block once at most.
#define ST_ON_STACK 0x80

// The granules that hold part of a block, each with the blocks that overlap it (below).
typedef struct granule_s {
    uint64_t key;   // granule number + 1; 0: an empty slot
    uint32_t first; // the first block that overlaps the granule
    uint32_t count; // and how many do, one after the other in address order
} granule_t;

typedef struct lc_s {
    const lc_input_t* in;
    uint8_t* state;
    uint32_t* leader;
    uint32_t* stack;
    size_t top;
    uintptr_t lo, hi;    // [first block start, last block end]
    granule_t* granules; // the index below (NULL: every word in [lo, hi) is searched for)
    uint32_t granule_mask;
    unsigned granule_shift;
    const uint64_t* filter; // a bit per granule key's hash, set for the index's granules
    unsigned filter_shift;  // 64 - log2 of the filter's bits
} lc_t;

// Most words that fall between the first block and the last point at no block at all: the
// heap's span holds other mappings (a compiler's own garbage-collected pages, thread stacks,
// libraries), and a binary search over every block is a chain of dependent loads, 15-20 of
// them. So the granules that hold part of a block are kept in a hash table first, each with
// the run of blocks that overlap it: a word whose granule is not there is passed over at one
// probe, and one whose granule is there is searched for among that granule's blocks only (a
// few dozen in a heap of small blocks, where a search of the whole heap took twice the steps).
// The granule is the smallest from LC_GRANULE_MIN_SHIFT on whose count fits the table at most
// half full; a heap whose blocks cover more granules than LC_INDEX_MAX_SLOTS / 2 even at
// LC_GRANULE_MAX_SHIFT (huge blocks spread everywhere) goes without it.
#define LC_GRANULE_MIN_SHIFT 12 // a page
#define LC_GRANULE_MAX_SHIFT 20 // 1 MiB
#define LC_INDEX_MIN_SLOTS 64u
#define LC_INDEX_MAX_SLOTS ((size_t)1 << 18) // 4 MiB of workspace, as the filter before it took
// Before the index is probed, a filter of LC_FILTER_BITS_PER_SLOT bits per slot (16 per granule
// at least, a sixteenth of the index's bytes) says whether the word's granule may be in it:
// most words between the first block and the last lie in no block's granule (a compiler's
// garbage-collected pages hold pointers into themselves), and a probe that misses walks its run
// of slots to an empty one in a table larger than the cache, where the filter is one bit in a
// table that fits it. Half of the scan's time went to such probes in a short cc1.
#define LC_FILTER_BITS_PER_SLOT 8

static size_t index_slots(size_t nblocks) {
    size_t slots = LC_INDEX_MIN_SLOTS;
    while (slots < 2 * nblocks && slots < LC_INDEX_MAX_SLOTS)
        slots *= 2;
    return slots;
}

// The workspace: the marking stack (n + 2 entries), then the granule index's slots.
static size_t stack_bytes(size_t n) {
    size_t bytes = (n + 2) * sizeof(uint32_t);
    return (bytes + sizeof(granule_t) - 1) / sizeof(granule_t) * sizeof(granule_t);
}

size_t lc_workspace_size(size_t n) {
    return stack_bytes(n) + index_slots(n) * (sizeof(granule_t) + LC_FILTER_BITS_PER_SLOT / 8);
}

static inline uint32_t granule_slot(uint64_t key, uint32_t mask) {
    return (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 40) & mask;
}
static inline uint64_t filter_bit(uint64_t key, unsigned shift) {
    return (key * 0xC2B2AE3D27D4EB4Full) >> shift; // other bits than the slot's
}

// The first and last granules block i lies in (a zero-sized block in the one at its start).
static inline void granule_span(const lc_input_t* in, size_t i, unsigned shift, uint64_t* first,
                                uint64_t* last) {
    uintptr_t size = in->sizes[i] ? in->sizes[i] : 1;
    *first = in->starts[i] >> shift;
    *last = (in->starts[i] + size - 1) >> shift;
}

// The granules blocks [0, n) cover at this shift, counting stopped past `enough`.
static size_t granules_covered(const lc_input_t* in, unsigned shift, size_t enough) {
    size_t count = 0;
    uint64_t g, end, last = UINT64_MAX;
    for (size_t i = 0; i < in->nblocks && count <= enough; i++) {
        granule_span(in, i, shift, &g, &end);
        count += end - g + (g != last);
        last = end;
    }
    return count;
}

// Builds the index and its filter (after max_slots slots); blocks come in address order, so the
// blocks over a granule are met one after the other and its slot is made at the first of them.
// Leaves c->granules NULL when no granule size fits the table.
static void build_granule_index(lc_t* c, granule_t* slots, size_t max_slots) {
    const lc_input_t* in = c->in;
    unsigned shift = LC_GRANULE_MIN_SHIFT;
    size_t count;
    while ((count = granules_covered(in, shift, max_slots / 2)) > max_slots / 2)
        if (++shift > LC_GRANULE_MAX_SHIFT)
            return;
    size_t nslots = LC_INDEX_MIN_SLOTS;
    while (nslots < 2 * count)
        nslots *= 2;
    memset(slots, 0, nslots * sizeof *slots);
    uint32_t mask = (uint32_t)(nslots - 1);
    granule_t* open = NULL; // the slot of the last granule met
    for (size_t i = 0; i < in->nblocks; i++) {
        uint64_t g, end;
        granule_span(in, i, shift, &g, &end);
        for (; g <= end; g++) {
            if (open && open->key == g + 1) {
                open->count++;
                continue;
            }
            uint32_t at = granule_slot(g + 1, mask);
            while (slots[at].key)
                at = (at + 1) & mask;
            open = &slots[at];
            *open = (granule_t){g + 1, (uint32_t)i, 1};
        }
    }
    uint64_t* filter = (uint64_t*)(slots + max_slots);
    size_t filter_bits = nslots * LC_FILTER_BITS_PER_SLOT;
    unsigned filter_shift = 64 - (unsigned)__builtin_ctzll(filter_bits);
    memset(filter, 0, filter_bits / 8);
    for (uint32_t at = 0; at <= mask; at++)
        if (slots[at].key) {
            uint64_t bit = filter_bit(slots[at].key, filter_shift);
            filter[bit / 64] |= 1ull << (bit % 64);
        }
    c->granules = slots;
    c->granule_mask = mask;
    c->granule_shift = shift;
    c->filter = filter;
    c->filter_shift = filter_shift;
}

// The last of blocks [lo, hi) that starts at or before w (lo when none does).
static inline size_t last_start_at_or_before(const uintptr_t* s, size_t lo, size_t hi,
                                             uintptr_t w) {
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (s[mid] <= w)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

// Index of the block containing w, or -1. A zero-sized block is "contained" at its start.
static inline long find_block(const lc_t* c, uintptr_t w) {
    if (w < c->lo || w >= c->hi)
        return -1;
    const uintptr_t* s = c->in->starts;
    size_t lo = 0, hi = c->in->nblocks;
    if (c->granules) {
        uint64_t key = (w >> c->granule_shift) + 1;
        uint64_t bit = filter_bit(key, c->filter_shift);
        if (!((c->filter[bit / 64] >> (bit % 64)) & 1))
            return -1;
        uint32_t at = granule_slot(key, c->granule_mask);
        const granule_t* g;
        while ((g = &c->granules[at])->key != key) {
            if (!g->key)
                return -1;
            at = (at + 1) & c->granule_mask;
        }
        lo = g->first;
        hi = lo + g->count;
    }
    lo = last_start_at_or_before(s, lo, hi, w);
    if (s[lo] > w)
        return -1;
    size_t size = c->in->sizes[lo];
    if (w < s[lo] + size || (size == 0 && w == s[lo]))
        return (long)lo;
    return -1;
}

// The words a pointer may be stored in: memcheck looks at every aligned word, 8 bytes on 64-bit
// systems, 4 on 32-bit ones.
#define HL_WORD sizeof(uintptr_t)
#define HL_WORD_MASK (HL_WORD - 1)

static int in_ranges(const lc_range_t* r, size_t n, uintptr_t a) {
    for (size_t i = 0; i < n; i++)
        if (a >= r[i].lo && a < r[i].hi)
            return 1;
    return 0;
}

static int is_vtable(const lc_t* c, uintptr_t a) {
    return a >= 4096 && (a & HL_WORD_MASK) == 0 &&
           in_ranges(c->in->vtable_ranges, c->in->nvtable_ranges, a);
}

// memcheck's default heuristics: interior pointers that C++ produces on purpose.
static int heuristic_says_start(const lc_t* c, size_t i, uintptr_t ptr) {
    uintptr_t start = c->in->starts[i];
    size_t size = c->in->sizes[i];
    const size_t w = sizeof(size_t);
    if (size >= w && (start & HL_WORD_MASK) == 0) {
        // stdstring: a libstdc++ COW string points past {length, capacity, refcount}.
        if (ptr == start + 3 * w && size >= 3 * w + 1) {
            size_t len = ((const size_t*)start)[0], cap = ((const size_t*)start)[1];
            if (len <= cap && size == 3 * w + cap + 1)
                return 1;
        }
        if (ptr == start + w) {
            // length64: a 64-bit length prefix equal to the rest of the block.
            uint64_t len = *(const uint64_t*)start;
            if (len > 0 && size - w == len)
                return 1;
            // newarray: new[] of a type with a destructor stores the element count first.
            size_t n = *(const size_t*)start;
            if (n > 0 && (size - w) % n == 0)
                return 1;
        }
        // multipleinheritance: a pointer to a secondary base, whose first word is a vtable,
        // in an object whose first word is a vtable too.
        if (size >= 2 * w && (ptr & HL_WORD_MASK) == 0 && ptr > start && ptr + w <= start + size &&
            is_vtable(c, *(const uintptr_t*)ptr) && is_vtable(c, *(const uintptr_t*)start))
            return 1;
    }
    return 0;
}

static inline unsigned state_of(const lc_t* c, size_t i) {
    return c->state[i] & ST_MASK;
}

// Block i, in its new state, waits to be scanned (unless it waits already).
static inline void set_and_push(lc_t* c, size_t i, unsigned state) {
    int waits = c->state[i] & ST_ON_STACK;
    c->state[i] = (uint8_t)(state | ST_ON_STACK);
    if (!waits)
        c->stack[c->top++] = (uint32_t)i;
}

static inline size_t pop(lc_t* c) {
    size_t i = c->stack[--c->top];
    c->state[i] &= (uint8_t)~ST_ON_STACK;
    return i;
}

// w points into block i: its state moves on as memcheck's would. A block reached already, or a
// pointer from a block not definitely reached, needs no heuristic: what it would say changes
// nothing (most interior pointers of a compiler's heap are of the first kind, and a heuristic
// reads the block's words and the pointed-to one, a cache miss each).
static HL_NOINLINE void mark_block(lc_t* c, size_t i, uintptr_t w, int prior_definite) {
    unsigned state = state_of(c, i);
    if (state == ST_REACHABLE)
        return;
    if (prior_definite && (w == c->in->starts[i] || heuristic_says_start(c, i, w)))
        set_and_push(c, i, ST_REACHABLE);
    else if (state == ST_UNREACHED)
        set_and_push(c, i, ST_POSSIBLE);
}

static void scan_range_marking(lc_t* c, uintptr_t lo, uintptr_t hi, int prior_definite) {
    lo = (lo + HL_WORD_MASK) & ~(uintptr_t)HL_WORD_MASK;
    for (uintptr_t a = lo; a + HL_WORD <= hi; a += HL_WORD) {
        long i = find_block(c, *(const uintptr_t*)a);
        if (i >= 0)
            mark_block(c, (size_t)i, *(const uintptr_t*)a, prior_definite);
    }
}

static void scan_range_clique(lc_t* c, uintptr_t lo, uintptr_t hi, size_t leader) {
    for (uintptr_t a = (lo + HL_WORD_MASK) & ~(uintptr_t)HL_WORD_MASK; a + HL_WORD <= hi;
         a += HL_WORD) {
        uintptr_t w = *(const uintptr_t*)a;
        long j = find_block(c, w);
        if (j < 0 || (size_t)j == leader || state_of(c, (size_t)j) != ST_UNREACHED)
            continue;
        c->leader[j] = (uint32_t)leader;
        set_and_push(c, (size_t)j, ST_INDIRECT);
    }
}

// A block's words, a large one's only where its pages hold anything (lc_input_t.held).
typedef struct run_s {
    lc_t* c;
    size_t leader; // SIZE_MAX: marking from the roots, with prior_definite
    int prior_definite;
} run_t;

static void scan_run(uintptr_t lo, uintptr_t hi, void* arg) {
    const run_t* r = arg;
    if (r->leader == SIZE_MAX)
        scan_range_marking(r->c, lo, hi, r->prior_definite);
    else
        scan_range_clique(r->c, lo, hi, r->leader);
}

static void scan_block(lc_t* c, size_t i, size_t leader, int prior_definite) {
    uintptr_t s = c->in->starts[i], e = s + c->in->sizes[i];
    run_t r = {c, leader, prior_definite};
    if (c->in->sizes[i] >= LC_SPARSE_MIN && c->in->held &&
        c->in->held(c->in->held_arg, s, e, scan_run, &r) == 0)
        return;
    scan_run(s, e, &r);
}

static void drain_marking(lc_t* c) {
    while (c->top > 0) {
        // A block scanned as possible and later found reachable is pushed again: its second
        // scan spreads the better state.
        size_t i = pop(c);
        scan_block(c, i, SIZE_MAX, state_of(c, i) == ST_REACHABLE);
    }
}

static void drain_clique(lc_t* c, size_t leader) {
    while (c->top > 0)
        scan_block(c, pop(c), leader, 0);
}

void lc_classify(const lc_input_t* in, uint8_t* kind, uint32_t* leader, void* workspace) {
    size_t n = in->nblocks;
    if (n == 0)
        return;
    lc_t c = {.in = in, .state = kind, .leader = leader, .stack = workspace};
    c.lo = in->starts[0];
    c.hi = in->starts[n - 1] + (in->sizes[n - 1] ? in->sizes[n - 1] : 1);
    build_granule_index(&c, (granule_t*)((char*)workspace + stack_bytes(n)), index_slots(n));
    memset(kind, ST_UNREACHED, n);

    for (size_t r = 0; r < in->nroots; r++) {
        scan_range_marking(&c, in->roots[r].lo, in->roots[r].hi, 1);
        drain_marking(&c);
    }
    for (size_t i = 0; i < n; i++) {
        if (state_of(&c, i) != ST_UNREACHED)
            continue;
        c.stack[c.top++] = (uint32_t)i; // a leader: its state stays unreached
        drain_clique(&c, i);
    }
    for (size_t i = 0; i < n; i++) {
        switch (state_of(&c, i)) {
        case ST_REACHABLE:
            kind[i] = HL_LEAK_REACHABLE;
            break;
        case ST_POSSIBLE:
            kind[i] = HL_LEAK_POSSIBLE;
            break;
        case ST_INDIRECT:
            kind[i] = HL_LEAK_INDIRECT;
            break;
        default:
            kind[i] = HL_LEAK_DEFINITE;
            break;
        }
    }
}
