// SPDX-License-Identifier: MIT
// sites.c - the writer's numbering of allocation sites: the k-th distinct (size, stack) pair
// written in an ALLOC or INHERIT record is site k (format.h). A FREE names its block's site in
// one small number instead of a size and a stack, and a program's repeating pattern of frees
// stays a repeating pattern of bytes. Writer thread only (or under the writer lock).
//
// The reader numbers sites by the same rule, so the writer must know every pair it has
// written: if the table cannot grow, numbering goes on without it (sites_broken) and FREEs are
// written in full from then on.
#define _GNU_SOURCE
#include <string.h>

#include "../common/compiler.h"
#include "os.h"
#include "sites.h"

// A slot of the table: 12 bytes, not 16 (the table is the writer's largest: a compiler's
// hundreds of thousands of (size, stack) pairs kept 4 MiB of it). Stack ids are below 2^25
// (stacks.c makes at most 24 Mi nodes), which leaves 7 bits of the word for a size's bits 32-38;
// a pair that does not fit so (a block of 512 GiB or more) is kept in `wide`.
typedef struct site_slot_s {
    uint32_t size_low;   // the size's low 32 bits
    uint32_t stack_high; // stack | the size's bits 32-38 << HL_SITE_STACK_BITS
    uint32_t number;     // 0: empty
} site_slot_t;
#define HL_SITE_STACK_BITS 25
#define HL_SITE_SIZE_BITS (32 + 32 - HL_SITE_STACK_BITS)

static inline int fits_slot(uint64_t size, uint32_t stack) {
    return (stack >> HL_SITE_STACK_BITS) == 0 && (size >> HL_SITE_SIZE_BITS) == 0;
}
static inline uint32_t stack_high(uint64_t size, uint32_t stack) {
    return stack | (uint32_t)(size >> 32) << HL_SITE_STACK_BITS;
}
static inline uint64_t slot_size(const site_slot_t* s) {
    return (uint64_t)(s->stack_high >> HL_SITE_STACK_BITS) << 32 | s->size_low;
}

// The pairs that do not fit a slot, searched in turn: no program makes more than a few.
#define HL_WIDE_SITES 16
static struct {
    uint64_t size;
    uint32_t stack, number;
} wide[HL_WIDE_SITES];
static uint32_t nwide;

static site_slot_t* slots;
static uint32_t mask;    // capacity - 1
static uint32_t defined; // sites numbered so far (the last number given)
static uint32_t hashed;  // of them, in the table
static int is_broken;

// A stack's first site, by stack id: most stacks are written with one size, so most sites
// are found here at the place their stack's id gives, not by a probe at a random place of a
// table (a cache miss and, past the TLB's reach, a page walk; a program with millions of call
// paths has as many sites). Stacks are numbered as they are made, so the stacks a program uses
// at a time lie together here. A stack's other sizes (and sizes of 4 GiB and more) go to the
// table. Chunks of 64 Ki stacks (512 KiB) are made as stack ids reach them, and made present
// a piece at a time as ids reach the piece.
typedef struct first_s {
    uint32_t number; // 0: the stack has no site here yet
    uint32_t size;
} first_t;
#define HL_FIRST_SHIFT 16
#define HL_FIRST_CHUNK (1u << HL_FIRST_SHIFT)
#define HL_FIRST_CHUNKS 512 // 32 Mi stack ids, more than stacks.c makes (HL_STACK_NODES)
// An entry is read before it is first written: a page first read is the shared zero page, and
// the write that follows is a copy-on-write fault that flushes the TLB of every CPU the
// program runs on (an interrupt of its threads per page: 9% of a run of churn_unique's 2.4M
// new stacks). So a piece is made present and written in one call before any of its entries
// is read; 16 KiB (2 Ki stacks) keeps a short process's first piece to four page clears.
#define HL_FIRST_PIECE_SHIFT 11
#define HL_FIRST_PIECES (HL_FIRST_CHUNK >> HL_FIRST_PIECE_SHIFT)
_Static_assert(HL_FIRST_PIECES <= 32, "a chunk's pieces fit one word of bits");
static first_t* firsts[HL_FIRST_CHUNKS];
static uint32_t firsts_present[HL_FIRST_CHUNKS]; // bit k: piece k was made present

static HL_COLD void piece_make_present(uint32_t c, uint32_t piece) {
    first_t* at = &firsts[c][piece << HL_FIRST_PIECE_SHIFT];
    size_t bytes = ((size_t)1 << HL_FIRST_PIECE_SHIFT) * sizeof(first_t);
    // Without MADV_POPULATE_WRITE (kernels before 5.14): the entries are then written before
    // they are read, page by page, which makes them present just as well.
    if (os_populate(at, bytes) != 0)
        for (size_t k = 0; k < bytes / sizeof *at; k += 4096 / sizeof *at)
            at[k].number = 0;
    firsts_present[c] |= 1u << piece;
}

// The stack's entry, its chunk made if make says so; NULL when it has none (or, without make,
// when its piece was never made present: no site is there).
static inline first_t* first_of(uint32_t stack, int make) {
    uint32_t c = stack >> HL_FIRST_SHIFT;
    if (hl_unlikely(c >= HL_FIRST_CHUNKS))
        return NULL;
    if (hl_unlikely(!firsts[c])) {
        if (!make || !(firsts[c] = os_map(HL_FIRST_CHUNK * sizeof(first_t))))
            return NULL;
    }
    uint32_t piece = (stack & (HL_FIRST_CHUNK - 1)) >> HL_FIRST_PIECE_SHIFT;
    if (hl_unlikely(!(firsts_present[c] & (1u << piece)))) {
        if (!make)
            return NULL;
        piece_make_present(c, piece);
    }
    return &firsts[c][stack & (HL_FIRST_CHUNK - 1)];
}

static inline uint32_t hash_of(uint64_t size, uint32_t stack) {
    uint64_t h = (size * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)stack * 0xC2B2AE3D27D4EB4Full);
    return (uint32_t)(h >> 32);
}

// Within a page at first: the few sites of a short process with a second size each fault in one
// page, not one per site across a larger table. It doubles once three quarters full: a probe
// reads five slots a cache line, and a compiler's tens of thousands of sites kept a table of
// 2 MiB at half full, 1 MiB this way (of 16-byte slots).
#define HL_SITES_FIRST_SLOTS 256u // a power of two (the table's mask), 3 KiB
_Static_assert(HL_SITES_FIRST_SLOTS * sizeof(site_slot_t) <= 4096, "the first table in a page");

// The table grows while it stays within a share of the program's memory (the largest RSS the
// writer has sampled, this table included) or below HL_SITES_TABLE_FLOOR. A program whose every
// allocation has a (size, stack) pair of its own (churn_mix: 1.2M sites) gains little from
// numbering them, where its table of 12 MiB doubled the agent's memory: past the share,
// numbering stops (sites_broken) and the table is given back.
#define HL_SITES_RSS_SHARE 16
#define HL_SITES_TABLE_FLOOR ((size_t)4 << 20)
static uint64_t rss_peak; // bytes (sites_note_rss)

void sites_note_rss(uint64_t bytes) {
    if (bytes > rss_peak)
        rss_peak = bytes;
}

static HL_COLD int grow(void) {
    uint32_t cap = slots ? (mask + 1) * 2 : HL_SITES_FIRST_SLOTS;
    size_t bytes = (size_t)cap * sizeof(site_slot_t);
    if (bytes > HL_SITES_TABLE_FLOOR && bytes > rss_peak / HL_SITES_RSS_SHARE)
        return -1;
    // Probed at random: past a few MiB in huge pages, so a probe is not a page walk as well
    // (a program with millions of call paths has as many sites).
    site_slot_t* fresh = os_map_dense_huge((size_t)cap * sizeof *fresh);
    if (!fresh)
        return -1;
    if (slots) {
        for (uint32_t i = 0; i <= mask; i++) {
            if (!slots[i].number)
                continue;
            uint32_t j = hash_of(slot_size(&slots[i]), slots[i].stack_high) & (cap - 1);
            while (fresh[j].number)
                j = (j + 1) & (cap - 1);
            fresh[j] = slots[i];
        }
        os_unmap(slots, (size_t)(mask + 1) * sizeof *slots);
    }
    slots = fresh;
    mask = cap - 1;
    return 0;
}

// The pair's slot, or the empty slot where it belongs (a pair that fits one).
static inline site_slot_t* find(uint64_t size, uint32_t stack) {
    uint32_t key = stack_high(size, stack), low = (uint32_t)size;
    uint32_t i = hash_of(size, key) & mask;
    for (;; i = (i + 1) & mask) {
        site_slot_t* s = &slots[i];
        if (!s->number || (s->size_low == low && s->stack_high == key))
            return s;
    }
}

// The number of a pair kept in `wide`, or 0.
static uint32_t wide_number(uint64_t size, uint32_t stack) {
    for (uint32_t k = 0; k < nwide; k++)
        if (wide[k].size == size && wide[k].stack == stack)
            return wide[k].number;
    return 0;
}

// A pair that fits no slot: numbered in `wide` while it has room; past that, numbering stops
// (sites_broken: FREEs are written in full).
static HL_COLD void note_wide(uint64_t size, uint32_t stack) {
    if (wide_number(size, stack))
        return;
    if (nwide == HL_WIDE_SITES) {
        is_broken = 1;
        return;
    }
    wide[nwide].size = size;
    wide[nwide].stack = stack;
    wide[nwide++].number = ++defined;
}

void sites_note(uint64_t size, uint32_t stack) {
    if (is_broken)
        return;
    first_t* f = size <= UINT32_MAX ? first_of(stack, 1) : NULL;
    if (f) {
        if (f->size == size && f->number)
            return;
        if (!f->number) {
            *f = (first_t){.number = ++defined, .size = (uint32_t)size};
            return;
        }
    }
    if (hl_unlikely(!fits_slot(size, stack))) {
        note_wide(size, stack);
        return;
    }
    if ((!slots || hashed + 1 > (mask + 1) / 4 * 3) && grow() != 0) {
        is_broken = 1;
        if (slots) { // unused from here on (a fork child's numbering starts without it)
            os_unmap(slots, (size_t)(mask + 1) * sizeof *slots);
            slots = NULL;
            mask = 0;
        }
        return;
    }
    site_slot_t* s = find(size, stack);
    if (!s->number) {
        *s = (site_slot_t){.size_low = (uint32_t)size,
                           .stack_high = stack_high(size, stack),
                           .number = ++defined};
        hashed++;
    }
}

uint32_t sites_number(uint64_t size, uint32_t stack) {
    if (is_broken)
        return 0;
    const first_t* f = size <= UINT32_MAX ? first_of(stack, 0) : NULL;
    if (f && f->number && f->size == size)
        return f->number;
    if (hl_unlikely(!fits_slot(size, stack)))
        return wide_number(size, stack);
    if (!slots)
        return 0;
    return find(size, stack)->number;
}

// A new trace (a fork child's) numbers from 1 again.
static void forget_sites(void) {
    for (uint32_t c = 0; c < HL_FIRST_CHUNKS; c++) {
        if (firsts[c])
            os_discard(firsts[c], HL_FIRST_CHUNK * sizeof(first_t)); // reads as zeros again
        firsts_present[c] = 0; // and its pages are gone: made present again as used
    }
    defined = 0;
    hashed = 0;
    nwide = 0;
    is_broken = 0;
}

void sites_reset(void) {
    if (slots)
        memset(slots, 0, (size_t)(mask + 1) * sizeof *slots);
    forget_sites();
}

void sites_reset_after_fork(void) {
    if (slots)
        os_discard(slots, (size_t)(mask + 1) * sizeof *slots);
    forget_sites();
}
