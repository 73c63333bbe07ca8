// exec_parent: leaks 111 B in exec_parent_leak, then execv()s exec_target (found next to this
// executable) with argument "7"; the final image exits 7. Returns 99 if the exec fails.
#include <stdlib.h>

#include "common.h"

NOINLINE static void exec_parent_leak(void) {
    char* p = malloc(111);
    p[0] = 1;
    keep(p);
}

int main(void) {
    static char path[4096];
    exec_parent_leak();
    if (exe_dir(path, sizeof path - 32) != 0)
        return 98;
    strcat(path, "/exec_target");
    say("exec_parent: exec\n");
    char* argv[] = {"exec_target", "7", NULL};
    execv(path, argv);
    say("exec_parent: exec failed\n");
    return 99;
}
