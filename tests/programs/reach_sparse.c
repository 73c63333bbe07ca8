// reach_sparse: pointers in the few written pages of large mostly untouched memory. The scan
// reads only the pages that hold anything (pagemap.c): a 256 MiB .bss, a 64 MiB anonymous
// mapping and a 64 MiB calloc'd block, each written in a few pages, must still keep what those
// pages point to, and the untouched rest must not be read (a page fault each: the runner counts
// them).
//   from_bss_start:     40 B, pointed to by the first word of the .bss array
//   from_bss_boundary:  41 B, by the last word of a page in its middle (the run ends there)
//   from_bss_end:       42 B, by the array's last word
//   from_mapping:       43 B, by a word in the middle of the anonymous mapping
//   from_big_block:     64 MiB, calloc'd, pointed to by a global, and (below it)
//   held_by_big_block:  45 B, pointed to by a word in the middle of that block
//   leak_sparse:        44 B, lost (the only definite leak)
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "common.h"

#define BSS_BYTES (256u << 20)
#define MAP_BYTES (64u << 20)
#define PAGE 4096u

uintptr_t big_bss[BSS_BYTES / sizeof(uintptr_t)]; // extern: its stores are kept
static char* volatile mapping; // a global, so the mapping itself is found
static char* volatile big_block;

NOINLINE static void from_bss_start(void) {
    big_bss[0] = (uintptr_t)malloc(40);
}

NOINLINE static void from_bss_boundary(void) {
    big_bss[(BSS_BYTES / 2) / sizeof(uintptr_t) - 1] = (uintptr_t)malloc(41);
}

NOINLINE static void from_bss_end(void) {
    big_bss[BSS_BYTES / sizeof(uintptr_t) - 1] = (uintptr_t)malloc(42);
}

NOINLINE static void from_mapping(void) {
    mapping = mmap(NULL, MAP_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapping == MAP_FAILED)
        exit(2);
    *(uintptr_t*)(mapping + MAP_BYTES / 2 + PAGE / 2) = (uintptr_t)malloc(43);
}

NOINLINE static uintptr_t held_by_big_block(void) {
    uintptr_t p = (uintptr_t)malloc(45);
    NO_TAIL_CALL();
    return p;
}

NOINLINE static void from_big_block(void) {
    big_block = calloc(1, MAP_BYTES);
    if (!big_block)
        exit(2);
    *(uintptr_t*)(big_block + MAP_BYTES / 2 + PAGE / 2) = held_by_big_block();
}

NOINLINE static void leak_sparse(void) {
    char* p = malloc(44);
    p[0] = 4;
    keep(p);
}

int main(void) {
    from_bss_start();
    from_bss_boundary();
    from_bss_end();
    from_mapping();
    from_big_block();
    leak_sparse();
    scrub_stack();
    say("reach_sparse done\n");
    return 0;
}
