// SPDX-License-Identifier: MIT
// layout.c - the agent's bytes around a program's block (see layout.h for the picture): the
// guard after it, and the red zone before it with the front record that leads back to the
// allocator's pointer. Filling and checking a guard is on the hot path (the default 8 bytes
// inline, in layout.h); the rest only runs with heap checking on, or once something was found
// changed.
#define _GNU_SOURCE
#include <string.h>

#include "../common/compiler.h"
#include "layout.h"

// The front record's check word: the front mixed with the block's address and this constant,
// so that bytes a program wrote there are not taken for a front (odd, not a common pattern).
#define FRONT_MAGIC 0x9e3779b97f4a7c15ull
// The largest front the agent makes: the red zone's largest size plus the record, rounded up
// to the largest alignment a release may meet (aligned allocations of a huge page).
#define FRONT_MAX ((size_t)1 << 30)

void guard_fill_bytes(uint8_t* g) {
    for (int i = 0; i < hl_opt.guard; i++)
        g[i] = guard_byte((size_t)i);
}

int guard_bytes_are_intact(const uint8_t* g) {
    for (int i = 0; i < hl_opt.guard; i++)
        if (g[i] != guard_byte((size_t)i))
            return 0;
    return 1;
}

// ---------------------------------------------------------------------------------------------
// Checked blocks
// ---------------------------------------------------------------------------------------------
typedef struct front_s {
    uint64_t front, check;
} front_t;

_Static_assert(sizeof(front_t) == 16, "the record keeps the block 16-aligned");

size_t layout_front(size_t align) {
    size_t zone = (size_t)hl_opt.redzone_before;
    if (!zone)
        return 0; // painting or hoarding alone: the allocator's pointer is the program's
    if (align < 16)
        align = 16;
    return (zone + sizeof(front_t) + align - 1) & ~(align - 1);
}

size_t layout_checked_size(size_t front, size_t size) {
    size_t extra = front + (size_t)hl_opt.guard;
    return size > SIZE_MAX - extra ? SIZE_MAX : size + extra;
}

// The red zone before the block mirrors the guard after it: its byte k before p is the guard's
// byte k after the end.
void layout_checked_fill(char* p, size_t front) {
    size_t zone = (size_t)hl_opt.redzone_before;
    if (!zone)
        return;
    front_t r = {front, front ^ (uint64_t)(uintptr_t)p ^ FRONT_MAGIC};
    memcpy(p - zone - sizeof r, &r, sizeof r);
    for (size_t k = 0; k < zone; k++)
        p[-1 - (ptrdiff_t)k] = (char)guard_byte(k);
}

char* layout_checked_real(uintptr_t addr) {
    size_t zone = (size_t)hl_opt.redzone_before;
    if (!zone)
        return (char*)addr;
    front_t r;
    memcpy(&r, (const char*)addr - zone - sizeof r, sizeof r);
    if (r.check != (r.front ^ (uint64_t)addr ^ FRONT_MAGIC) || r.front < zone + sizeof r ||
        r.front > FRONT_MAX || (r.front & 15))
        return NULL;
    return (char*)addr - r.front;
}

// The bytes at got[0..len) against what the agent left, want(i); base is got's offset from the
// block's start. 1 and *c when any differ.
static int diff(const uint8_t* got, size_t len, int64_t base, uint8_t (*want)(size_t, size_t),
                size_t arg, hl_change_t* c) {
    size_t first = len, last = 0;
    for (size_t i = 0; i < len; i++) {
        if (got[i] != want(i, arg)) {
            if (first == len)
                first = i;
            last = i;
        }
    }
    if (first == len)
        return 0;
    c->offset = base + (int64_t)first;
    c->length = last - first + 1;
    c->n = c->length < HL_CHANGE_BYTES ? (uint32_t)c->length : HL_CHANGE_BYTES;
    for (uint32_t k = 0; k < c->n; k++) {
        c->seen[k] = got[first + k];
        c->expected[k] = want(first + k, arg);
    }
    return 1;
}

static uint8_t want_after(size_t i, size_t arg) {
    (void)arg;
    return guard_byte(i);
}
static uint8_t want_before(size_t i, size_t zone) {
    return guard_byte(zone - 1 - i);
}
static uint8_t want_paint(size_t i, size_t v) {
    (void)i;
    return (uint8_t)v;
}

int layout_after_change(const hl_block_t* b, hl_change_t* c) {
    return diff((const uint8_t*)b->addr + b->size, (size_t)hl_opt.guard, (int64_t)b->size,
                want_after, 0, c);
}

int layout_before_change(const hl_block_t* b, hl_change_t* c) {
    size_t zone = (size_t)hl_opt.redzone_before;
    if (!zone)
        return 0;
    const uint8_t* z = (const uint8_t*)b->addr - zone;
    if (diff(z, zone, -(int64_t)zone, want_before, zone, c))
        return 1;
    if (layout_checked_real(b->addr))
        return 0;
    // The zone is as it was but the record before it is not: an underrun reached past the zone.
    memset(c, 0, sizeof *c);
    c->offset = -(int64_t)(zone + sizeof(front_t));
    c->length = sizeof(front_t);
    return 1;
}

int layout_paint_change(uintptr_t addr, size_t size, uint8_t v, hl_change_t* c) {
    // Words first: a block left alone (the usual case) costs a compare per 8 bytes.
    const uint8_t* p = (const uint8_t*)addr;
    uint64_t w;
    memset(&w, v, sizeof w);
    size_t i = 0;
    for (; i + 8 <= size; i += 8) {
        uint64_t x;
        memcpy(&x, p + i, 8);
        if (x != w)
            break;
    }
    if (i + 8 <= size || i < size)
        return diff(p + i, size - i, (int64_t)i, want_paint, v, c);
    return 0;
}
