// unwind_sites: 4,096 functions, each calling the allocator from a place of its own, so every
// stack has a return address no other has: the agent's unwinder works out a rule for each and
// its rule cache grows from its first table (1,024 entries) to its largest (16,384) while the
// walks go on. Three rounds over all of them: each allocates a block and frees it, but in the
// first round one function in eight keeps its block and drops the pointer (512 definite leaks,
// 512 distinct stacks). Built without frame pointers: run.sh compares every leak's stack with
// the general unwinder's (HEAPLENS_UNWIND_CFI=0) and has the agent walk anew each stack it took
// from earlier walks (unwind_check), which also says how large the rule cache grew.
#include <stdint.h>
#include <stdlib.h>

#include "common.h"

#define FUNCTIONS 4096
#define ROUNDS 3
#define KEEP_EVERY 8

NOINLINE static void* take(size_t n) {
    void* p = malloc(n);
    keep(p);
    NO_TAIL_CALL();
    return p;
}

// Function ID: a block of 8 + ID % 16 bytes, freed unless asked to keep it (then lost).
#define F(id)                                                                                      \
    NOINLINE static int f##id(int keep_it) {                                                       \
        void* p = take(8 + (size_t)(id % 16));                                                     \
        if (!p)                                                                                    \
            return -1;                                                                             \
        if (!keep_it)                                                                              \
            free(p);                                                                               \
        NO_TAIL_CALL();                                                                            \
        return 0;                                                                                  \
    }
#define F8(p) F(p##0) F(p##1) F(p##2) F(p##3) F(p##4) F(p##5) F(p##6) F(p##7)
#define F64(p) F8(p##0) F8(p##1) F8(p##2) F8(p##3) F8(p##4) F8(p##5) F8(p##6) F8(p##7)
#define F512(p) F64(p##0) F64(p##1) F64(p##2) F64(p##3) F64(p##4) F64(p##5) F64(p##6) F64(p##7)
F512(1)
F512(2)
F512(3)
F512(4)
F512(5)
F512(6)
F512(7)
F512(8)

#define T(id) f##id,
#define T8(p) T(p##0) T(p##1) T(p##2) T(p##3) T(p##4) T(p##5) T(p##6) T(p##7)
#define T64(p) T8(p##0) T8(p##1) T8(p##2) T8(p##3) T8(p##4) T8(p##5) T8(p##6) T8(p##7)
#define T512(p) T64(p##0) T64(p##1) T64(p##2) T64(p##3) T64(p##4) T64(p##5) T64(p##6) T64(p##7)
static int (*const functions[FUNCTIONS])(int) = {
    T512(1) T512(2) T512(3) T512(4) T512(5) T512(6) T512(7) T512(8)};

int main(void) {
    for (int round = 0; round < ROUNDS; round++)
        for (int i = 0; i < FUNCTIONS; i++)
            if (functions[i](round == 0 && i % KEEP_EVERY == 0) != 0)
                return 1;
    scrub_stack();
    say("unwind_sites done\n");
    return 0;
}
