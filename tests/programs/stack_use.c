// stack_use: how many bytes of the caller's stack one call of each allocator function takes,
// measured by painting the stack below the caller's frame, making the call, and finding the
// lowest byte it changed. Prints "FUNCTION BYTES" per function (after warm-up calls: the
// steady state a deep recursion meets), then the largest. Under heaplens the difference with
// the native run is the agent's own use, which a program near its stack limit pays per level.
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define PAINT_BYTES (48 * 1024) // far more than any allocator call takes
#define PAINT 0x5a

typedef void (*call_fn)(void);
static void* volatile sink_ptr;
static unsigned char* painted_top; // the highest byte paint() painted

NOINLINE static void paint(void) {
    unsigned char area[PAINT_BYTES];
    memset(area, PAINT, sizeof area);
    __asm__ volatile("" : : "r"(area) : "memory"); // the stores are the point: keep them
    painted_top = area + sizeof area;
}

// The lowest changed byte below `top`, as a distance from it.
NOINLINE static size_t used_below(unsigned char* top) {
    unsigned char* low = top - PAINT_BYTES;
    size_t used = 0;
    for (unsigned char* p = low; p < top; p++)
        if (*p != PAINT) {
            used = (size_t)(top - p);
            break;
        }
    return used;
}

NOINLINE static size_t measure(call_fn fn) {
    paint();
    fn(); // its frame and its callees' start where paint's did, at the same depth
    return used_below(painted_top);
}

static void* held[4];
static void do_malloc(void) { sink_ptr = held[0] = malloc(48); }
static void do_free(void) { free(held[0]); }
static void do_calloc(void) { sink_ptr = held[1] = calloc(3, 40); }
static void do_realloc(void) { sink_ptr = held[1] = realloc(held[1], 400); }
static void do_free2(void) { free(held[1]); }
static void do_big(void) { sink_ptr = held[2] = malloc(5000); }
static void do_free3(void) { free(held[2]); }

int main(void) {
    static const struct { const char* name; call_fn fn; } calls[] = {
        {"malloc", do_malloc}, {"free", do_free},       {"calloc", do_calloc},
        {"realloc", do_realloc}, {"free", do_free2},    {"malloc(5000)", do_big},
        {"free(5000)", do_free3},
    };
    size_t n = sizeof calls / sizeof calls[0], most = 0;
    for (int warm = 0; warm < 3; warm++)
        for (size_t i = 0; i < n; i++)
            calls[i].fn();
    for (size_t i = 0; i < n; i++) {
        size_t used = measure(calls[i].fn);
        if (used > most)
            most = used;
        printf("%s %zu\n", calls[i].name, used);
    }
    printf("max %zu\n", most);
    return 0;
}
