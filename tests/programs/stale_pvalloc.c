// stale_pvalloc: pvalloc(10) (a whole page: 4096 bytes) then malloc(24), both leaked. memcheck
// 3.19 cannot run pvalloc; LeakSanitizer and the design agree: 2 blocks definitely lost, 4120 B.
#define _GNU_SOURCE
#include <malloc.h>
#include <stdlib.h>

#include "common.h"

NOINLINE static void* leak_pvalloc(void) { return pvalloc(10); }
NOINLINE static void* leak_malloc(void) { return malloc(24); }

int main(void) {
    keep(leak_pvalloc());
    keep(leak_malloc());
    say("stale_pvalloc done\n");
    return 0;
}
