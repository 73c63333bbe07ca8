// unwind_mix: allocations and releases whose stacks the agent's fast unwinder finds by reusing
// what earlier walks saw (the very stack of a recent call, the outer frames of the previous
// walk from one of its frames on, a release right after an allocation, releases after releases
// cut to their innermost frames), in every order those come in. Built without frame pointers.
// Each pattern leaks one block per distinct path and frees one block twice per distinct
// release path, so the JSON report lists every allocation stack (leak records) and release
// stack (double frees) it met: run.sh compares them with the stacks of the general unwinder
// (HEAPLENS_UNWIND_CFI=0), frame by frame.
#include <alloca.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "common.h"

static void* volatile sink[64];

// Lost: no pointer to it survives the call.
NOINLINE static void lose(size_t size, int tag) {
    char* p = malloc(size);
    p[0] = (char)tag;
    keep(p);
}

// Two releases of one block: the second is the error whose report names the first's stack.
NOINLINE static void release(void* p) {
    free(p);
    NO_TAIL_CALL();
}
NOINLINE static void release_again(void* p) {
    free(p);
    NO_TAIL_CALL();
}

// A binary recursion: each leaf loses a block, each level frees one block right after making
// it (a release after an allocation) and one of every eight leaves frees a block twice from
// deep inside (a release after a release, deeper than the 12 frames a release keeps).
NOINLINE static void tree(int depth, int path);
NOINLINE static void tree_left(int depth, int path) {
    tree(depth, path * 2);
    NO_TAIL_CALL();
}
NOINLINE static void tree_right(int depth, int path) {
    tree(depth, path * 2 + 1);
    NO_TAIL_CALL();
}
NOINLINE static void tree(int depth, int path) {
    void* q = malloc(16 + (size_t)depth);
    keep(q);
    free(q);
    if (depth == 0) {
        lose(24, path);
        if (path % 8 == 3) {
            void* twice = malloc(40);
            keep(twice);
            release(twice);
            release_again(twice);
        }
        return;
    }
    tree_left(depth - 1, path);
    tree_right(depth - 1, path);
    NO_TAIL_CALL();
}

// Mutual recursion along a fixed pseudo-random walk: stacks that share their outer frames for a
// while, then part.
static unsigned seed = 12345;
static unsigned next_rand(void) {
    seed = seed * 1103515245u + 12345u;
    return seed >> 16;
}
NOINLINE static void walk_a(int left);
NOINLINE static void walk_b(int left);
NOINLINE static void walk_c(int left);
NOINLINE static void walk_step(int left) {
    if (left == 0) {
        lose(32, 0);
        return;
    }
    switch (next_rand() % 3) {
    case 0:
        walk_a(left - 1);
        break;
    case 1:
        walk_b(left - 1);
        break;
    default:
        walk_c(left - 1);
        break;
    }
    NO_TAIL_CALL();
}
NOINLINE static void walk_a(int left) {
    walk_step(left);
    NO_TAIL_CALL();
}
NOINLINE static void walk_b(int left) {
    char pad[48];
    pad[0] = (char)left;
    keep(pad);
    walk_step(left);
    NO_TAIL_CALL();
}
NOINLINE static void walk_c(int left) {
    walk_step(left);
    walk_step(0); // a second allocation from the same frame, a shallower stack
    NO_TAIL_CALL();
}

// A loop over a few places in turn: the same stacks again and again, found as they were.
NOINLINE static void site_one(int i) {
    sink[i % 64] = malloc(8);
    NO_TAIL_CALL();
}
NOINLINE static void site_two(int i) {
    free(sink[(i + 1) % 64]);
    sink[(i + 1) % 64] = NULL;
    NO_TAIL_CALL();
}
NOINLINE static void site_three(int i) {
    if (i % 97 == 0)
        lose(48, i);
    NO_TAIL_CALL();
}

NOINLINE static void release_third(void* p) {
    free(p);
    NO_TAIL_CALL();
}

// A chain deeper than a release keeps, releasing three times at its bottom from three places.
// Run twice as deep, the second time finds the window of release_again's stack whole (a stack
// seen before, whose callers' nodes the walk does not learn), and release_third's walk reuses
// its outer frames from there.
NOINLINE static void chain(int depth, void* p) {
    if (depth == 0) {
        release(p);
        release_again(p);
        release_third(p);
        return;
    }
    chain(depth - 1, p);
    NO_TAIL_CALL();
}

// Two releases in a row at the bottom of a chain deeper than a release keeps, after a release
// elsewhere (so the first is walked anew, cut short at 12 frames); the second is tail-called, its
// stack one frame shallower: the agent takes the frames the first walk has and walks on from its
// outermost. Through tail_framed, a function whose CFA comes from %rbp (alloca) stands at every
// place around that frame, also where the first walk stopped just short of it and kept no %rbp
// for it: the agent walks those again whole. The tail-called release's block is freed again, so
// its release stack is reported.
NOINLINE static void tail_frees(void* a, void* b) {
    free(a);
    free(b); // a tail call
}
NOINLINE static void tail_chain(int depth, void* a, void* b) {
    if (depth == 0)
        tail_frees(a, b);
    else
        tail_chain(depth - 1, a, b);
    NO_TAIL_CALL();
}
NOINLINE static void tail_framed(size_t n, int depth, void* a, void* b) {
    char* pad = alloca(n);
    keep(pad);
    tail_chain(depth, a, b);
    NO_TAIL_CALL();
}
NOINLINE static void tail_releases(void) {
    for (int framed = 0; framed < 2; framed++)
        for (int depth = 7; depth <= 13; depth++) {
            void* blocks[3];
            for (int k = 0; k < 3; k++)
                keep(blocks[k] = malloc(8 + (size_t)k));
            free(blocks[0]);
            if (framed)
                tail_framed(16 + (size_t)depth, depth, blocks[1], blocks[2]);
            else
                tail_chain(depth, blocks[1], blocks[2]);
            release_again(blocks[2]);
        }
}

// One call site calling malloc through a wrapper, then malloc itself: the second stack is the
// first one's from its second frame on.
typedef void* (*alloc_fn)(size_t);
NOINLINE static void* wrapped_malloc(size_t n) {
    void* p = malloc(n);
    NO_TAIL_CALL();
    return p;
}
NOINLINE static void one_site(int i) {
    alloc_fn fn = (i & 1) ? malloc : wrapped_malloc;
    char* p = fn(72);
    p[0] = (char)i;
    keep(p);
    NO_TAIL_CALL();
}

// Two threads with the same body, one after the other while both live: the second one's first
// stack is found whole (the first made it), and its second reuses that walk's outer frames.
NOINLINE static void thread_f(void) {
    lose(80, 1);
    NO_TAIL_CALL();
}
NOINLINE static void thread_g(void) {
    lose(88, 2);
    NO_TAIL_CALL();
}
static int ran_fd[2], done_fd[2];
static void* thread_body(void* arg) {
    thread_f();
    thread_g();
    if (arg) { // the first: says it ran, then lives on until the second has run too
        char c = 1;
        write(ran_fd[1], &c, 1);
        read(done_fd[0], &c, 1);
    }
    return NULL;
}
NOINLINE static void two_threads(void) {
    pthread_t first, second;
    char c = 0;
    if (pipe(ran_fd) != 0 || pipe(done_fd) != 0 || pthread_create(&first, NULL, thread_body, &c))
        return;
    read(ran_fd[0], &c, 1);
    if (pthread_create(&second, NULL, thread_body, NULL) == 0)
        pthread_join(second, NULL);
    write(done_fd[1], &c, 1);
    pthread_join(first, NULL);
}

// Two callers of one place at one depth, in turn: the same frame 0 with two stacks, each found
// again among the walks of that frame (a way past the first).
NOINLINE static void from_one(int i) {
    lose(56, i);
    NO_TAIL_CALL();
}
NOINLINE static void from_two(int i) {
    lose(56, i);
    NO_TAIL_CALL();
}

// One stack pointer and return address in a frame whose CFA comes from %rbp, with two frame
// sizes: alias_f's alloca is made as large below alias_g1 as alias_g2's buffer is, so that its
// stack pointer is the same under both, its %rbp 256 bytes apart. What alias_g1's call left on
// the stack stays there under alias_g2 (its buffer is never written): only %rbp tells them apart.
//
// The same with a frame between that saves alias_f's %rbp in its own frame and puts another
// value in the register (alias_mid): below it only that saved word tells the two stacks apart.
// Its two callees come in turn, so each walk copies the outer frames of the other's from
// alias_mid on, and with them the check of that word.
static uintptr_t alias_at;
static int alias_mode; // 0: alias_f loses the block itself; 1, 2: through alias_mid, either callee
NOINLINE static void alias_lose_a(int tag) {
    lose(24, tag);
    NO_TAIL_CALL();
}
NOINLINE static void alias_lose_b(int tag) {
    lose(32, tag);
    NO_TAIL_CALL();
}
NOINLINE static void alias_mid(int tag, int k) {
#if defined(__x86_64__)
    __asm__ volatile("xor %%ebp, %%ebp" : : : "rbp");
#endif
    (k ? alias_lose_b : alias_lose_a)(tag);
    NO_TAIL_CALL();
}
NOINLINE static void alias_f(size_t n, int tag) {
    char* a = alloca(n);
    keep(a);
    alias_at = (uintptr_t)a;
    if (tag >= 0 && alias_mode)
        alias_mid(tag, alias_mode - 1);
    else if (tag >= 0)
        lose(24, tag);
    NO_TAIL_CALL();
}
NOINLINE static void alias_g1(size_t n, int tag) {
    alias_f(n, tag);
    NO_TAIL_CALL();
}
NOINLINE static void alias_g2(size_t n, int tag) {
    char buf[256];
    keep(buf);
    alias_f(n, tag);
    NO_TAIL_CALL();
}
typedef void (*alias_fn)(size_t, int);
NOINLINE static void alias_p(alias_fn g, size_t n, int tag) {
    g(n, tag);
    NO_TAIL_CALL();
}
NOINLINE static void alias_pairs(void) {
    alias_p(alias_g2, 0, -1);
    uintptr_t want = alias_at;
    size_t n1 = 0;
    for (size_t n = 0; n < 1024; n += 16) {
        alias_p(alias_g1, n, -1);
        if (alias_at == want) {
            n1 = n;
            break;
        }
    }
    for (int i = 0; i < 200; i++) // one call site: alias_g1 and alias_g2 in turn
        alias_p(i & 1 ? alias_g2 : alias_g1, i & 1 ? 0 : n1, i);
    for (int t = 0; t < 400; t++) { // one call site: under each g, alias_mid's callees in turn
        int i = t / 2;
        alias_mode = 1 + (t & 1);
        alias_p(i & 1 ? alias_g2 : alias_g1, i & 1 ? 0 : n1, 1000 + t);
    }
    alias_mode = 0;
}

// Long functions whose call sites stand at different CFA offsets (stack arguments pushed for
// some calls and still there at the return address, early returns in between, each an epilogue
// that the CFA program remembers and restores around): the agent works out a later call site's
// rule from where it stopped in the same function's instructions, an earlier one's from the
// start, and keeps that place for a few functions only. Called site by site forward, backward,
// and across more functions in turn than it keeps.
NOINLINE static void lose_far(size_t size, int tag, long a, long b, long c, long d, long e,
                              long f, long g) {
    lose(size + (size_t)((a + b + c + d + e + f + g) & 7), tag);
    NO_TAIL_CALL();
}
#define LONG_FUNCTION(name)                                                                  \
    NOINLINE static int name(int site, int tag) {                                          \
        int r = tag;                                                                         \
        if (site == 0) {                                                                     \
            lose(8, tag);                                                                    \
            r += 1;                                                                          \
        }                                                                                    \
        if (site == 1) {                                                                     \
            lose_far(16, tag, r, 2, 3, 4, 5, 6, 7);                                          \
            if (tag & 1)                                                                     \
                return r;                                                                    \
        }                                                                                    \
        if (site == 2) {                                                                     \
            lose(24, tag);                                                                   \
            if (tag & 2)                                                                     \
                return r + 2;                                                                \
        }                                                                                    \
        if (site == 3) {                                                                     \
            lose_far(32, tag, r, r, 3, 4, 5, r, 7);                                          \
            r *= 3;                                                                          \
        }                                                                                    \
        if (site == 4) {                                                                     \
            lose(40, tag);                                                                   \
            if (tag & 4)                                                                     \
                return r - 1;                                                                \
        }                                                                                    \
        if (site == 5) {                                                                     \
            lose_far(48, tag, 1, r, 3, r, 5, 6, r);                                          \
            r ^= 5;                                                                          \
        }                                                                                    \
        if (site == 6) {                                                                     \
            lose(56, tag);                                                                   \
            if (tag & 8)                                                                     \
                return r + 7;                                                                \
        }                                                                                    \
        if (site == 7)                                                                       \
            lose_far(64, tag, r, 2, r, 4, r, 6, r);                                          \
        sink[site] = (void*)(uintptr_t)r;                                                    \
        return r;                                                                            \
    }
LONG_FUNCTION(long_a)
LONG_FUNCTION(long_b)
LONG_FUNCTION(long_c)
LONG_FUNCTION(long_d)
LONG_FUNCTION(long_e)
LONG_FUNCTION(long_f)
LONG_FUNCTION(long_g)
LONG_FUNCTION(long_h)
typedef int (*long_fn)(int, int);
NOINLINE static void long_functions(void) {
    static const long_fn fns[] = {long_a, long_b, long_c, long_d, long_e, long_f, long_g, long_h};
    for (int site = 0; site < 8; site++) // forward in long_a
        long_a(site, site);
    for (int site = 7; site >= 0; site--) // backward in long_b
        long_b(site, site);
    for (int round = 0; round < 2; round++) // across six in turn, forward then backward
        for (int k = 0; k < 8; k++)
            for (int f = 2; f < 8; f++)
                fns[f](round ? 7 - k : k, k + f);
    for (int site = 0; site < 8; site += 3) // long_a again, past what it kept of it
        long_a(site, 15);
}

int main(void) {
    long_functions();
    for (int i = 0; i < 2000; i++)
        (i & 1 ? from_one : from_two)(i);
    tree(6, 1);
    for (int k = 0; k < 60; k++)
        walk_step(6 + (int)(next_rand() % 10));
    for (int i = 0; i < 5000; i++) {
        site_one(i);
        site_two(i);
        site_three(i);
    }
    for (int i = 0; i < 64; i++) {
        free(sink[i]);
        sink[i] = NULL;
    }
    for (int depth = 10; depth < 24; depth += 3) {
        for (int again = 0; again < 2; again++) {
            void* p = malloc(64);
            keep(p);
            chain(depth, p);
        }
    }
    tail_releases();
    for (int i = 0; i < 10; i++)
        one_site(i);
    two_threads();
    alias_pairs();
    say("unwind_mix done\n");
    scrub_stack();
    return 0;
}
