// foreign_static: linked statically (-static), so there is no dynamic loader to preload an
// agent with. Prints "foreign_static runs" and exits with status 3; with "kill" as argv[1] it
// ends by SIGTERM instead.
#include <signal.h>
#include <string.h>

#include "common.h"

int main(int argc, char** argv) {
    say("foreign_static runs\n");
    if (argc > 1 && !strcmp(argv[1], "kill"))
        raise(SIGTERM);
    return 3;
}
