// SPDX-License-Identifier: MIT
// gpage.c - sampled guard pages. One pool of address space, reserved once: GPAGE_SLOTS data
// pages, each between two inaccessible pages (guard page k lies before data page k, guard page
// k + 1 after it). A sampled block (one allocation in N, up to a page) is placed at the end of
// its data page, so the first byte past it faults, or with --guard-pages-before at its start,
// so the first byte before it does (the bytes after the block to its 16-byte boundary, where
// the alignment leaves some, carry a guard pattern checked at release). A released block's
// page is made inaccessible and its slot goes to the back of a first-in first-out list: it is
// not reused until every other free slot has been, so a use after free faults for as long as
// possible.
//
// The fault handler (hooks_signal.c) asks gpage_fault first: a fault in the pool is reported
// with the faulting instruction's stack, the address, read or write, the block's allocation
// and release stacks; the page is then made accessible and the access retried, so the program
// goes on as it would have without heaplens (one report per page).
#define _GNU_SOURCE
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "../common/format.h"
#include "errors.h"
#include "gpage.h"
#include "gsites.h"
#include "layout.h"
#include "live.h"
#include "options.h"
#include "os.h"
#include "record.h"
#include "unwind.h"
#include "writer.h"

// Slots: 4096 of two pages each (32 MiB of address space with 4 KiB pages, 16 MiB of it
// usable at most), as many as GWP-ASan's largest default pool: a sampled program never holds
// that many sampled blocks, and a released one waits for 4095 others before its reuse.
#define GPAGE_SLOTS 4096u

enum { SLOT_FREE = 0, SLOT_LIVE = 1, SLOT_FREED = 2 };

typedef struct slot_s {
    uintptr_t addr;
    uint64_t size;
    uint32_t stack, release_stack;
    uint8_t state, fn;
} slot_t;

uintptr_t hl_gpage_lo, hl_gpage_hi;
static size_t page;
static slot_t* slots;
static _Atomic uint8_t* guard_opened; // per guard page: made accessible by a fault
static uint32_t* fifo; // free slots, oldest released first
static uint64_t fifo_head, fifo_tail;
static _Atomic uint64_t sampled;
static _Atomic int lock;
static _Atomic int made; // 0 not yet, 1 made, -1 could not be

static void gpage_lock(void) {
    while (atomic_exchange_explicit(&lock, 1, memory_order_acquire))
        os_yield();
}
static void gpage_unlock(void) {
    atomic_store_explicit(&lock, 0, memory_order_release);
}

static int protect(uintptr_t at, int prot) {
    return (int)syscall(SYS_mprotect, at, page, prot);
}

// The pool, made on the first sampled allocation (under the lock). In the agent's ranges, so
// the leak scan takes none of it for roots; its live blocks are scanned as blocks.
static HL_COLD int make_pool(void) {
    page = (size_t)sysconf(_SC_PAGESIZE);
    size_t span = ((size_t)GPAGE_SLOTS * 2 + 1) * page;
    char* pool = os_reserve(span);
    slots = os_map(GPAGE_SLOTS * sizeof *slots);
    fifo = os_map(GPAGE_SLOTS * sizeof *fifo);
    guard_opened = os_map(GPAGE_SLOTS + 1);
    if (!pool || !slots || !fifo || !guard_opened ||
        syscall(SYS_mprotect, pool, span, PROT_NONE) != 0)
        return -1;
    for (uint32_t i = 0; i < GPAGE_SLOTS; i++)
        fifo[i] = i;
    fifo_tail = GPAGE_SLOTS;
    hl_gpage_lo = (uintptr_t)pool;
    hl_gpage_hi = (uintptr_t)pool + span;
    return 0;
}

static inline uintptr_t guard_page(uint32_t k) {
    return hl_gpage_lo + (uintptr_t)k * 2 * page;
}
static inline uintptr_t data_page(uint32_t slot) {
    return guard_page(slot) + page;
}

// The bytes after the block to its 16-byte boundary (at most 15: the alignment's slack).
static inline size_t slack_of(uint64_t size) {
    return (size_t)(((size ? size : 1) + 15) / 16 * 16 - size);
}

// A guard page a fault made accessible is made inaccessible again before its slot is reused.
static int reguard(uint32_t k) {
    if (!atomic_load_explicit(&guard_opened[k], memory_order_relaxed))
        return 0;
    atomic_store_explicit(&guard_opened[k], 0, memory_order_relaxed);
    return protect(guard_page(k), PROT_NONE);
}

void* gpage_alloc(hl_thread_t* t, size_t size, size_t align, int fn, int is_zeroed,
                  uint32_t* stack) {
    if (size > page && page)
        return NULL;
    // --guard-sites: the stack decides, before the count. It is the one the allocation is
    // recorded with (here or by the caller): unwound once either way.
    if (hl_unlikely(hl_gsites_on)) {
        *stack = stack_capture(t);
        if (!gsites_match(*stack))
            return NULL;
    }
    // A plain load and store, not a locked add: two threads counting at once may count one
    // allocation twice or skip one, which moves the sample, and costs no locked instruction
    // (the wait for every earlier store) on each allocation.
    uint64_t n = atomic_load_explicit(&sampled, memory_order_relaxed);
    atomic_store_explicit(&sampled, n + 1, memory_order_relaxed);
    if (n % (uint64_t)hl_opt.gpage_every)
        return NULL;
    gpage_lock();
    if (hl_unlikely(atomic_load(&made) == 0))
        atomic_store(&made, make_pool() == 0 ? 1 : -1);
    if (atomic_load(&made) < 0 || fifo_head == fifo_tail || size > page ||
        (align > page && page)) {
        gpage_unlock();
        return NULL;
    }
    uint32_t slot = fifo[fifo_head++ % GPAGE_SLOTS];
    slot_t* s = &slots[slot];
    gpage_unlock();
    uintptr_t data = data_page(slot);
    if (protect(data, PROT_READ | PROT_WRITE) != 0 || reguard(slot) != 0 ||
        reguard(slot + 1) != 0) {
        gpage_lock(); // no page to give: the slot goes back, the block is laid out as usual
        fifo[fifo_tail++ % GPAGE_SLOTS] = slot;
        gpage_unlock();
        return NULL;
    }
    if (align < 16)
        align = 16;
    size_t rounded = ((size ? size : 1) + align - 1) & ~(align - 1);
    char* p = (char*)(hl_opt.gpage_before ? data : data + page - rounded);
    // The slack after the block keeps the guard pattern; the block, its bytes (a slot's page
    // keeps what its last block left) as the allocator would give them.
    size_t slack = slack_of(size);
    for (size_t i = 0; i < slack; i++)
        p[size + i] = (char)(0xA5 ^ (i * 0x3B));
    if (is_zeroed)
        memset(p, 0, size);
    else if (hl_opt.paint_alloc >= 0)
        memset(p, hl_opt.paint_alloc, size);
    s->addr = (uintptr_t)p;
    s->size = size;
    s->fn = (uint8_t)fn;
    s->release_stack = 0;
    atomic_store_explicit((_Atomic uint8_t*)&s->state, SLOT_LIVE, memory_order_release);
    record_alloc_with(t, p, size, fn, 0, *stack);
    return p;
}

void gpage_release(const hl_block_t* b, uint32_t release_stack, int fn) {
    uint32_t slot = (uint32_t)((b->addr - hl_gpage_lo) / (2 * page));
    slot_t* s = &slots[slot];
    size_t slack = slack_of(b->size);
    const uint8_t* after = (const uint8_t*)b->addr + b->size;
    hl_change_t c = {0};
    for (size_t i = 0; i < slack; i++) {
        if (after[i] != (uint8_t)(0xA5 ^ (i * 0x3B))) {
            if (!c.length) {
                c.offset = (int64_t)(b->size + i);
                c.n = 0;
            }
            c.length = b->size + i + 1 - (uint64_t)c.offset;
        }
    }
    if (c.length) {
        for (uint32_t k = 0; k < c.length && k < HL_CHANGE_BYTES; k++) {
            size_t i = (size_t)c.offset - b->size + k;
            c.seen[k] = after[i];
            c.expected[k] = (uint8_t)(0xA5 ^ (i * 0x3B));
            c.n = k + 1;
        }
        error_report_change(HL_ERR_OVERFLOW, fn, b->addr, b, 0, &c, 0);
    }
    s->stack = b->stack;
    s->release_stack = release_stack;
    s->fn = b->fn;
    atomic_store_explicit((_Atomic uint8_t*)&s->state, SLOT_FREED, memory_order_release);
    protect(data_page(slot), PROT_NONE);
    gpage_lock();
    fifo[fifo_tail++ % GPAGE_SLOTS] = slot;
    gpage_unlock();
}

void gpage_reset_after_fork(void) {
    atomic_store(&lock, 0);
}

// x86-64's page fault error code: bit 1 says the access was a write.
#define PF_WRITE 2

int gpage_fault(const siginfo_t* si, void* ucontext) {
    uintptr_t a = (uintptr_t)si->si_addr;
    if (!gpage_owns(a))
        return 0;
    uint64_t k = (a - hl_gpage_lo) / page; // guard pages are even, data pages odd
    int in_guard = !(k & 1);
    // A guard page's block: the one before it, or with --guard-pages-before the one after it.
    int64_t at_slot =
        in_guard ? (int64_t)(k / 2) - (hl_opt.gpage_before ? 0 : 1) : (int64_t)(k / 2);
    slot_t none = {0};
    slot_t* s = at_slot >= 0 && at_slot < GPAGE_SLOTS ? &slots[at_slot] : &none;
    int is_write = 0;
#if defined(__x86_64__)
    const ucontext_t* uc = ucontext;
    is_write = (uc->uc_mcontext.gregs[REG_ERR] & PF_WRITE) != 0;
    uintptr_t ip = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#else
    (void)ucontext;
    uintptr_t ip = 0;
#endif
    int state = atomic_load_explicit((_Atomic uint8_t*)&s->state, memory_order_acquire);
    hl_block_t b = {0};
    int kind;
    if (state == SLOT_FREE) {
        kind = HL_ERR_INVALID_ACCESS;
    } else {
        b.addr = s->addr;
        b.size = s->size;
        b.fn = s->fn;
        b.stack = s->stack;
        if (state == SLOT_LIVE) {
            hl_block_t live;
            if (live_lookup(s->addr, &live) == HL_BLOCK_LIVE)
                b = live;
        }
        if (in_guard && hl_opt.gpage_before)
            kind = is_write ? HL_ERR_UNDERFLOW : HL_ERR_READ_UNDERFLOW;
        else if (in_guard)
            kind = is_write ? HL_ERR_OVERFLOW : HL_ERR_READ_OVERFLOW;
        else if (state == SLOT_FREED)
            kind = is_write ? HL_ERR_WRITE_AFTER_FREE : HL_ERR_READ_AFTER_FREE;
        else
            kind = HL_ERR_INVALID_ACCESS;
    }
    hl_thread_t* t = thread_self();
    int was_busy = t->busy;
    t->busy = 1;
    uint32_t stack = stack_capture_fault(t, ip);
    // No length: the fault tells where, not how many bytes the access would have touched.
    hl_change_t c = {.offset = (int64_t)(a - b.addr), .length = 0};
    writer_lock();
    writer_put_error_locked(kind, t->index, stack, kind == HL_ERR_INVALID_ACCESS ? a : b.addr,
                            0,
                            kind == HL_ERR_INVALID_ACCESS ? NULL : &b,
                            state == SLOT_FREED ? s->release_stack : 0);
    if (kind != HL_ERR_INVALID_ACCESS)
        writer_put_change_locked(&c);
    writer_unlock();
    t->busy = was_busy;
    // The access is retried on return: it now reaches the page, as it would have reached the
    // allocator's memory without heaplens.
    if (hl_opt.gpage_abort)
        return 1; // left inaccessible: the access faults again, to the default action
    if (in_guard)
        atomic_store_explicit(&guard_opened[k / 2], 1, memory_order_relaxed);
    return protect(a & ~(uintptr_t)(page - 1), PROT_READ | PROT_WRITE) == 0;
}
