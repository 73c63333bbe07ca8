// tidy: everything it allocates it frees.
#include <stdlib.h>

int main(void) {
    void* p = malloc(64);
    free(p);
    return 0;
}
