// SPDX-License-Identifier: MIT
// nothing_live MODE: ends with no block of its own live, so its exit scan has no block to judge
// (the scan then reads no root, and must say what a full one would: scanned, nothing lost).
//   none   allocates nothing
//   freed  allocates 100 blocks, one of them pointed to from a global, and frees them all
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define BLOCKS 100

void* last_seen; // not static: a pointer to a block released since, in the roots a scan reads

int main(int argc, char** argv) {
    if (argc > 1 && strcmp(argv[1], "freed") == 0) {
        void* blocks[BLOCKS];
        for (int i = 0; i < BLOCKS; i++) {
            blocks[i] = malloc(16 + (size_t)i);
            keep(blocks[i]);
        }
        last_seen = blocks[7];
        for (int i = 0; i < BLOCKS; i++)
            free(blocks[i]);
    }
    say("nothing_live done\n");
    return 0;
}
