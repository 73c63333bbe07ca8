// stale_rlimit_as [exhaust]: caps its own address space at 256 MiB (RLIMIT_AS), allocates
// 1 MiB blocks until malloc returns NULL and exits with status 5 (through exit: the agent's
// exit scan then runs with almost no address space left). With "exhaust" it also takes every
// smaller block it can get first, down to 16 bytes, so that no memory at all is left for the
// scan. Output does not depend on how much it got (the agent's own mappings count too).
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "common.h"

#define CAP (256ul << 20)

int main(int argc, char** argv) {
    struct rlimit rl = {CAP, CAP};
    if (setrlimit(RLIMIT_AS, &rl) != 0) {
        say("setrlimit failed\n");
        return 1;
    }
    long got = 0;
    void* p;
    while ((p = malloc(1u << 20)) != NULL) {
        keep(p);
        got++;
    }
    if (argc > 1 && strcmp(argv[1], "exhaust") == 0)
        for (size_t size = 1u << 19; size >= 16; size /= 2)
            while ((p = malloc(size)) != NULL)
                keep(p);
    say(got > 0 ? "malloc returned NULL after some blocks\n" : "malloc returned NULL at once\n");
    exit(5);
}
