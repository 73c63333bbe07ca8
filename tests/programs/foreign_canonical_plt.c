// foreign_canonical_plt: built as a non-PIE executable that takes the addresses of malloc and
// free, so it imports them through canonical PLT entries (undefined symbols whose value is the
// entry's address, which dlsym returns). It defines no allocator: the whole heap is traced, no
// warning. Allocates 8 blocks of 40 B through the pointers, frees 7, loses one; prints
// "foreign_canonical_plt done", exit status 0.
#include <stdlib.h>

#include "common.h"

void* (*volatile alloc_fn)(size_t);
void (*volatile free_fn)(void*);

NOINLINE static void churn(void) {
    void* kept = NULL;
    for (int i = 0; i < 8; i++) {
        void* p = alloc_fn(40);
        keep(p);
        if (i == 0)
            kept = p;
        else
            free_fn(p);
    }
    kept = NULL;
    keep(kept);
}

int main(void) {
    alloc_fn = malloc; // in code, so the link makes canonical PLT entries (an absolute address)
    free_fn = free;
    churn();
    scrub_stack();
    say("foreign_canonical_plt done\n");
    return 0;
}
