// alloc_realloc: realloc(NULL, n), grow, shrink, and reallocarray; overflow is refused.
//   realloc_from_null  realloc(NULL, 100)         alloc 100
//   realloc_grow       realloc(p, 1000)           free 100, alloc 1000
//   realloc_shrink     realloc(p, 10)             free 1000, alloc 10   -> lost (10 B)
//   reallocarray_from_null reallocarray(NULL, 10, 8)  alloc 80
//   reallocarray_grow  reallocarray(q, 20, 8)     free 80, alloc 160    -> lost (160 B)
//   reallocarray(NULL, SIZE_MAX / 2, 4) fails with ENOMEM and allocates nothing.
// calls: realloc 3, reallocarray 2 (malloc 0, free 0); allocations 5, frees 3, bytes 1350.
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "common.h"

NOINLINE static char* realloc_from_null(void) {
    char* volatile nothing = NULL; // volatile: gcc would turn realloc(NULL, n) into malloc(n)
    char* p = realloc(nothing, 100);
    for (int i = 0; i < 100; i++)
        p[i] = (char)i;
    return p;
}

NOINLINE static char* realloc_grow(char* p) {
    char* q = realloc(p, 1000);
    q[999] = 1;
    return q;
}

NOINLINE static int realloc_shrink(char* p) {
    char* q = realloc(p, 10);
    int ok = 1;
    for (int i = 0; i < 10; i++)
        ok &= q[i] == (char)i; // contents survive grow and shrink
    keep(q);
    return ok;
}

NOINLINE static long* reallocarray_from_null(void) {
    long* volatile nothing = NULL;
    long* p = reallocarray(nothing, 10, 8);
    for (int i = 0; i < 10; i++)
        p[i] = i * 3;
    return p;
}

NOINLINE static int reallocarray_grow(long* p) {
    long* q = reallocarray(p, 20, 8);
    int ok = q[9] == 27;
    q[19] = 5;
    keep(q);
    return ok;
}

NOINLINE static int reallocarray_overflow(void) {
    errno = 0;
    volatile size_t huge = SIZE_MAX / 2; // volatile: no compile-time overflow warning
    void* p = reallocarray(NULL, huge, 4);
    return p == NULL && errno == ENOMEM;
}

int main(void) {
    int ok = realloc_shrink(realloc_grow(realloc_from_null()));
    ok &= reallocarray_grow(reallocarray_from_null());
    ok &= reallocarray_overflow();
    scrub_stack();
    say(ok ? "alloc_realloc done\n" : "alloc_realloc: wrong contents\n");
    return ok ? 0 : 1;
}
