// foreign_usable_size: an executable that defines malloc_usable_size only (and so exports it:
// libc refers to it). Nothing the agent records is lost: no warning, the whole heap traced.
// One block of 10 B is lost; prints "foreign_usable_size done", exit status 0.
#include <malloc.h>
#include <stdlib.h>

#include "common.h"

size_t malloc_usable_size(void* p) {
    return p ? 1 : 0;
}

NOINLINE static void lose(void) {
    char* p = malloc(10);
    keep(p);
}

int main(void) {
    lose();
    scrub_stack();
    say("foreign_usable_size done\n");
    return 0;
}
