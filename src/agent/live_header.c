// SPDX-License-Identifier: MIT
// live_header.c - blocks that carry their own record: large ones in a header before them, smaller
// ones over glibc in a word at their chunk's end (see "Trailers" below). While guards are on,
// malloc, calloc and realloc ask the allocator for HL_HEADER more bytes for a large block and
// hand the program the memory after them: those 16 bytes hold what a slot of the direct map
// would (size, function, stack, owner). They share a cache line with the allocator's own chunk
// header, which it has just written (malloc) or is about to read (free), so recording or
// releasing the block costs no cache miss of the agent's own; a slot of the direct map (half a
// byte per byte of heap, a slot per line when blocks are large) cost one on every call.
//
// Which addresses hold such a block is told by a mark of 2 bits per 16-byte granule (a 64th of
// the heap's span, in regions made with the heap's): LIVE at offset 0 or 8 of the granule (a
// trailer's block: LIVE8 at offset 0), or FREED, which is what tells a double free from an
// invalid one. What a freed block was is kept by record.c (its header or trailer belongs to the
// allocator once released).
#define _GNU_SOURCE
#include <string.h>
#include <sys/single_threaded.h>

#include "../common/compiler.h"
#include "epoch.h"
#include "live_levels.h"
#include "os.h"

#define MARK_GRANULE_SHIFT 4
#define MARK_GRANULES (1u << (HL_REGION_SHIFT - MARK_GRANULE_SHIFT))
#define MARK_WORDS (MARK_GRANULES / 32) // 32 marks of 2 bits per word

enum { MARK_NONE = 0, MARK_LIVE0 = 1, MARK_LIVE8 = 2, MARK_FREED = 3 };

// A region's marks are made present a page at a time, by the first mark set in it (most
// programs' headed blocks lie in a few pages of marks: making all 256 KiB present cost every
// short process a tenth of a millisecond, and each walk of them at exit as much). touched has
// a bit per page of words so set, and walks read only those pages.
#define MARK_PAGE_WORDS 512 // words per 4 KiB page
_Static_assert(MARK_WORDS / MARK_PAGE_WORDS <= 64, "a bit per page in one word");
typedef struct marks_s {
    _Atomic uint64_t word[MARK_WORDS]; // page-aligned, as the mapping is
    _Atomic uint64_t touched;
} marks_t;

// The record before the block. owner: thread index (24 bits) << 8 | guarded << 7 | fn.
// size: the requested size (HL_SIZE_BITS) | epoch (HL_EPOCH_BITS) | ignored (1) | internal (1).
// (A header block of 1 TiB or more would spill its size into the label; no allocator here
// hands one out.)
typedef struct header_s {
    uint64_t size;
    uint32_t stack;
    uint32_t owner;
} header_t;

_Static_assert(sizeof(header_t) == HL_HEADER, "the header is what hooks.c makes room for");
#define H_EPOCH_SHIFT HL_SIZE_BITS
#define H_IGNORED (1ull << (HL_SIZE_BITS + HL_EPOCH_BITS))
#define H_INTERNAL (1ull << (HL_SIZE_BITS + HL_EPOCH_BITS + 1)) // recorded while paused
#define H_SIZE_MASK ((1ull << HL_SIZE_BITS) - 1)

_Atomic int hl_headers_used;
static region_dir_t regions; // of marks, for 16 MiB of heap each

// Trailers. Over glibc's malloc a smaller block keeps its record in the last word of its chunk
// (layout_plain makes the room), after the block and its guard: the guard's check reads that
// line at the release anyway, and glibc's own chunk header (the size word before the block)
// says where the chunk ends, so the record costs no cache miss of its own, where a slot of the
// direct map cost one (and half a byte per byte of the heap's span). The block's pointer stays
// the allocator's own, so a block whose record does not fit a word (the bits below) goes to the
// direct map unchanged, and the scan sees every pointer where it would without the agent (a
// header moves it 16 bytes into the chunk, onto addresses glibc's free lists hold).
// Marked MARK_LIVE8 at offset 0 of its granule: over glibc every block is 16-aligned, so that
// mark means nothing else there.
//   bits 0-5: the chunk's usable bytes - HL_TRAILER - the block's size (guard and rounding)
//   6-10: fn | 11: ignored | 12-36: stack | 37-52: epoch label | 53-63: owner thread index
// (guarded always; internal blocks never have one).
int hl_trailers_on;
static size_t trailer_guard; // the guard bytes between a block and its trailer
// MARK_LIVE8 is a trailer's mark from the first time trailers were on: a later session that
// turns them off (attach sets no guards) still finds the blocks made before it.
static int trailers_marked;

void live_trailers_set(int on, size_t guard) {
    hl_trailers_on = on && guard && UINTPTR_MAX > 0xffffffffu;
    trailer_guard = guard;
    if (hl_trailers_on)
        trailers_marked = 1;
}
#define T_TAIL_BITS 6
#define T_FN_SHIFT 6
#define T_FN_BITS 5
#define T_IGNORED (1ull << 11)
#define T_STACK_SHIFT 12
#define T_STACK_BITS 25
#define T_EPOCH_SHIFT 37
#define T_THREAD_SHIFT 53
#define T_THREAD_BITS 11
_Static_assert(T_EPOCH_SHIFT + HL_EPOCH_BITS == T_THREAD_SHIFT, "the epoch label fits its bits");
_Static_assert(T_THREAD_SHIFT + T_THREAD_BITS == 64, "the fields fill the word");
#define T_GLIBC_MMAPPED 2 // glibc's chunk size flag: the chunk is a mapping of its own

// The usable bytes of the glibc chunk whose pointer is addr, 0 for a mapped chunk.
static inline size_t chunk_usable(uintptr_t addr) {
    size_t word = ((const size_t*)addr)[-1];
    return (word & T_GLIBC_MMAPPED) ? 0 : (word & ~(size_t)7) - sizeof(size_t);
}
static inline _Atomic uint64_t* trailer_at(uintptr_t addr) {
    return (_Atomic uint64_t*)(addr + chunk_usable(addr) - HL_TRAILER);
}

void header_init(void) {
    region_dir_init(&regions);
}

static inline marks_t* marks_of(uintptr_t a) {
    return region_dir_get(&regions, a);
}
static inline _Atomic uint64_t* mark_word(marks_t* m, uintptr_t a) {
    return &m->word[(a >> (MARK_GRANULE_SHIFT + 5)) & (MARK_WORDS - 1)];
}
static inline unsigned mark_shift(uintptr_t a) {
    return (unsigned)((a >> MARK_GRANULE_SHIFT) & 31) * 2;
}

static HL_COLD marks_t* region_make(uintptr_t a) {
    return region_dir_make(&regions, a, os_map, sizeof(marks_t));
}

static inline uint64_t page_bit(const _Atomic uint64_t* w, const marks_t* m) {
    return 1ull << ((uint32_t)(w - m->word) / MARK_PAGE_WORDS);
}

// The first mark in a page of words: it is written before it is read (an insert reads its word
// first, and a page first read is a zero page the write then copies: a second fault, and a TLB
// flush on every CPU). Adding 0 changes no mark another thread may be setting meanwhile.
static HL_COLD void touch_page(marks_t* m, _Atomic uint64_t* w) {
    atomic_fetch_or(w, 0);
    atomic_fetch_or(&m->touched, page_bit(w, m));
}

int live_header_room(uintptr_t addr) {
    if (hl_unlikely(!regions.at || addr_beyond(addr) || (addr & 7)))
        return 0;
    return hl_likely(marks_of(addr) != NULL) || region_make(addr) != NULL;
}

// While glibc runs the process single-threaded no other thread changes marks (the writer never
// does), and a plain store spares the locked instruction's wait for every earlier store.
static inline void set_mark_in(marks_t* m, uintptr_t a, unsigned mark) {
    _Atomic uint64_t* w = mark_word(m, a);
    if (hl_unlikely(!(atomic_load_explicit(&m->touched, memory_order_relaxed) & page_bit(w, m))))
        touch_page(m, w);
    unsigned sh = mark_shift(a);
    uint64_t v = atomic_load_explicit(w, memory_order_relaxed);
    if (hl_likely(__libc_single_threaded)) {
        atomic_store_explicit(w, (v & ~(3ull << sh)) | (uint64_t)mark << sh, memory_order_release);
        return;
    }
    while (!atomic_compare_exchange_weak_explicit(w, &v, (v & ~(3ull << sh)) | (uint64_t)mark << sh,
                                                  memory_order_release, memory_order_relaxed))
        ;
}
static inline void set_mark(uintptr_t a, unsigned mark) {
    set_mark_in(marks_of(a), a, mark);
}

void header_insert(const hl_block_t* b) {
    header_t* h = (header_t*)(b->addr - HL_HEADER);
    // A block of 1 TiB or more is never given a header (hooks.c): the size fits its bits.
    h->size = b->size | (uint64_t)(b->epoch & HL_EPOCH_MASK) << H_EPOCH_SHIFT |
              (b->ignored ? H_IGNORED : 0) | (b->is_internal ? H_INTERNAL : 0);
    h->stack = b->stack;
    h->owner = (b->thread & 0xffffff) << 8 | (uint32_t)(b->guarded != 0) << 7 | (b->fn & 127);
    if (hl_unlikely(!atomic_load_explicit(&hl_headers_used, memory_order_relaxed)))
        atomic_store(&hl_headers_used, 1);
    set_mark(b->addr, (b->addr & 8) ? MARK_LIVE8 : MARK_LIVE0); // publishes the header
}

// 1 when b's record went into its trailer; 0 when it does not fit one (the direct map's then).
int trailer_insert(const hl_block_t* b) {
#if UINTPTR_MAX > 0xffffffffu
    if (!b->guarded || b->headed || b->is_internal || (b->addr & 15) || addr_beyond(b->addr) ||
        (b->stack >> T_STACK_BITS) || (b->thread >> T_THREAD_BITS) || (b->fn >> T_FN_BITS))
        return 0;
    size_t usable = chunk_usable(b->addr);
    if (usable < HL_TRAILER + trailer_guard || usable - HL_TRAILER - trailer_guard < b->size)
        return 0; // a mapped chunk, or no room after the guard (an aligned block's chunk)
    size_t tail = usable - HL_TRAILER - b->size;
    if ((tail >> T_TAIL_BITS) || hl_unlikely(!regions.at))
        return 0;
    marks_t* m = marks_of(b->addr);
    if (hl_unlikely(!m) && !(m = region_make(b->addr)))
        return 0;
    _Atomic uint64_t* w = (_Atomic uint64_t*)(b->addr + usable - HL_TRAILER);
    atomic_store_explicit(w,
                          tail | (uint64_t)b->fn << T_FN_SHIFT | (b->ignored ? T_IGNORED : 0) |
                              (uint64_t)b->stack << T_STACK_SHIFT |
                              (uint64_t)(b->epoch & HL_EPOCH_MASK) << T_EPOCH_SHIFT |
                              (uint64_t)b->thread << T_THREAD_SHIFT,
                          memory_order_relaxed);
    if (hl_unlikely(!atomic_load_explicit(&hl_headers_used, memory_order_relaxed)))
        atomic_store(&hl_headers_used, 1);
    set_mark_in(m, b->addr, MARK_LIVE8); // publishes the trailer
    return 1;
#else
    (void)b;
    return 0;
#endif
}

// The two lines a trailer block's release reads before its trailer: its mark's and the one with
// glibc's size word (the trailer's own line follows from that word; the guard's check reads it
// again right after).
void trailer_prefetch(uintptr_t addr) {
    if (hl_unlikely(!regions.at || addr_beyond(addr)))
        return;
    marks_t* m = marks_of(addr);
    if (hl_likely(m != NULL))
        __builtin_prefetch(mark_word(m, addr), 1, 3);
    __builtin_prefetch((const void*)(addr - sizeof(size_t)), 0, 3);
}

static void trailer_unpack(uintptr_t addr, hl_block_t* b) {
    size_t usable = chunk_usable(addr);
    uint64_t w =
        atomic_load_explicit((_Atomic uint64_t*)(addr + usable - HL_TRAILER), memory_order_relaxed);
    memset(b, 0, sizeof *b);
    b->addr = addr;
    b->size = usable - HL_TRAILER - (w & ((1u << T_TAIL_BITS) - 1));
    b->fn = (uint8_t)((w >> T_FN_SHIFT) & ((1u << T_FN_BITS) - 1));
    b->guarded = 1;
    b->ignored = (w & T_IGNORED) != 0;
    b->stack = (uint32_t)(w >> T_STACK_SHIFT) & ((1u << T_STACK_BITS) - 1);
    b->epoch = epoch_expand((uint32_t)(w >> T_EPOCH_SHIFT) & HL_EPOCH_MASK);
    b->thread = (uint32_t)(w >> T_THREAD_SHIFT);
    b->trailed = 1;
    b->state = HL_BLOCK_LIVE;
}

static inline void unpack(uintptr_t addr, const header_t* h, hl_block_t* b) {
    memset(b, 0, sizeof *b);
    b->addr = addr;
    b->size = h->size & H_SIZE_MASK;
    b->epoch = epoch_expand((uint32_t)(h->size >> H_EPOCH_SHIFT) & HL_EPOCH_MASK);
    b->ignored = (h->size & H_IGNORED) != 0;
    b->is_internal = (h->size & H_INTERNAL) != 0;
    b->stack = h->stack;
    b->fn = (uint8_t)(h->owner & 127);
    b->guarded = (h->owner >> 7) & 1;
    b->thread = h->owner >> 8;
    b->headed = 1;
    b->state = HL_BLOCK_LIVE;
}

int header_take(uintptr_t addr, hl_block_t* out, int release) {
    if (hl_unlikely(addr_beyond(addr)))
        return HL_BLOCK_EMPTY;
    marks_t* m = marks_of(addr);
    if (!m)
        return HL_BLOCK_EMPTY;
    _Atomic uint64_t* w = mark_word(m, addr);
    unsigned sh = mark_shift(addr);
    unsigned live = (addr & 8) ? MARK_LIVE8 : MARK_LIVE0;
    uint64_t v = atomic_load_explicit(w, memory_order_acquire);
    int trailed = 0;
    for (;;) {
        unsigned mark = (unsigned)(v >> sh) & 3;
        if (mark == MARK_FREED)
            return HL_BLOCK_FREED;
        trailed = trailers_marked && mark == MARK_LIVE8;
        if (trailed ? (addr & 15) != 0 : mark != live || (addr & 7))
            return HL_BLOCK_EMPTY; // nothing here, or not the start of the block here
        if (!release)
            break;
        if (hl_likely(__libc_single_threaded)) {
            atomic_store_explicit(w, v | (3ull << sh), memory_order_relaxed);
            break;
        }
        // Two threads releasing one block: one wins, the other sees FREED.
        if (atomic_compare_exchange_weak_explicit(w, &v, v | (3ull << sh), memory_order_acq_rel,
                                                  memory_order_acquire))
            break;
    }
    if (trailed)
        trailer_unpack(addr, out);
    else
        unpack(addr, (const header_t*)(addr - HL_HEADER), out);
    return HL_BLOCK_LIVE;
}

// Every live header block in address order (in the pages of marks some mark was set in).
void header_for_each(void (*fn)(const hl_block_t* b, void* arg), void* arg) {
    uint32_t n = atomic_load(&regions.nmade);
    for (uint32_t i = 0; i < n; i++) {
        uintptr_t base;
        marks_t* m = region_dir_nth(&regions, i, &base);
        if (!m)
            continue;
        uint64_t touched = atomic_load_explicit(&m->touched, memory_order_acquire);
        for (uint32_t j = 0; j < MARK_WORDS; j++) {
            if (!(touched & (1ull << (j / MARK_PAGE_WORDS)))) {
                j += MARK_PAGE_WORDS - 1; // the page's first word: the loop steps to the next
                continue;
            }
            uint64_t v = atomic_load_explicit(&m->word[j], memory_order_acquire);
            // One bit per live mark (01 or 10; FREED is 11), at the pair's low bit.
            uint64_t live = (v ^ (v >> 1)) & 0x5555555555555555ull;
            while (live) {
                unsigned k = (unsigned)__builtin_ctzll(live);
                live &= live - 1;
                unsigned mark = (unsigned)(v >> k) & 3;
                int trailed = trailers_marked && mark == MARK_LIVE8;
                uintptr_t a = base + (((uintptr_t)j * 32 + k / 2) << MARK_GRANULE_SHIFT) +
                              (mark == MARK_LIVE8 && !trailed ? 8 : 0);
                hl_block_t b;
                if (trailed)
                    trailer_unpack(a, &b);
                else
                    unpack(a, (const header_t*)(a - HL_HEADER), &b);
                fn(&b, arg);
            }
        }
    }
}

void header_reset_after_fork(void) {
    region_dir_reset_after_fork(&regions);
}

// The header's size word is relabelled by compare-and-swap once its mark says LIVE: if the
// block is released in between, the word is the allocator's (a free-list link), which equals
// the expected size, label and flags only by a coincidence of 2^-58, and then is left as it was.
// A trailer's word likewise (the allocator's once released: a free chunk's last word is the
// next chunk's record of its size, which equals the expected word as rarely).
static void rebase_one(const hl_block_t* b, void* arg) {
    const uint32_t* nf = arg;
    _Atomic uint64_t* w =
        b->trailed ? trailer_at(b->addr) : (_Atomic uint64_t*)(b->addr - HL_HEADER);
    unsigned shift = b->trailed ? T_EPOCH_SHIFT : H_EPOCH_SHIFT;
    uint64_t v = atomic_load_explicit(w, memory_order_relaxed);
    uint32_t label = (uint32_t)(v >> shift) & HL_EPOCH_MASK;
    uint32_t to = epoch_clamp_at(nf[0], nf[1], label);
    uint64_t relabelled = (v & ~((uint64_t)HL_EPOCH_MASK << shift)) | (uint64_t)to << shift;
    if (to != label)
        atomic_compare_exchange_strong(w, &v, relabelled);
}

void header_epoch_rebase(uint32_t now, uint32_t floor) {
    uint32_t nf[2] = {now, floor};
    header_for_each(rebase_one, nf);
}

// The program must not release the block while it asks for this (as for any use of it).
int header_set_ignored(uintptr_t addr) {
    hl_block_t b;
    if (header_take(addr, &b, 0) != HL_BLOCK_LIVE)
        return -1;
    if (b.trailed)
        atomic_fetch_or(trailer_at(addr), T_IGNORED);
    else
        atomic_fetch_or((_Atomic uint64_t*)(addr - HL_HEADER), H_IGNORED);
    return 0;
}
