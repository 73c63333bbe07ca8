// unwind_guard: a walk that goes on from where the previous one was cut must not use %rbp there.
// malloc in inner() is walked 32 frames deep (the default depth), up to outer_call(); then
// middle() tail-calls malloc, two frames shallower, and that walk copies the first one's frames
// and walks on: past outer_call() comes framed(), whose CFA is %rbp + 16 (alloca). Among the
// copied frames, clobber() holds the address of main's buffer in %rbp (restoring its caller's
// from its own frame), so the %rbp the walk had is not framed()'s: taken, it reads the buffer as
// framed()'s frame and the stack ends there. run.sh compares the stacks with the general
// unwinder's. Built without frame pointers. Usage: unwind_guard [CHAIN [INNER_CHAIN]].
#include <alloca.h>
#include <stdint.h>
#include <stdlib.h>

#include "common.h"

static void* volatile kept[64];
static int nkept;

NOINLINE static void* inner(void) {
    void* p = malloc(16);
    NO_TAIL_CALL();
    return p;
}
NOINLINE static void* middle(void) {
    kept[nkept++ % 64] = inner(); // reachable: a still-reachable record
    return malloc(24);            // a tail call
}
NOINLINE static void lose(void) {
    void* lost = middle();
    keep(lost);
    NO_TAIL_CALL();
}
NOINLINE static void inner_chain(int depth) {
    if (depth)
        inner_chain(depth - 1);
    else
        lose();
    NO_TAIL_CALL();
}
NOINLINE static void clobber(void* value, int depth) {
#if defined(__x86_64__)
    __asm__ volatile("mov %0, %%rbp" : : "r"(value) : "rbp");
#endif
    inner_chain(depth);
    NO_TAIL_CALL();
}
NOINLINE static void chain(int depth, void* value, int inner_depth) {
    if (depth)
        chain(depth - 1, value, inner_depth);
    else
        clobber(value, inner_depth);
    NO_TAIL_CALL();
}
NOINLINE static void outer_call(void* value, int depth, int inner_depth) {
    chain(depth, value, inner_depth);
    NO_TAIL_CALL();
}
NOINLINE static void framed(void* value, int depth, int inner_depth, size_t n) {
    char* pad = alloca(n);
    keep(pad);
    outer_call(value, depth, inner_depth);
    NO_TAIL_CALL();
}

int main(int argc, char** argv) {
    uintptr_t buffer[8] = {0};
    // inner's malloc is frame 0 and outer_call frame 31 with 21 and 4: framed is the first frame
    // past the cut, and the second walk meets it.
    int depth = argc > 1 ? atoi(argv[1]) : 21, inner_depth = argc > 2 ? atoi(argv[2]) : 4;
    for (int i = 0; i < 8; i++)
        framed(buffer, depth, inner_depth, 32 + (size_t)argc);
    say("unwind_guard done\n");
    scrub_stack();
    return 0;
}
