// err_realloc_freed: realloc() of a pointer already freed. One realloc_freed error in
// realloc_after_free; realloc returns NULL and the program goes on.
#include <stdlib.h>

#include "common.h"

NOINLINE static char* alloc_for_realloc(void) {
    char* p = malloc(48);
    p[0] = 1;
    return p;
}
NOINLINE static void release_first(char* p) {
    free(p);
    NO_TAIL_CALL();
}
NOINLINE static void* realloc_after_free(char* p) {
    void* q = realloc(p, 96);
    NO_TAIL_CALL();
    return q;
}

int main(void) {
    char* p = alloc_for_realloc();
    release_first(p);
    void* q = realloc_after_free(p);
    say(q ? "err_realloc_freed: realloc returned a block\n" : "err_realloc_freed survived\n");
    return 0;
}
