// err_mismatch: three mismatched releases, each of a trivially destructible type so the address
// passed to the wrong function is the block's own (the allocator copes; heaplens reports):
//   new_then_free:        new int        -> free()      mismatched_free
//   malloc_then_delete:   malloc(24)     -> delete      mismatched_free
//   newarray_then_delete: new int[10]    -> delete      mismatched_free
// and one correct pair (new/delete) that must not be reported. Nothing leaks.
#include <cstdlib>
#include <unistd.h>

#include "common.h"

NOINLINE static int* alloc_with_plain_new() { return new int(5); }
NOINLINE static void new_then_free(int* p) {
    std::free(p);
    NO_TAIL_CALL();
}
NOINLINE static void* alloc_with_malloc() {
    void* p = std::malloc(24);
    NO_TAIL_CALL();
    return p;
}
static volatile int step; // distinct bodies: gcc would merge identical functions into one

NOINLINE static void malloc_then_delete(void* p) {
    step = 1;
    delete static_cast<int*>(p);
    NO_TAIL_CALL();
}
NOINLINE static int* alloc_with_new_array() { return new int[10](); }
NOINLINE static void newarray_then_delete(int* p) {
    step = 2;
    delete p;
    NO_TAIL_CALL();
}
NOINLINE static void correct_pair() {
    int* p = new int(7);
    keep(p);
    delete p;
}

int main() {
    new_then_free(alloc_with_plain_new());
    malloc_then_delete(alloc_with_malloc());
    newarray_then_delete(alloc_with_new_array());
    correct_pair();
    say("err_mismatch survived\n");
    return 0;
}
