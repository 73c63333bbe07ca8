// erring: a double free and a free of a pointer inside a block, and nothing leaked.
#include <stdlib.h>

__attribute__((noinline)) static void free_twice(void) {
    char* p = malloc(24);
    free(p);
    free(p);
}

__attribute__((noinline)) static void free_inside(void) {
    char* p = malloc(32);
    free(p + 8);
    free(p);
}

int main(void) {
    free_twice();
    free_inside();
    return 0;
}
