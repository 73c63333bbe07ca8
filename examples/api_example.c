// SPDX-License-Identifier: MIT
// api_example.c - a program asking about its own heap while it runs (include/heaplens.h).
// Built by `make demo`; without heaplens every call says "not traced" and the program runs on.
//   cc api_example.c $(pkg-config --cflags --libs heaplens)
//   heaplens run -- ./a.out
#include <heaplens.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char* cache[16];      // what the program keeps between requests
static void* volatile scratch; // overwritten by each request that uses it

// One request: a buffer that is released, and an entry that stays in the cache (or leaks).
static size_t handle(int i) {
    char* buf = malloc(1024);
    snprintf(buf, 1024, "request %d", i);
    size_t n = strlen(buf);
    if (i % 4 == 0)
        cache[i / 4] = strdup(buf);
    else if (i % 7 == 0)
        scratch = malloc(100 + (size_t)i); // forgotten: the next one overwrites it
    free(buf);
    return n;
}

int main(void) {
    printf("traced %d\n", heaplens_is_traced());
    heaplens_mark_t mark = heaplens_mark(); // -1 without heaplens
    size_t total = 0;
    heaplens_tag(1, 100); // requests' allocations, grouped in the report
    for (int i = 0; i < 32; i++)
        total += handle(i);
    heaplens_untag();
    printf("result %zu\n", total);
    fflush(stdout);
    // What the requests left behind: the cache entries and the forgotten blocks, by stack.
    heaplens_report_since(mark, 1, HEAPLENS_TEXT);
    struct heaplens_stats s;
    if (heaplens_stats(&s) == 0)
        printf("live %zu bytes in %zu blocks, peak %zu bytes\n", s.live_bytes, s.live_blocks,
               s.peak_bytes);
    return 0;
}
