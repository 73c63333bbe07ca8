// foreign_noaccess: a block the program makes inaccessible (mprotect PROT_NONE on its pages,
// as a program guarding memory of its own does) and leaves allocated at exit. heaplens's scan
// cannot read it: it must neither fault on it nor give it a verdict. Prints "foreign_noaccess
// done"; exit status 0.
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "common.h"

#define PAGE 4096
#define PAGES 4

static void* guarded; // still referenced at exit

int main(void) {
    if (posix_memalign(&guarded, PAGE, PAGES * PAGE) != 0)
        return 1;
    keep(guarded);
    if (mprotect(guarded, PAGES * PAGE, PROT_NONE) != 0)
        return 2;
    say("foreign_noaccess done\n");
    return 0;
}
