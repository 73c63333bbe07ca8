// err_free_stack: free() of a stack address. One invalid_free in free_stack_address.
#include <stdlib.h>

#include "common.h"

NOINLINE static void free_stack_address(void) {
    char local[64];
    local[0] = 1;
    keep(local);
    void* volatile alias = local; // hides the mistake from -Wfree-nonheap-object
    free(alias);
    NO_TAIL_CALL();
}

int main(void) {
    free_stack_address();
    say("err_free_stack survived\n");
    return 0;
}
