// alloc_aligned: every aligned allocator, one block freed and one lost per function.
//   posix_memalign(64, 200) freed, (64, 201) lost   leak_via_posix_memalign  201 B
//   aligned_alloc(128, 256) freed, (128, 384) lost  leak_via_aligned_alloc   384 B
//   memalign(32, 100) freed, (32, 103) lost         leak_via_memalign        103 B
//   valloc(5000) freed, valloc(104) lost            leak_via_valloc          104 B
//   pvalloc(100) freed, pvalloc(105) lost           leak_via_pvalloc        4096 B (one page)
//   posix_memalign with alignment 3 returns EINVAL and allocates nothing.
// calls: 2 of each, free 5; allocations 10, frees 5.
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>

#include "common.h"

static int bad;

static void check_align(void* p, uintptr_t a) {
    if (!p || ((uintptr_t)p & (a - 1)) != 0)
        bad = 1;
}

NOINLINE static void posix_memalign_freed(void) {
    void* p = NULL;
    if (posix_memalign(&p, 64, 200) != 0)
        bad = 1;
    check_align(p, 64);
    free(p);
}
NOINLINE static void leak_via_posix_memalign(void) {
    void* p = NULL;
    if (posix_memalign(&p, 64, 201) != 0)
        bad = 1;
    check_align(p, 64);
    keep(p);
}
NOINLINE static void posix_memalign_invalid(void) {
    void* p = (void*)1;
    if (posix_memalign(&p, 3, 100) != EINVAL || p != (void*)1)
        bad = 1;
}
NOINLINE static void aligned_alloc_freed(void) {
    void* p = aligned_alloc(128, 256);
    check_align(p, 128);
    free(p);
}
NOINLINE static void leak_via_aligned_alloc(void) {
    void* p = aligned_alloc(128, 384);
    check_align(p, 128);
    keep(p);
}
NOINLINE static void memalign_freed(void) {
    void* p = memalign(32, 100);
    check_align(p, 32);
    free(p);
}
NOINLINE static void leak_via_memalign(void) {
    void* p = memalign(32, 103);
    check_align(p, 32);
    keep(p);
}
NOINLINE static void valloc_freed(void) {
    void* p = valloc(5000);
    check_align(p, 4096);
    free(p);
}
NOINLINE static void leak_via_valloc(void) {
    void* p = valloc(104);
    check_align(p, 4096);
    keep(p);
}
NOINLINE static void pvalloc_freed(void) {
    void* p = pvalloc(100);
    check_align(p, 4096);
    free(p);
}
NOINLINE static void leak_via_pvalloc(void) {
    void* p = pvalloc(105);
    check_align(p, 4096);
    keep(p);
}

int main(void) {
    posix_memalign_freed();
    leak_via_posix_memalign();
    posix_memalign_invalid();
    aligned_alloc_freed();
    leak_via_aligned_alloc();
    memalign_freed();
    leak_via_memalign();
    valloc_freed();
    leak_via_valloc();
    pvalloc_freed();
    leak_via_pvalloc();
    scrub_stack();
    say(bad ? "alloc_aligned: bad alignment or result\n" : "alloc_aligned done\n");
    return bad;
}
