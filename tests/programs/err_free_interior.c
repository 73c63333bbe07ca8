// err_free_interior: free() of a pointer 16 bytes into a live 64-byte block (invalid_free in
// free_interior_pointer); the block itself is then freed properly, so nothing leaks.
#include <stdlib.h>

#include "common.h"

NOINLINE static char* alloc_for_interior(void) {
    char* p = malloc(64);
    p[0] = 1;
    return p;
}
NOINLINE static void free_interior_pointer(char* p) {
    char* volatile inside = p + 16; // volatile: hides the mistake from -Wfree-nonheap-object
    free(inside);
    NO_TAIL_CALL();
}
NOINLINE static void free_properly(char* p) {
    free(p);
    NO_TAIL_CALL();
}

int main(void) {
    char* p = alloc_for_interior();
    free_interior_pointer(p);
    free_properly(p);
    say("err_free_interior survived\n");
    return 0;
}
