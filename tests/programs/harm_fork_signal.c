// harm_fork_signal USEC: forks in a loop (each child exits at once) until SIGALRM, armed for USEC
// microseconds, ends it by its default action. Under heaplens the signal often comes between
// fork's prepare handler and its parent handler, while the agent holds the locks the fork took:
// the process must still end by the signal, as natively, with its trace ended.
#include <stdlib.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

int main(int argc, char** argv) {
    long usec = argc > 1 ? atol(argv[1]) : 20000;
    struct itimerval it = {{0, 0}, {usec / 1000000, usec % 1000000}};
    setitimer(ITIMER_REAL, &it, NULL);
    for (;;) {
        char* p = malloc(32);
        keep(p);
        pid_t child = fork();
        if (child == 0)
            _exit(0);
        free(p);
        if (child > 0)
            waitpid(child, NULL, 0);
    }
}
